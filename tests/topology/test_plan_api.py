"""Fabric API: create with members, check, plan preview and creation (all or nothing), permissions, pages."""

from __future__ import annotations

from typing import Any

import pytest

from inventory.choices import CableStatus
from inventory.models import Cable, CableTermination, Fabric
from inventory.topology.data import fabric_check
from portal.models import AuditEntry
from tests.text import page_text


def make_fabric(api: Any, build: Any, template: str, n: int, params: dict | None = None) -> tuple[int, list]:
    node = build.node()
    model = build.card_model()
    cards = [build.card(node=node, card_model=model, slot=f"S{i}") for i in range(n)]
    body = {
        "name": f"f-{template}-{n}",
        "template": template,
        "params": params or {},
        "members": [{"card": c.pk} for c in cards],
    }
    res = api.post("/api/inventory/fabrics/", body, format="json")
    assert res.status_code == 201, res.json()
    return res.json()["id"], cards


@pytest.mark.parametrize(
    ("template", "n", "params", "cables"),
    [
        ("mesh4", 4, {}, 6),
        ("bh-1x2", 2, {}, 1),
        ("bh-2x2", 4, {}, 8),
        ("bh-2x4", 8, {}, 10),
        ("ring", 6, {"lanes": 2}, 12),
    ],
)
def test_plan_creation_realises_every_template_and_checks_clean(
    api: Any, build: Any, template: str, n: int, params: dict, cables: int
) -> None:
    # given a fabric of uncabled cards
    pk, _cards = make_fabric(api, build, template, n, params)
    before = api.get(f"/api/inventory/fabrics/{pk}/check/").json()
    assert before["ok"] is False
    # when the plan is created
    res = api.post(f"/api/inventory/fabrics/{pk}/plan/")
    # then every cable is planned and the fabric checks clean
    assert res.status_code == 201 and res.json()["count"] == cables
    assert Cable.objects.filter(status=CableStatus.PLANNED).count() == cables
    after = api.get(f"/api/inventory/fabrics/{pk}/check/").json()
    assert (after["ok"], after["findings"], after["cables"]) == (True, [], cables)
    assert api.get(f"/api/inventory/fabrics/{pk}/plan/").json()["links"] == []


def test_star_plan_from_nodes(api: Any, build: Any) -> None:
    switch = build.node()
    ports = [build.port(node=switch, name=f"p{i}", kind="infiniband", speed_gbps=400) for i in range(1, 5)]
    hosts = [build.node() for _ in range(3)]
    for h in hosts:
        build.port(node=h, name="ib0", kind="infiniband", speed_gbps=400)
    body = {
        "name": "ib",
        "template": "star",
        "members": [{"node": switch.pk, "role": "switch", "label": "sw"}]
        + [{"node": h.pk, "role": "host", "label": h.hostname} for h in hosts],
    }
    pk = api.post("/api/inventory/fabrics/", body, format="json").json()["id"]
    plan = api.get(f"/api/inventory/fabrics/{pk}/plan/").json()
    assert [(ln["a"], ln["b"]) for ln in plan["links"]] == [
        (f"{h.hostname}.ib0", f"sw.p{i}") for i, h in enumerate(hosts, 1)
    ]
    assert api.post(f"/api/inventory/fabrics/{pk}/plan/").status_code == 201
    assert api.get(f"/api/inventory/fabrics/{pk}/check/").json()["findings"] == []
    # the planned cables join each host's ib0 to the next switch port; the fourth port stays free
    ends = {}
    for t in CableTermination.objects.select_related("port__node", "cable"):
        ends.setdefault(t.cable_id, {})[t.port.node.hostname] = t.port.name
    assert sorted(tuple(sorted(e.items())) for e in ends.values()) == sorted(
        tuple(sorted({h.hostname: "ib0", switch.hostname: f"p{i}"}.items())) for i, h in enumerate(hosts, 1)
    )
    assert set(Cable.objects.values_list("status", flat=True)) == {CableStatus.PLANNED}
    assert not CableTermination.objects.filter(port=ports[3]).exists()


def test_plan_refuses_when_a_planned_port_is_cabled_and_writes_nothing(api: Any, build: Any) -> None:
    # given a mesh whose A.QSFP1 already carries a cable to a card outside the fabric
    pk, cards = make_fabric(api, build, "mesh4", 4)
    stranger = build.card()
    build.cable(cards[0].ports.get(name="QSFP1"), stranger.ports.get(name="QSFP1"))
    count, audits = Cable.objects.count(), AuditEntry.objects.count()
    # when the plan is created
    res = api.post(f"/api/inventory/fabrics/{pk}/plan/")
    # then 400 names the port and nothing was written
    assert res.status_code == 400
    assert res.json() == {"ports": ["A.QSFP1: A.QSFP1 is already cabled."]}
    assert (Cable.objects.count(), AuditEntry.objects.count()) == (count, audits)


def test_plan_keeps_correct_cables_and_adds_the_rest(api: Any, build: Any) -> None:
    pk, cards = make_fabric(api, build, "bh-1x2", 2)
    build.cable(cards[0].ports.get(name="QSFP1"), cards[1].ports.get(name="QSFP1"))
    assert api.get(f"/api/inventory/fabrics/{pk}/plan/").json() == {
        "ok": True,
        "kept": 1,
        "errors": [],
        "links": [],
    }


def test_researcher_reads_checks_but_cannot_create_a_plan(
    api_as: Any, researcher_user: Any, api: Any, build: Any
) -> None:
    pk, _cards = make_fabric(api, build, "bh-1x2", 2)
    client = api_as(researcher_user)
    assert client.get(f"/api/inventory/fabrics/{pk}/check/").status_code == 200
    assert client.post(f"/api/inventory/fabrics/{pk}/plan/").status_code == 403
    assert Cable.objects.count() == 0


def test_bad_members_are_a_400_and_nothing_is_saved(api: Any, build: Any) -> None:
    card = build.card()
    body = {"name": "dup", "template": "bh-1x2", "members": [{"card": card.pk}, {"card": card.pk}]}
    res = api.post("/api/inventory/fabrics/", body, format="json")
    assert res.status_code == 400 and res.json() == {"members": ["A card or node is listed twice."]}
    assert not Fabric.objects.filter(name="dup").exists()
    res = api.post(
        "/api/inventory/fabrics/", {"name": "x", "template": "ring", "params": {"lanes": 0}}, format="json"
    )
    assert res.status_code == 400 and "params" in res.json()


def test_fabric_data_is_gathered_in_constant_queries(
    api: Any, build: Any, django_assert_max_num_queries: Any
) -> None:
    small, _c = make_fabric(api, build, "bh-1x2", 2)
    big, _c = make_fabric(api, build, "bh-2x4", 8)
    api.post(f"/api/inventory/fabrics/{big}/plan/")
    for pk in (small, big):
        fabric = Fabric.objects.get(pk=pk)
        with django_assert_max_num_queries(3):  # members, ports, cable ends
            fabric_check(fabric)


def test_fabric_pages_render_drawing_findings_and_wiring_sheet(
    client: Any, admin_user: Any, api: Any, build: Any
) -> None:
    pk, _cards = make_fabric(api, build, "mesh4", 4)
    client.force_login(admin_user)
    page = client.get(f"/inventory/fabrics/{pk}/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "<svg" in html and "finding-missing_link" in html and "Create 6 planned cables" in html
    assert client.post(f"/inventory/fabrics/{pk}/plan/").status_code == 302
    assert Cable.objects.count() == 6
    sheet = client.get(f"/inventory/fabrics/{pk}/wiring/").content.decode()
    assert "A.QSFP1-B.QSFP1" in sheet
    listing = page_text(client.get("/inventory/fabrics/"))
    assert "Fabrics Add 1 result Name Cluster Template Members Description" in listing
    assert "f-mesh4-4 — 4-card full mesh (the guide's 6-cable port map) 4 —" in listing
    form = page_text(client.get("/inventory/fabrics/add/"))
    assert "Add fabric Name * Cluster --------- Template * --------- 4-card full mesh" in form
    assert "Cards " + " ".join(str(c) for c in _cards) + " Labelled A, B, C … in node and slot order." in form
