"""A group send that fails is not silently dropped: its group is marked for resync and, once the
layer takes sends again, each of its sockets gets a fresh snapshot. Against a real Redis that is
killed and restarted (the first send on the connection Redis dropped fails)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async

from portal.live import groups, push

from .conftest import communicator

pytestmark = pytest.mark.django_db(transaction=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _redis(port: int, tmp_path: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


@pytest.fixture
def own_redis(settings: Any, tmp_path: Path) -> Any:
    if shutil.which("redis-server") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true and redis-server is not installed")
        pytest.skip("redis-server is not installed")
    from channels.layers import channel_layers

    port = _free_port()
    state = {"proc": _redis(port, tmp_path)}
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [{"address": f"redis://127.0.0.1:{port}/0"}], "prefix": "rp-resync"},
        }
    }
    channel_layers.backends.clear()

    def restart() -> None:
        state["proc"].send_signal(signal.SIGKILL)
        state["proc"].wait()
        state["proc"] = _redis(port, tmp_path)

    yield restart
    state["proc"].terminate()
    state["proc"].wait()
    push.coalescer._loop = None  # its connections were to this Redis
    channel_layers.backends.clear()


def test_the_first_push_after_redis_returns_reaches_the_page(
    own_redis: Any, rig: dict[str, Any], admin_user: Any, ingest: Any
) -> None:
    card = rig["cards"][0]

    async def scenario() -> tuple[set[str], list[str], set[str]]:
        page = communicator("/ws/live/overview/", admin_user)
        assert (await page.connect())[0]
        await page.receive_from(timeout=5)  # snapshot
        # given a push that went through (the sender's connection to Redis is open)
        await database_sync_to_async(lambda: (ingest(card, temperature=50.0), push.flush_now()))()
        assert "temp-critical" not in await page.receive_from(timeout=5)
        # when Redis restarts and the next reading is pushed
        own_redis()
        await database_sync_to_async(lambda: (ingest(card, temperature=97.0), push.flush_now()))()
        marked = push.coalescer.resync_pending()
        # then the flush's first send (the overview's, on the connection Redis dropped) failed and
        # marked its group; a later flush sends it a resync and the page gets a fresh snapshot
        frames: list[str] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not any("temp-critical" in f for f in frames):
            await database_sync_to_async(push.flush_now)()
            while not await page.receive_nothing(timeout=1):  # (a timeout would end the consumer)
                frames.append(await page.receive_from(timeout=5))
        left = push.coalescer.resync_pending()
        await page.disconnect()
        return marked, frames, left

    marked, frames, left = async_to_sync(scenario)()
    assert marked == {groups.OVERVIEW}
    hot = [f for f in frames if "temp-critical" in f]
    assert hot and "97 °C" in hot[0] and "snapshot" in hot[0], frames
    assert left == set()


def test_the_flusher_thread_retries_the_resync_by_itself(
    settings: Any, caplog: Any, own_redis: Any, rig: dict[str, Any], admin_user: Any, ingest: Any
) -> None:
    # given the background flusher (as in the servers and workers), no watchdog, and the pages
    # that hear about a card: overview, rack, node
    settings.PORTAL_LIVE_AUTOFLUSH = True
    card = rig["cards"][0]
    paths = ["/ws/live/overview/", f"/ws/live/rack/{rig['rack'].pk}/", f"/ws/live/node/{card.node_id}/"]

    async def scenario() -> list[list[str]]:
        pages = [communicator(path, admin_user) for path in paths]
        for page in pages:
            assert (await page.connect())[0]
            await page.receive_from(timeout=5)  # snapshot
        await database_sync_to_async(lambda: ingest(card, temperature=50.0))()
        for page in pages:
            assert "temp-critical" not in await page.receive_from(timeout=5)
        # when Redis restarts and a hot reading is committed (nobody calls flush)
        own_redis()
        await database_sync_to_async(lambda: ingest(card, temperature=98.0))()
        # then whichever send failed is followed by a resync: every page gets the hot reading
        frames: list[list[str]] = [[] for _ in pages]
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not all(any("temp-critical" in f for f in fs) for fs in frames):
            for page, got in zip(pages, frames, strict=True):
                if not await page.receive_nothing(timeout=0.2):
                    got.append(await page.receive_from(timeout=5))
        for page in pages:
            await page.disconnect()
        return frames

    frames = async_to_sync(scenario)()
    assert [any("temp-critical" in f for f in fs) for fs in frames] == [True, True, True], frames
    # (the flush's first call on the dropped connection failed: asking who listens, or a send)
    assert any("(marked for resync)" in r.getMessage() for r in caplog.records)
    assert push.coalescer.resync_pending() == set()
