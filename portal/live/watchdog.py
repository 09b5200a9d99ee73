"""Per-process care of the open sockets: catch pages up after the channel layer comes back.

Channel-layer delivery is at-most-once and a Redis restart drops every event sent meanwhile (the
Redis client re-subscribes by itself, silently). One task per server process pings itself through
the layer every ``PORTAL_LIVE_WATCHDOG_S`` seconds; when the layer answers again after failing,
every socket of this process is sent a fresh snapshot, so the pages catch up without a reload.
The same tick re-sends snapshots to the sockets that ask for it (``periodic_snapshot``: the
overview, whose staleness warnings depend on the clock).
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)

_consumers: weakref.WeakSet[Any] = weakref.WeakSet()
_task: asyncio.Task[None] | None = None


def register(consumer: Any) -> None:
    _consumers.add(consumer)
    _ensure_task(consumer.channel_layer)


def unregister(consumer: Any) -> None:
    _consumers.discard(consumer)


def consumers() -> list[Any]:
    return list(_consumers)


def _ensure_task(layer: Any) -> None:
    global _task
    interval = float(getattr(settings, "PORTAL_LIVE_WATCHDOG_S", 2))
    loop = asyncio.get_running_loop()
    if interval <= 0 or (_task is not None and not _task.done() and _task.get_loop() is loop):
        return
    _task = loop.create_task(_watch(layer, interval))


async def resync_all() -> None:
    """Send every socket of this process a fresh snapshot (one render per shareable view)."""
    since = time.monotonic()
    for consumer in consumers():
        try:
            await consumer.send_snapshot(since=since)
        except Exception:
            logger.warning(
                "live: snapshot to %s failed", getattr(consumer, "channel_name", "?"), exc_info=True
            )


async def _watch(layer: Any, interval: float) -> None:
    healthy = True
    channel: str | None = None
    ticks = 0
    overview_every = max(1, round(float(getattr(settings, "PORTAL_LIVE_OVERVIEW_REFRESH_S", 30)) / interval))
    while _consumers:
        await asyncio.sleep(interval)
        ok = False
        try:
            if channel is None:
                channel = await layer.new_channel("live-watchdog.")
            await layer.send(channel, {"type": "ping"})
            await asyncio.wait_for(layer.receive(channel), timeout=interval)
            ok = True
        except Exception as exc:  # Redis down, timeouts: try again next tick
            if healthy:
                logger.warning("live: channel layer unreachable (%r); pages will resync when it is back", exc)
        if ok and not healthy:
            logger.warning("live: channel layer is back; resyncing %d sockets", len(_consumers))
            await resync_all()
        healthy = ok
        ticks += 1
        if ticks % overview_every == 0:
            since = time.monotonic()  # one render per variant for every overview socket
            for consumer in consumers():
                if getattr(consumer, "periodic_snapshot", False):
                    await consumer.send_snapshot(since=since)
