from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command

from inventory.models import Cable, Card, Cluster, Node, Port, PowerLead
from portal.models import AuditEntry
from tests.text import page_text

PAGES = [
    "sites",
    "clusters",
    "racks",
    "nodes",
    "card-models",
    "cards",
    "ports",
    "cables",
    "power-feeds",
    "psus",
    "power-leads",
]


def _counts() -> tuple[int, ...]:
    return tuple(m.objects.count() for m in (Cluster, Node, Card, Port, Cable, PowerLead))


def test_seed_demo_twice_gives_the_same_data(db: Any) -> None:
    call_command("seed_demo")
    first = _counts()
    call_command("seed_demo")
    assert _counts() == first
    assert set(Cluster.objects.values_list("name", flat=True)) == {"rig-01", "h100-pod", "gb10-desk"}
    rig = Node.objects.get(hostname="rig01")
    assert rig.cards.count() == 4 and {c.card_model.name for c in rig.cards.all()} == {"Blackhole p150a"}
    assert Cable.objects.filter(terminations__port__node=rig).distinct().count() == 6
    assert Card.objects.filter(node__cluster__name="h100-pod").count() == 32
    assert all(c.gpu_uuid.startswith("GPU-") for c in Card.objects.filter(card_model__vendor="NVIDIA"))
    assert all(c.pci_bus_id for c in Card.objects.all())


@pytest.mark.parametrize("page", PAGES)
def test_list_pages_render_for_researcher(client: Any, researcher_user: Any, page: str) -> None:
    call_command("seed_demo")
    client.force_login(researcher_user)
    res = client.get(f"/inventory/{page}/")
    assert res.status_code == 200
    assert b'id="object-table"' in res.content
    assert b"Add</a>" not in res.content  # researchers cannot add


def test_list_filters_via_htmx_return_the_table_only(client: Any, admin_user: Any) -> None:
    call_command("seed_demo")
    client.force_login(admin_user)
    res = client.get("/inventory/nodes/?q=gpu0", HTTP_HX_REQUEST="true")
    body = res.content.decode()
    assert res.status_code == 200 and "<html" not in body
    assert "gpu01" in body and "rig01" not in body


def test_detail_pages_and_rack_elevation(client: Any, admin_user: Any) -> None:
    call_command("seed_demo")
    client.force_login(admin_user)
    rig = Node.objects.get(hostname="rig01")
    res = client.get(f"/inventory/nodes/{rig.pk}/")
    assert res.status_code == 200 and b"Blackhole p150a" in res.content
    rack = rig.rack
    res = client.get(f"/inventory/racks/{rack.pk}/")
    assert res.status_code == 200
    assert f'id="rack-node-{rig.pk}"'.encode() in res.content
    card = Card.objects.select_related("node", "card_model").get(node=rig, slot="A")
    text = page_text(client.get(f"/inventory/cards/{card.pk}/"))
    assert text.startswith(
        f"Card rig01/A Timeline Edit Delete Node rig01 Model {card.card_model} Slot A Status Active"
    )
    cable = Cable.objects.get(label="A1-B1")
    text = page_text(client.get(f"/inventory/cables/{cable.pk}/"))
    assert text.startswith(
        "Cable A1-B1 Flap history and timeline Edit Delete A end rig01/A QSFP1 B end rig01/B QSFP1 Kind QSFP-DD DAC"
    )
    cluster = rig.cluster
    text = page_text(client.get(f"/inventory/clusters/{cluster.pk}/"))
    assert text.startswith(f"Cluster {cluster.name} Edit Delete Site {cluster.site} Backend Simulator (demo)")
    rows = [
        " ".join([n.hostname, n.get_role_display(), n.get_status_display(), n.slurm_state or "—"])
        + (f" {n.slurm_reason}" if n.slurm_reason else "")
        + f" {n.cards.count()}"
        for n in cluster.nodes.all()
    ]
    assert len(rows) >= 2
    assert all(
        f" {row}" in text.split("Nodes Hostname Role Status Slurm state Reason Cards", 1)[1] for row in rows
    )


def test_form_create_validates_inline_and_writes_nothing_on_error(
    client: Any, admin_user: Any, build: Any
) -> None:
    rack = build.rack(u_height=4)
    client.force_login(admin_user)
    res = client.post(
        "/inventory/nodes/add/",
        {
            "hostname": "big",
            "rack": rack.pk,
            "position": 3,
            "u_height": 4,
            "role": "compute",
            "status": "active",
            "bmc_kind": "none",
            "purchase_cost": "0",
        },
        HTTP_HX_REQUEST="true",
    )
    assert res.status_code == 400
    assert b"does not fit" in res.content and b"<html" not in res.content
    assert not Node.objects.filter(hostname="big").exists()
    res = client.post(
        "/inventory/nodes/add/",
        {
            "hostname": "small",
            "rack": rack.pk,
            "position": 1,
            "u_height": 1,
            "role": "compute",
            "status": "active",
            "bmc_kind": "none",
            "purchase_cost": "0",
        },
    )
    assert res.status_code == 302
    assert AuditEntry.objects.filter(action="create", object_repr="small", username="ada").exists()


def test_researcher_cannot_open_edit_pages(client: Any, researcher_user: Any, build: Any) -> None:
    node = build.node()
    client.force_login(researcher_user)
    assert client.get("/inventory/nodes/add/").status_code == 403
    assert client.post(f"/inventory/nodes/{node.pk}/delete/").status_code == 403
    assert Node.objects.filter(pk=node.pk).exists()


def test_anonymous_is_sent_to_login(client: Any, db: Any) -> None:
    res = client.get("/inventory/nodes/")
    assert res.status_code == 302 and res["Location"].startswith("/login/")


def test_login_is_rate_limited(client: Any, researcher_user: Any) -> None:
    for _ in range(5):
        assert client.post("/login/", {"username": "alice", "password": "wrong"}).status_code == 200
    res = client.post("/login/", {"username": "alice", "password": "pw-alice"})
    assert res.status_code == 429 and b"Too many failed logins" in res.content
