"""A failed sync is pushed to the live overview: "Slurm unreachable since …" appears without a reload,
and goes away with the next good sync (real Redis channel layer, the real ASGI application)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async

from jobs.cluster import RetryableError
from portal.live import push

pytestmark = pytest.mark.django_db(transaction=True)

ERROR = "sinfo: Slurm reported: Unspecified error"


class _Down:
    def list_nodes(self) -> list[Any]:
        raise RetryableError(ERROR)


class _Empty:
    """A reachable cluster that lists nothing (so the good sync changes no row)."""

    warnings: list[str] = []

    def list_nodes(self) -> list[Any]:
        return []

    def list_jobs(self, *, user: str | None = None) -> list[Any]:
        return []

    def list_partitions(self) -> list[Any]:
        return []


def test_an_outage_and_its_end_are_pushed_to_the_overview(rig: dict[str, Any], operator_user: Any) -> None:
    from channels.testing.websocket import WebsocketCommunicator
    from django.test import Client

    from jobs.sync import cluster_sync
    from portal.asgi import application

    client = Client()
    client.force_login(operator_user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    cluster = rig["cluster"]

    def sync(backend: Any) -> None:
        cluster_sync(cluster, backend=backend)
        push.flush_now()

    async def scenario() -> tuple[str, str, str]:
        comm = WebsocketCommunicator(
            application, "/ws/live/overview/", headers=[(b"cookie", cookie), (b"origin", b"http://127.0.0.1")]
        )
        assert (await comm.connect())[0]
        snapshot = await comm.receive_from(timeout=5)
        await database_sync_to_async(sync)(_Down())
        down = await comm.receive_from(timeout=5)
        await database_sync_to_async(sync)(_Empty())
        back = await comm.receive_from(timeout=5)
        await comm.disconnect()
        return snapshot, down, back

    snapshot, down, back = async_to_sync(scenario)()
    assert "Slurm unreachable" not in snapshot
    assert f'id="overview-cluster-{cluster.pk}" class="card cluster overview is-stale"' in down
    assert "Stale data: Slurm unreachable since " in down
    assert f'<span class="sync-error">{ERROR}</span>' in down
    assert f'id="overview-cluster-{cluster.pk}" class="card cluster overview"' in back
    assert "Slurm unreachable" not in back and "Stale data" not in back
