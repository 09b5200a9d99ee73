"""The fabric drawing: links coloured by cable state and link telemetry, pushed when a link changes."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.test import Client

from portal.live import groups, push

from .conftest import communicator

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fabric() -> dict[str, Any]:
    """A Blackhole 1×2 fabric of two cards on two nodes, QSFP1 of A cabled to QSFP1 of B."""
    from inventory.models import Fabric, Port
    from inventory.services import cable_connect
    from inventory.topology.services import MemberInput, fabric_save
    from tests.inventory.conftest import Builder

    build = Builder()
    model = build.card_model(ports=2)
    cards = [
        build.card(
            node=build.node(hostname=f"bh{i}"),
            card_model=model,
            gpu_uuid=f"GPU-0000000{i}-0000-0000-0000-00000000000{i}",
        )
        for i in (1, 2)
    ]
    fab = fabric_save(
        Fabric(name="bh-pair", template="bh-1x2"), user=None, members=[MemberInput(card=c) for c in cards]
    )
    a, b = (Port.objects.get(card=c, name="QSFP1") for c in cards)
    cable = cable_connect(a_port=a, b_port=b, user=None, kind="dac")
    return {"fabric": fab, "cards": cards, "cable": cable, "ports": (a, b)}


def _link(card: Any, port: str, up: bool) -> None:
    from monitoring.services import telemetry_ingest_samples

    telemetry_ingest_samples(
        [{"node": card.node.hostname, "card": card.gpu_uuid, "metric": "link_up", "value": 1.0 if up else 0.0,
          "labels": {"port": port}}]
    )  # fmt: skip


def _line(html: str, cable: Any) -> str:
    start = html.index(f'data-cable="{cable.pk}"')
    return html[html.rindex("<line", 0, start) : html.index("</line>", start)]


def test_link_colours_follow_the_cable_status_and_link_telemetry() -> None:
    from inventory.topology.check import CableInfo, FabricData, MemberInfo, PortInfo, check
    from inventory.topology.svg import COLOURS, render

    members = tuple(
        MemberInfo(x, "card", (PortInfo(i, x, "QSFP1", "qsfp-dd", 800),)) for i, x in ((1, "A"), (2, "B"))
    )
    data = FabricData("bh-1x2", {}, members, (CableInfo(9, 1, 2, "connected"),))
    result = check(data)

    unknown, up, down = (
        render(data, result, links) for links in ({}, {1: True, 2: True}, {1: True, 2: False})
    )
    planned = render(FabricData("bh-1x2", {}, members, (CableInfo(9, 1, 2, "planned"),)), result, {1: False})

    assert 'class="link link-unknown cable-connected"' in unknown and COLOURS["ok"] in unknown
    assert 'class="link link-up cable-connected"' in up and f'stroke="{COLOURS["up"]}"' in up
    assert "link up" in up
    assert 'class="link link-down cable-connected"' in down and f'stroke="{COLOURS["down"]}"' in down
    assert 'stroke-dasharray="2 3"' in planned and "link down" not in planned


def test_port_link_up_matches_the_port_label_of_the_cards_series(fabric: dict[str, Any]) -> None:
    from monitoring.overview import port_link_up

    a, b = fabric["ports"]
    _link(fabric["cards"][0], "qsfp1", True)
    _link(fabric["cards"][1], "QSFP1", False)
    _link(fabric["cards"][1], "QSFP2", True)

    assert port_link_up([a.pk, b.pk]) == {a.pk: True, b.pk: False}


def test_fabric_page_draws_the_link_by_its_telemetry(fabric: dict[str, Any], admin_user: Any) -> None:
    _link(fabric["cards"][0], "QSFP1", True)
    _link(fabric["cards"][1], "QSFP1", True)
    client = Client()
    client.force_login(admin_user)

    body = client.get(f"/inventory/fabrics/{fabric['fabric'].pk}/").content.decode()

    assert f'ws-connect="/ws/live/fabric/{fabric["fabric"].pk}/"' in body
    assert f'id="fabric-drawing-{fabric["fabric"].pk}"' in body
    assert "link-up" in _line(body, fabric["cable"])


def test_a_link_going_down_is_pushed_to_the_fabric_page_once(
    fabric: dict[str, Any], readonly_user: Any
) -> None:
    from inventory import live as inventory_live

    inventory_live._fabric_links.clear()
    card_a, card_b = fabric["cards"]
    _link(card_a, "QSFP1", True)
    _link(card_b, "QSFP1", True)
    push.coalescer.take()
    pk = fabric["fabric"].pk

    async def scenario() -> tuple[str, str, bool]:
        comm = communicator(f"/ws/live/fabric/{pk}/", readonly_user)
        assert (await comm.connect())[0]
        snap = await comm.receive_from(5)
        await database_sync_to_async(lambda: (_link(card_b, "QSFP1", False), push.flush_now()))()
        pushed = await comm.receive_from(5)
        await database_sync_to_async(lambda: (_link(card_b, "QSFP1", False), push.flush_now()))()
        same_again = await comm.receive_nothing(timeout=0.5)
        await comm.disconnect()
        return snap, pushed, same_again

    snap, pushed, same_again = async_to_sync(scenario)()
    assert "link-up" in _line(snap, fabric["cable"])
    assert f'id="fabric-drawing-{pk}"' in pushed and "link-down" in _line(pushed, fabric["cable"])
    assert same_again is True


def test_telemetry_of_a_member_node_is_routed_to_its_fabric_group(fabric: dict[str, Any]) -> None:
    card = fabric["cards"][0]

    messages = push.route({"card": [card.pk]}, seq="s", ts=0.0)

    assert messages[groups.fabric(fabric["fabric"].pk)]["ids"] == {"node": [card.node_id]}


def test_a_user_without_the_fabric_permission_is_refused(fabric: dict[str, Any], make_user: Any) -> None:
    nobody = make_user("nobody")

    async def scenario() -> Any:
        comm = communicator(f"/ws/live/fabric/{fabric['fabric'].pk}/", nobody)
        result = await comm.connect()
        await comm.disconnect()
        return result

    assert async_to_sync(scenario)() == (False, 4403)


def test_a_firing_link_down_alert_colours_its_link_and_a_link_up_resolves_it(fabric: dict[str, Any]) -> None:
    from inventory.live import fabric_links
    from inventory.topology.data import fabric_data
    from monitoring.defaults import alert_rules_ensure_defaults
    from monitoring.models import Alert, LatestValue

    alert_rules_ensure_defaults()
    card_a, card_b = fabric["cards"]
    port_a, port_b = fabric["ports"]
    _link(card_a, "QSFP1", True)
    _link(card_b, "QSFP1", True)
    assert Alert.objects.count() == 0
    # the link goes down: a "Link down" alert fires on card B's QSFP1
    _link(card_b, "QSFP1", False)
    alert = Alert.objects.get()
    assert (alert.rule.name, alert.status, alert.node_id) == ("Link down", "firing", card_b.node_id)
    # with no link telemetry left at all, the firing alert alone makes the link red
    LatestValue.objects.all().delete()
    data = fabric_data(fabric["fabric"])
    assert fabric_links(data) == {port_b.pk: False}
    # the link comes back: the alert resolves with the event, the link is up again
    _link(card_b, "QSFP1", False)  # (the state the event compares with)
    _link(card_b, "QSFP1", True)
    alert.refresh_from_db()
    assert alert.status == "resolved" and alert.resolved_at is not None
    assert alert.message == "Link down (port QSFP1) — cleared: Link up (port QSFP1)"
    assert fabric_links(fabric_data(fabric["fabric"])) == {port_b.pk: True}
    assert port_a.pk not in fabric_links(fabric_data(fabric["fabric"]))
