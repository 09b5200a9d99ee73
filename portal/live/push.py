"""The push path: collect changed ids after commit, coalesce them, route them to groups, send.

``mark_changed(kind, ids)`` is called by the signal receivers (on commit) in any process that
writes: web, Celery worker, the demo's single process. Ids are collected in-process and flushed by
one background thread per process at most every ``PORTAL_LIVE_FLUSH_MS`` (leading edge: a quiet
process pushes at once, a busy one once per interval), so a node that changes 50 times in a
second is pushed a handful of times, not 50. A flush reads where the ids belong (a few flat
queries) and sends ONE ``live.changed`` group event per group with every changed id of that group,
to the groups some socket listens to (the Redis pub/sub layer says which: :meth:`Coalescer.listened`).
Consumers re-read through the selectors and render the fragments (see consumers.py), except a
summary's (the overview): it is the same for every socket of a role, so the flush renders it once,
in every variant, and the event carries the finished frames (``frames``) that the consumers forward.

Which groups hear about which ids is the apps' business: each app registers its kinds, routers and
summaries in :mod:`portal.live.registry` when it is ready; nothing here imports a domain app.

Delivery through the channel layer is at-most-once: a lost flush (Redis down) is caught up by
the snapshot a consumer sends on (re)connect and by :mod:`portal.live.watchdog`. A group send that
fails here (Redis down, or the first send on a connection Redis dropped while it restarted) marks
its group for resync: the flusher retries every ``resync_retry_s()`` with a ``live.resync`` event
until the layer takes it, and each socket of the group answers with a fresh snapshot (as the
watchdog's resync does), so nothing is silently dropped.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import itertools
import logging
import os
import threading
import time
from collections.abc import Coroutine, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from channels.layers import get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.conf import settings
from django.db import close_old_connections

from portal.live import registry

logger = logging.getLogger(__name__)

#: the kinds of ids the apps mark are theirs to declare (:mod:`portal.live.registry`)
EVENT_TYPE = "live.changed"
RESYNC_TYPE = "live.resync"

T = TypeVar("T")
Batch = dict[str, set[Any]]
Messages = dict[str, dict[str, Any]]


def flush_interval() -> float:
    return max(0.0, getattr(settings, "PORTAL_LIVE_FLUSH_MS", 200) / 1000.0)


def resync_retry_s() -> float:
    """How soon groups whose send failed are sent their resync (again)."""
    return max(flush_interval(), float(getattr(settings, "PORTAL_LIVE_WATCHDOG_S", 2) or 2))


class Coalescer:
    """Thread-safe set of pending ids per kind, flushed by one daemon thread (per process)."""

    def __init__(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._wake = threading.Event()
        self._pending: Batch = {}
        self._resync: set[str] = set()  # groups whose last send failed
        self._oldest: float | None = None
        self._thread: threading.Thread | None = None
        self._last_flush = 0.0
        self._seq = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.server_loop: asyncio.AbstractEventLoop | None = None  # set by consumers (in-memory layer)

    def mark(self, changed: Mapping[str, Iterable[Any]]) -> None:
        """Add ``{kind: ids}`` (all kinds of one commit at once, so one flush carries them all)."""
        unknown = set(changed) - set(registry.kinds())
        if unknown:
            raise ValueError(f"unknown live kinds {sorted(unknown)}")
        clean = {k: [i for i in ids if i is not None] for k, ids in changed.items()}
        if not any(clean.values()):
            return
        if self._pid != os.getpid():  # forked (Celery prefork): start afresh in the child
            self.__init__()  # type: ignore[misc]
        with self._lock:
            for kind, ids in clean.items():
                if ids:
                    self._pending.setdefault(kind, set()).update(ids)
            if self._oldest is None:
                self._oldest = time.time()
        if getattr(settings, "PORTAL_LIVE_AUTOFLUSH", True):
            self._ensure_thread()
            self._wake.set()

    def take(self) -> tuple[Batch, float | None]:
        with self._lock:
            batch, oldest = self._pending, self._oldest
            self._pending, self._oldest = {}, None
        return batch, oldest

    def resync_pending(self) -> set[str]:
        with self._lock:
            return set(self._resync)

    def _mark_resync(self, failed: Iterable[str]) -> None:
        failed = set(failed)
        if not failed:
            return
        with self._lock:
            self._resync |= failed
        if getattr(settings, "PORTAL_LIVE_AUTOFLUSH", True):
            self._ensure_thread()

    def next_seq(self) -> str:
        return f"{self._pid}-{next(self._seq)}"

    # -- the flusher thread ------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="live-push", daemon=True)
                self._thread.start()
                atexit.register(self._flush_at_exit)  # a short-lived process (a command) still pushes

    def _flush_at_exit(self) -> None:
        try:
            self.flush()
        except Exception:
            logger.warning("live push at exit failed", exc_info=True)

    def _run(self) -> None:
        while True:
            woken = self._wake.wait(timeout=resync_retry_s() if self._resync else None)
            if not woken:  # only resyncs are due
                try:
                    self.flush()
                except Exception:
                    logger.exception("live push resync failed")
                finally:
                    close_old_connections()
                continue
            delay = self._last_flush + flush_interval() - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self._wake.clear()
            self._last_flush = time.monotonic()
            try:
                self.flush()
            except Exception:  # never let the thread die: the next change tries again
                logger.exception("live push flush failed")
            finally:
                close_old_connections()

    def flush(self) -> Messages:
        """Route and send what is pending now (also called directly by tests and the benchmark);
        first the resyncs of groups whose send failed before. One flush at a time: the exit
        flush of a short-lived process waits for the one its thread may be in the middle of
        (the daemon thread would be killed mid-send)."""
        with self._flushing:
            return self._flush()

    def _flush(self) -> Messages:
        with self._lock:
            resync, self._resync = self._resync, set()
        if resync:
            self.send(self.listened({group: {"type": RESYNC_TYPE} for group in sorted(resync)}))
        batch, oldest = self.take()
        if not batch:
            return {}
        seq, ts = self.next_seq(), oldest or time.time()
        # the overview (most sockets) first, before the per-node routing of a large batch, and
        # without a full garbage collection in the middle (70-90 ms in a worker after a large
        # ingest batch): it runs at the next allocation after this, in the routing below; it is
        # rendered only when some socket listens
        with _gc_deferred():
            summary = self.listened(route_overview(batch, seq=seq, ts=ts))
            for group, message in summary.items():
                with_overview_frames(message, group=group, variants=self.listened_variants(group))
            self.send(summary)
        messages = self.listened(route(batch, seq=seq, ts=ts, summaries=False))
        self.send(messages)
        return {**summary, **messages}

    def listened(self, messages: Messages) -> Messages:
        """``messages`` less those to groups that no socket listens to, where the layer can tell
        (:func:`_listened`). When the layer cannot be asked (Redis down), the groups are marked for
        resync, as a failed send would be, and nothing is returned."""
        try:
            heard = self._heard(list(messages))
        except Exception as exc:
            logger.warning(
                "live push: could not ask which groups are listened to (marked for resync): %r", exc
            )
            self._mark_resync(messages)
            return {}
        return messages if heard is None else {g: m for g, m in messages.items() if g in heard}

    def listened_variants(self, group: str) -> set[str] | None:
        """The variants of a summary that some socket listens to (its presence groups, see
        :class:`registry.Summary`); None: all of them (the layer cannot tell, or Redis did not
        answer: the consumers of a variant without a frame render it themselves)."""
        summary = registry.summary(group)
        if summary is None or summary.variants is None:
            return None
        presence = summary.variants()
        try:
            heard = self._heard(list(presence))
        except Exception:
            logger.warning("live push: could not ask which %s variants are listened to", group, exc_info=True)
            return None
        return None if heard is None else {presence[g] for g in heard}

    def _heard(self, groups: list[str]) -> set[str] | None:
        """Which of ``groups`` some socket listens to; None where the layer cannot tell (raises
        when Redis does not answer)."""
        layer = get_channel_layer()
        if not groups or not isinstance(layer, RedisPubSubChannelLayer):
            return None
        return self._await(_listened(layer, groups))

    def send(self, messages: Messages) -> None:
        """Send each group its message; a group whose send fails is marked for resync."""
        if not messages:
            return
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:  # called from async code (tests): never block a running loop
            raise RuntimeError("Coalescer.send() must not be called from a running event loop")
        try:
            failed = self._await(_send_all(layer, messages))
        except Exception:
            self._mark_resync(messages)
            raise
        self._mark_resync(failed)

    def _await(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine of the channel layer from this (sync) thread: on the server's loop for
        the in-memory layer, else on this coalescer's own loop."""
        server = self.server_loop
        if server is not None and server.is_running() and _needs_server_loop(get_channel_layer()):
            return asyncio.run_coroutine_threadsafe(coro, server).result(timeout=10)
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coro)


@contextlib.contextmanager
def _gc_deferred() -> Iterator[None]:
    """No garbage collection inside the block (process-wide, so keep the block short)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _needs_server_loop(layer: Any) -> bool:
    """The in-memory layer's queues belong to the server's event loop (not thread-safe)."""
    from channels.layers import InMemoryChannelLayer

    return isinstance(layer, InMemoryChannelLayer)


async def _listened(layer: RedisPubSubChannelLayer, groups: list[str]) -> set[str] | None:
    """The groups of ``groups`` that some process listens to: one PUBSUB NUMSUB per Redis, on the
    channels the pub/sub layer publishes them to. A telemetry batch names every node it touched and
    most node pages are closed: 1,000 groups sent one by one cost the flusher 120-200 ms (one round
    trip each) and Redis as much, beside the overview's fan-out. ``None`` when this version of
    channels_redis is laid out differently (then every group is sent, as before)."""
    try:
        loop_layer = layer._get_layer()
        by_shard: dict[Any, dict[str, str]] = {}
        for group in groups:
            channel = loop_layer._get_group_channel_name(group)
            by_shard.setdefault(loop_layer._get_shard(channel), {})[channel] = group
    except AttributeError:
        logger.warning(
            "live push: channels_redis' pub/sub layer changed; sending to every group", exc_info=True
        )
        return None
    heard: set[str] = set()
    for shard, channels in by_shard.items():
        async with shard._lock:  # as the layer's own publish does
            shard._ensure_redis()
            counts = await shard._redis.pubsub_numsub(*channels)
        heard |= {channels[name.decode() if isinstance(name, bytes) else name] for name, n in counts if n}
    return heard


async def _send_all(layer: Any, messages: Messages) -> list[str]:
    """Send every message; returns the groups whose send failed."""
    results = await asyncio.gather(
        *(layer.group_send(group, msg) for group, msg in messages.items()), return_exceptions=True
    )
    failed = [(g, r) for g, r in zip(messages, results, strict=True) if isinstance(r, BaseException)]
    if failed:
        logger.warning(
            "live push: %d of %d group sends failed (marked for resync): %r",
            len(failed), len(results), failed[0][1],
        )  # fmt: skip
    return [g for g, _ in failed]


coalescer = Coalescer()


def mark_changed(kind: str, ids: Iterable[Any]) -> None:
    """Note that rows of ``kind`` changed (call on commit); they are pushed within one interval."""
    coalescer.mark({kind: ids})


def mark_many(changed: Mapping[str, Iterable[Any]]) -> None:
    """:func:`mark_changed` for several kinds of one commit."""
    coalescer.mark(changed)


def flush_now() -> Messages:
    return coalescer.flush()


# -- routing -------------------------------------------------------------------------------------
def route_overview(batch: Mapping[str, Iterable[Any]], *, seq: str, ts: float) -> Messages:
    """The summary events alone (the overview): routed and sent before the rest of a flush."""
    plain = {kind: set(ids) for kind, ids in batch.items()}
    out: Messages = {}
    for summary in registry.summaries():
        ids = summary.route(plain)
        if any(ids.values()):
            out[summary.group] = {"type": EVENT_TYPE, "seq": seq, "ts": ts, "ids": ids}
    return out


#: larger summary frames are left to the consumers to render (keeps a group message small)
FRAMES_MAX_BYTES = 256 * 1024


def with_overview_frames(
    message: dict[str, Any], *, group: str = "overview", variants: set[str] | None = None
) -> dict[str, Any]:
    """Add the summary's frames rendered once for this flush (of ``variants``, None: every one);
    on failure or when too large the event goes without them and consumers render."""
    summary = registry.summary(group)
    if summary is None or summary.frames is None:
        return message
    try:
        frames = summary.frames(message["ids"], seq=message["seq"], ts=message["ts"], variants=variants)
    except Exception:
        logger.warning("live push: rendering %s failed; consumers will render", group, exc_info=True)
        return message
    if sum(len(f) for f in frames.values()) <= FRAMES_MAX_BYTES:
        message["frames"] = frames
    return message


def route(batch: Mapping[str, Iterable[Any]], *, seq: str, ts: float, summaries: bool = True) -> Messages:
    """Which groups hear about which ids: one ``live.changed`` event per group (the apps' routers
    and resolvers decide; see :mod:`portal.live.registry`). ``summaries=False`` leaves out the
    summary groups (the flush sends them first, on their own)."""
    plain = {kind: set(ids) for kind, ids in batch.items()}
    routes = registry.Routes(plain)
    for router in registry.routers():
        router(plain, routes)
    for entity, resolve in registry.resolvers():
        attributed = routes.attributed(entity)
        if attributed:
            resolve(attributed, routes)
    out = {g: {k: _plain(v) for k, v in kinds.items()} for g, kinds in routes.groups.items()}
    summary_groups = {s.group for s in registry.summaries()}
    for group in summary_groups:
        out.pop(group, None)
    if summaries:
        out.update({g: m["ids"] for g, m in route_overview(plain, seq=seq, ts=ts).items()})
    # the summaries first (most sockets listen there), then the groups of few instances, the
    # many per-entity groups of a large batch ("node.<pk>") last
    per_prefix: dict[str, int] = {}
    for group in out:
        per_prefix[group.split(".")[0]] = per_prefix.get(group.split(".")[0], 0) + 1
    order = sorted(out, key=lambda g: (g not in summary_groups, per_prefix[g.split(".")[0]], g))
    return {group: {"type": EVENT_TYPE, "seq": seq, "ts": ts, "ids": out[group]} for group in order}


def _plain(ids: set[Any]) -> list[Any]:
    """Sorted ids the layer can serialise (action uuids as text)."""
    return sorted((i if isinstance(i, int) else str(i) for i in ids), key=str)
