"""Bad input: a 400 naming the field, nothing written."""

from __future__ import annotations

from typing import Any

from inventory.models import Cable, Node, Rack, Site
from portal.models import AuditEntry


def test_malformed_json_is_400(api: Any) -> None:
    res = api.post("/api/inventory/sites/", "{not json", content_type="application/json")
    assert res.status_code == 400
    assert "Malformed" in res.json()["detail"]
    assert Site.objects.count() == 0


def test_wrong_type_names_the_field(api: Any, build: Any) -> None:
    site = build.site()
    res = api.post(
        "/api/inventory/racks/", {"name": "R1", "site": site.pk, "u_height": "tall"}, format="json"
    )
    assert res.status_code == 400
    assert "u_height" in res.json()
    assert Rack.objects.count() == 0


def test_unknown_foreign_key(api: Any) -> None:
    res = api.post("/api/inventory/racks/", {"name": "R1", "site": 999999}, format="json")
    assert res.status_code == 400
    assert "site" in res.json()


def test_duplicate_name(api: Any, build: Any) -> None:
    build.node(hostname="gpu01")
    res = api.post("/api/inventory/nodes/", {"hostname": "gpu01"}, format="json")
    assert res.status_code == 400
    assert "hostname" in res.json()
    assert Node.objects.filter(hostname="gpu01").count() == 1


def test_node_outside_its_rack(api: Any, build: Any) -> None:
    rack = build.rack(u_height=10)
    res = api.post(
        "/api/inventory/nodes/",
        {"hostname": "big", "rack": rack.pk, "position": 9, "u_height": 4},
        format="json",
    )
    assert res.status_code == 400
    assert "does not fit" in res.json()["position"][0]
    assert not Node.objects.filter(hostname="big").exists()


def test_overlapping_rack_positions(api: Any, build: Any) -> None:
    rack = build.rack(u_height=42)
    build.node(hostname="a", rack=rack, position=10, u_height=2)
    res = api.post("/api/inventory/nodes/", {"hostname": "b", "rack": rack.pk, "position": 11}, format="json")
    assert res.status_code == 400
    assert "overlaps a" in res.json()["position"][0]
    ok = api.post("/api/inventory/nodes/", {"hostname": "c", "rack": rack.pk, "position": 12}, format="json")
    assert ok.status_code == 201


def test_position_without_rack(api: Any) -> None:
    res = api.post("/api/inventory/nodes/", {"hostname": "x", "position": 3}, format="json")
    assert res.status_code == 400
    assert "rack" in str(res.json()).lower()


def test_cable_onto_occupied_port(api: Any, build: Any) -> None:
    a, b, c = build.port(), build.port(), build.port()
    build.cable(a, b)
    res = api.post("/api/inventory/cables/", {"a_port": c.pk, "b_port": b.pk, "kind": "dac"}, format="json")
    assert res.status_code == 400
    assert "already carries cable" in res.json()["b_port"][0]
    assert Cable.objects.count() == 1


def test_cable_to_same_card_or_itself(api: Any, build: Any) -> None:
    card = build.card()
    p1, p2 = card.ports.order_by("name")[:2]
    res = api.post("/api/inventory/cables/", {"a_port": p1.pk, "b_port": p2.pk, "kind": "dac"}, format="json")
    assert res.status_code == 400 and "same card" in res.json()["b_port"][0]
    res = api.post("/api/inventory/cables/", {"a_port": p1.pk, "b_port": p1.pk, "kind": "dac"}, format="json")
    assert res.status_code == 400 and "itself" in res.json()["b_port"][0]
    assert Cable.objects.count() == 0


def test_card_slot_taken_and_uuid_unique(api: Any, build: Any) -> None:
    card = build.card(gpu_uuid="GPU-5e1f0c2a-77aa-4c1e-9d0b-1f2e3d4c5b6a")
    res = api.post(
        "/api/inventory/cards/",
        {"node": card.node_id, "card_model": card.card_model_id, "slot": card.slot},
        format="json",
    )
    assert res.status_code == 400 and "slot" in str(res.json())
    res = api.post(
        "/api/inventory/cards/",
        {"node": build.node().pk, "card_model": card.card_model_id, "slot": "0", "gpu_uuid": card.gpu_uuid},
        format="json",
    )
    assert res.status_code == 400 and "GPU UUID" in str(res.json())


def test_bulk_create_is_all_or_nothing(api: Any, build: Any) -> None:
    site = build.site()
    body = [{"name": "R1", "site": site.pk}, {"name": "R2", "site": site.pk}, {"name": "R1", "site": site.pk}]
    res = api.post("/api/inventory/racks/", body, format="json")
    assert res.status_code == 400
    errors = res.json()
    assert errors[0] == {} and errors[1] == {} and errors[2]
    assert Rack.objects.count() == 0
    assert not AuditEntry.objects.filter(action="create").exists()
    ok = api.post("/api/inventory/racks/", body[:2], format="json")
    assert ok.status_code == 201 and [r["name"] for r in ok.json()] == ["R1", "R2"]


def test_bulk_cables(api: Any, build: Any) -> None:
    ports = [build.port() for _ in range(4)]
    body = [
        {"a_port": ports[0].pk, "b_port": ports[1].pk, "kind": "dac"},
        {"a_port": ports[2].pk, "b_port": ports[1].pk, "kind": "dac"},
    ]
    assert api.post("/api/inventory/cables/", body, format="json").status_code == 400
    assert Cable.objects.count() == 0


def test_delete_protected_is_400(api: Any, build: Any) -> None:
    node = build.node()
    build.card(node=node)
    res = api.delete(f"/api/inventory/nodes/{node.pk}/")
    assert res.status_code == 400
    assert "still used by" in str(res.json())
    assert Node.objects.filter(pk=node.pk).exists()
