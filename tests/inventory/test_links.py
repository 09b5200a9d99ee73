"""Link reports land on ports and cables: tt-smi numbers Ethernet channels, the inventory names QSFP-DD
cages, and a card model's port templates say which channels each cage carries (inventory.links)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from inventory.links import P150_QSFP_CHANNELS, cable_for_link, port_for_link, port_keys
from inventory.models import Port, PortTemplate

from .conftest import Builder

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent.parent / "parsers" / "fixtures"


@pytest.fixture
def rig() -> dict[str, Any]:
    """Two p150a cards of one node (the recorded tt-smi output's first two bus ids), A/QSFP1 <-> B/QSFP1
    and A/QSFP2 <-> B/QSFP2 cabled, the port templates wired as the p150 default."""
    build = Builder()
    model = build.card_model(ports=4)
    for t in PortTemplate.objects.filter(card_model=model):
        t.eth_channels = list(P150_QSFP_CHANNELS[t.name])
        t.save()
    node = build.node(hostname="rig01")
    a = build.card(node=node, card_model=model, slot="1", pci_bus_id="0000:01:00.0")
    b = build.card(node=node, card_model=model, slot="2", pci_bus_id="0000:02:00.0")
    port = {
        (c, n): Port.objects.get(card=card, name=n)
        for c, card in (("A", a), ("B", b))
        for n in ("QSFP1", "QSFP2")
    }
    cables = [build.cable(port[("A", n)], port[("B", n)]) for n in ("QSFP1", "QSFP2")]
    return {"node": node, "a": a, "b": b, "port": port, "cables": cables, "model": model}


def _tt_smi(live: dict[str, str | None]) -> str:
    """The recorded 4x p150a tt-smi snapshot, its ETH_LIVE_STATUS per bus id replaced."""
    snap = json.loads((FIXTURES / "tt_smi_4x_p150a.json").read_text())
    for dev in snap["device_info"]:
        bus = dev["board_info"]["bus_id"]
        if bus in live:
            dev["smbus_telem"]["ETH_LIVE_STATUS"] = live[bus]
    return json.dumps(snap)


def test_channels_name_the_port_they_are_wired_to(rig: dict[str, Any]) -> None:
    a, node = rig["a"], rig["node"]
    keys = port_keys(Port.objects.filter(card=a).values_list("pk", flat=True))

    assert keys[(node.pk, a.pk, "qsfp1")] == keys[(node.pk, a.pk, "0")] == keys[(node.pk, a.pk, "1")]
    assert keys[(node.pk, a.pk, "qsfp2")] == keys[(node.pk, a.pk, "3")] == rig["port"][("A", "QSFP2")].pk
    assert (node.pk, a.pk, "8") not in keys  # a core on no cage
    assert port_for_link(node.pk, a.pk, 5) == Port.objects.get(card=a, name="QSFP3")
    assert cable_for_link(node.pk, a.pk, "2") == rig["cables"][1]
    assert cable_for_link(node.pk, rig["b"].pk, "QSFP1") == rig["cables"][0]
    assert cable_for_link(node.pk, a.pk, 4) is None  # QSFP3: not cabled
    assert port_for_link(node.pk, a.pk, "13") is None


def test_tt_smi_eth_live_status_colours_the_cabled_ports(rig: dict[str, Any]) -> None:
    from monitoring.overview import port_link_up
    from monitoring.services import telemetry_ingest_text

    port = rig["port"]
    ids = [p.pk for p in port.values()]
    # card A: channels 0-1 up (QSFP1), 2-3 down (QSFP2); card B: every channel down
    report = telemetry_ingest_text(
        "tt-smi", _tt_smi({"0000:01:00.0": "0x3", "0000:02:00.0": "0x0"}), node_hostname="rig01"
    )
    assert report.problems == []
    assert port_link_up(ids) == {
        port[("A", "QSFP1")].pk: True, port[("A", "QSFP2")].pk: False,
        port[("B", "QSFP1")].pk: False, port[("B", "QSFP2")].pk: False,
    }  # fmt: skip
    # B's QSFP1 comes up with one of its two channels: the port is up only when both are
    telemetry_ingest_text("tt-smi", _tt_smi({"0000:02:00.0": "0x1"}), node_hostname="rig01")
    assert port_link_up(ids)[port[("B", "QSFP1")].pk] is False
    telemetry_ingest_text("tt-smi", _tt_smi({"0000:02:00.0": "0xf"}), node_hostname="rig01")
    assert port_link_up(ids)[port[("B", "QSFP1")].pk] is True
    assert port_link_up(ids)[port[("B", "QSFP2")].pk] is True


def test_a_link_down_alert_on_a_channel_marks_its_port(rig: dict[str, Any]) -> None:
    from monitoring.defaults import alert_rules_ensure_defaults
    from monitoring.models import Alert
    from monitoring.overview import port_link_alerts
    from monitoring.services import telemetry_ingest_samples

    alert_rules_ensure_defaults()
    a, port = rig["a"], rig["port"]

    def link(channel: str, up: bool) -> None:
        telemetry_ingest_samples(
            [{"node": "rig01", "card": a.pci_bus_id, "metric": "link_up", "value": 1.0 if up else 0.0,
              "labels": {"port": channel}}]
        )  # fmt: skip

    link("2", True)
    link("2", False)  # channel 2 of card A goes down: A/QSFP2

    assert Alert.objects.filter(status="firing").count() == 1
    assert port_link_alerts([p.pk for p in port.values()]) == {port[("A", "QSFP2")].pk}


@pytest.mark.parametrize(
    ("channels", "error"),
    [
        ([0, 99], "less than or equal to 63"),
        ("0,1", "Expected a list"),
        ([2, 2], "Each channel once."),
        ([1, 4], "Channel 1 is already wired to port QSFP1 of this model."),
    ],
)
def test_bad_channel_lists_are_refused_with_a_field_error(
    rig: dict[str, Any], admin_user: Any, channels: Any, error: str
) -> None:
    api = APIClient()
    api.force_authenticate(admin_user)
    template = PortTemplate.objects.get(card_model=rig["model"], name="QSFP3")

    r = api.patch(f"/api/inventory/port-templates/{template.pk}/", {"eth_channels": channels}, format="json")

    assert r.status_code == 400, r.content
    assert error in json.dumps(r.json()["eth_channels"])
    template.refresh_from_db()
    assert template.eth_channels == [4, 5]


def test_an_admin_rewires_a_port_template(rig: dict[str, Any], admin_user: Any) -> None:
    api = APIClient()
    api.force_authenticate(admin_user)
    template = PortTemplate.objects.get(card_model=rig["model"], name="QSFP4")

    r = api.patch(f"/api/inventory/port-templates/{template.pk}/", {"eth_channels": [8, 9]}, format="json")

    assert r.status_code == 200, r.content
    assert r.json()["eth_channels"] == [8, 9]
    assert port_for_link(rig["node"].pk, rig["a"].pk, "9") == Port.objects.get(card=rig["a"], name="QSFP4")
    model = api.get(f"/api/inventory/card-models/{rig['model'].pk}/").json()
    assert {t["name"]: t["eth_channels"] for t in model["port_templates"]}["QSFP4"] == [8, 9]
