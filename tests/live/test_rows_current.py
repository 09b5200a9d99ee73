"""Rows stay current: the node operations table is pushed the rows that changed (and only those),
cards of a node Slurm marks down are shown stale, and portal/live is only the mechanism."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.test import Client

from portal.live import push

from .conftest import communicator

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
DOMAINS = ("inventory", "jobs", "monitoring")


def test_portal_live_imports_no_domain_app() -> None:
    imported: dict[str, set[str]] = {}
    for path in sorted((ROOT / "portal" / "live").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if name.split(".")[0] in DOMAINS:
                    imported.setdefault(str(path.relative_to(ROOT)), set()).add(name)
    assert imported == {}


def test_every_app_registers_its_live_parts() -> None:
    from portal.live import registry

    assert set(registry.kinds()) == {"node", "card", "cluster", "job", "action", "alert"}
    assert sorted(registry.websocket_routes()) == [
        "ws/live/fabric/<int:pk>/", "ws/live/jobs/", "ws/live/node/<int:pk>/", "ws/live/nodeops/",
        "ws/live/overview/", "ws/live/rack/<int:pk>/",
    ]  # fmt: skip
    assert [s.group for s in registry.summaries()] == ["overview"]


def _run(coro: Any) -> Any:
    return async_to_sync(coro)()


def test_node_ops_socket_sends_a_row_when_it_changes_and_only_then(
    rig: dict[str, Any], admin_user: Any
) -> None:
    from inventory.models import Node

    node = rig["nodes"][0]

    async def scenario() -> tuple[list[str], list[str], bool]:
        comm = communicator("/ws/live/nodeops/", admin_user)
        connected, _ = await comm.connect()
        assert connected
        snapshot = [await comm.receive_from(5), await comm.receive_from(5)]

        def drain() -> None:
            Node.objects.filter(pk=node.pk).update(slurm_state="drained", slurm_reason="fans")
            push.mark_changed("node", [node.pk])
            push.flush_now()

        await database_sync_to_async(drain)()
        changed = [await comm.receive_from(5), await comm.receive_from(5)]
        # the same node pushed again without a change in its row: nothing is sent
        await database_sync_to_async(lambda: (push.mark_changed("node", [node.pk]), push.flush_now()))()
        quiet = await comm.receive_nothing(0.5)
        await comm.disconnect()
        return snapshot, changed, quiet

    snapshot, changed, quiet = _run(scenario)
    assert snapshot[0].startswith('<span id="live-status"') and 'data-seq="snapshot"' in snapshot[0]
    assert snapshot[1].startswith('<tbody id="node-rows">') and snapshot[1].count('<tr id="node-') == 2
    assert changed[0].startswith('<span id="live-status"')
    assert changed[1].startswith(f'<tr id="node-{node.pk}">') and changed[1].count("<tr ") == 1
    assert "drained" in changed[1] and "fans" in changed[1]
    assert quiet is True


def test_node_ops_socket_follows_the_pages_filters_and_needs_the_permission(
    rig: dict[str, Any], admin_user: Any, researcher_user: Any
) -> None:
    async def scenario() -> tuple[str, Any]:
        comm = communicator("/ws/live/nodeops/?q=gpu02", admin_user)
        await comm.connect()
        await comm.receive_from(5)
        rows = await comm.receive_from(5)
        await comm.disconnect()
        denied = communicator("/ws/live/nodeops/", researcher_user)
        result = await denied.connect()
        return rows, result

    rows, (connected, code) = _run(scenario)
    assert f'id="node-{rig["nodes"][1].pk}"' in rows and f'id="node-{rig["nodes"][0].pk}"' not in rows
    assert (connected, code) == (False, 4403)


@pytest.mark.parametrize(
    ("state", "stale"),
    [("down", True), ("down*", True), ("idle*", True), ("fail", True), ("unknown", True),
     ("drained", False), ("idle", False), ("mixed", False), ("", False)],
)  # fmt: skip
def test_which_slurm_states_make_readings_stale(state: str, stale: bool) -> None:
    from monitoring.overview import slurm_unreachable

    assert slurm_unreachable(state) is stale


def test_cards_of_a_node_slurm_marks_down_are_not_shown_green(
    rig: dict[str, Any], ingest: Any, admin_user: Any
) -> None:
    from inventory.models import Node
    from monitoring.overview import node_thermal_list

    card = rig["cards"][0]
    ingest(card, temperature=57.0)
    node = card.node
    (before,) = node_thermal_list(node_ids=[node.pk])
    assert [c.level for c in before.cards[:1]] == ["ok"]
    Node.objects.filter(pk=node.pk).update(slurm_state="down*")
    (after,) = node_thermal_list(node_ids=[node.pk])
    assert after.stale is True and after.level == "unknown"
    assert [(c.level, c.stale, c.temperature) for c in after.cards[:1]] == [("unknown", True, 57.0)]
    client = Client()
    client.force_login(admin_user)
    page = client.get(f"/inventory/racks/{rig['rack'].pk}/").content.decode()
    span = re.search(
        rf'<span id="thermal-card-{card.pk}" class="([^"]+)"[^>]*>(.*?)</span> ([^<]*)</span>', page
    )
    assert span is not None and span.group(1) == "tcard temp-unknown stale-reading"
    assert span.group(3) == "57?°"
    assert "readings stale: Slurm reports the node down" in page
