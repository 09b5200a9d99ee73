"""The push path: collect changed ids after commit, coalesce them, route them to groups, send.

``mark_changed(kind, ids)`` is called by the signal receivers (on commit) in any process that
writes: web, Celery worker, the demo's single process. Ids are collected in-process and flushed by
one background thread per process at most every ``PORTAL_LIVE_FLUSH_MS`` (leading edge: a quiet
process pushes at once, a busy one once per interval), so a node that changes 50 times in a
second is pushed a handful of times, not 50. A flush reads where the ids belong (a few flat
queries) and sends ONE ``live.changed`` group event per group with every changed id of that group.
Consumers re-read through the selectors and render the fragments (see consumers.py), except the
overview's: it is the same for every socket of a role, so the flush renders it once, in both
variants, and the event carries the finished frames (``frames``) that the consumers forward.

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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings
from django.db import close_old_connections

from portal.live import groups

logger = logging.getLogger(__name__)

KINDS = ("node", "card", "alert", "job", "action", "cluster")
EVENT_TYPE = "live.changed"
RESYNC_TYPE = "live.resync"

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
        unknown = set(changed) - set(KINDS)
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
        first the resyncs of groups whose send failed before."""
        with self._lock:
            resync, self._resync = self._resync, set()
        if resync:
            self.send({group: {"type": RESYNC_TYPE} for group in sorted(resync)})
        batch, oldest = self.take()
        if not batch:
            return {}
        seq, ts = self.next_seq(), oldest or time.time()
        # the overview (most sockets) first, before the per-node routing of a large batch, and
        # without a full garbage collection in the middle (70-90 ms in a worker after a large
        # ingest batch): it runs at the next allocation after this, in the routing below
        with _gc_deferred():
            summary = route_overview(batch, seq=seq, ts=ts)
            if summary:
                with_overview_frames(summary[groups.OVERVIEW])
            self.send(summary)
        messages = route(batch, seq=seq, ts=ts)
        messages.pop(groups.OVERVIEW, None)
        self.send(messages)
        return {**summary, **messages}

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
        coro = _send_all(layer, messages)
        server = self.server_loop
        try:
            if server is not None and server.is_running() and _needs_server_loop(layer):
                failed = asyncio.run_coroutine_threadsafe(coro, server).result(timeout=10)
            else:
                if self._loop is None or self._loop.is_closed():
                    self._loop = asyncio.new_event_loop()
                failed = self._loop.run_until_complete(coro)
        except Exception:
            self._mark_resync(messages)
            raise
        self._mark_resync(failed)


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
    """The overview event alone: the clusters the batch touches (one small query per kind)."""
    from inventory.models import Card, Node
    from jobs.models import Action, Job
    from monitoring.models import Alert

    clusters = set(batch.get("cluster", ()))
    node_ids = set(batch.get("node", ()))
    if node_ids:
        clusters |= set(Node.objects.filter(pk__in=node_ids).values_list("cluster_id", flat=True).distinct())
    else:  # a batch with node ids names the nodes of its cards and alerts too (telemetry)
        cards, alerts = set(batch.get("card", ())), set(batch.get("alert", ()))
        if cards:
            clusters |= set(Card.objects.filter(pk__in=cards).values_list("node__cluster_id", flat=True))
        if alerts:
            clusters |= set(Alert.objects.filter(pk__in=alerts).values_list("node__cluster_id", flat=True))
    if batch.get("job"):
        clusters |= set(Job.objects.filter(pk__in=set(batch["job"])).values_list("cluster_id", flat=True))
    if batch.get("action"):
        clusters |= set(
            Action.objects.filter(pk__in=set(batch["action"])).values_list("cluster_id", flat=True)
        )
    clusters.discard(None)
    if not clusters:
        return {}
    return {groups.OVERVIEW: {"type": EVENT_TYPE, "seq": seq, "ts": ts, "ids": {"cluster": _plain(clusters)}}}


#: larger overview frames are left to the consumers to render (keeps a group message small)
FRAMES_MAX_BYTES = 256 * 1024


def with_overview_frames(message: dict[str, Any]) -> dict[str, Any]:
    """Add the rendered overview frames of the message's clusters (both variants), once per
    flush; on failure or when too large the event goes without them and consumers render."""
    from portal.live.fragments import overview_frames

    try:
        frames = overview_frames(message["ids"]["cluster"], seq=message["seq"], ts=message["ts"])
    except Exception:
        logger.warning("live push: rendering the overview failed; consumers will render", exc_info=True)
        return message
    if sum(len(f) for f in frames.values()) <= FRAMES_MAX_BYTES:
        message["frames"] = frames
    return message


def route(batch: Mapping[str, Iterable[Any]], *, seq: str, ts: float) -> Messages:
    """Which groups hear about which ids: one ``live.changed`` event per group."""
    from inventory.models import Card, Node
    from jobs.models import Action, Job
    from monitoring.models import Alert

    out: dict[str, dict[str, set[Any]]] = {}

    def add(group: str, kind: str, pk: Any) -> None:
        out.setdefault(group, {}).setdefault(kind, set()).add(pk)

    node_ids = set(batch.get("node", ()))
    card_node = dict(Card.objects.filter(pk__in=set(batch.get("card", ()))).values_list("pk", "node_id"))
    alert_node = dict(Alert.objects.filter(pk__in=set(batch.get("alert", ()))).values_list("pk", "node_id"))
    actions = list(
        Action.objects.filter(pk__in=set(batch.get("action", ()))).values_list(
            "pk", "cluster_id", "node_id", "requested_by_id", "job_id"
        )
    )
    job_ids = set(batch.get("job", ())) | {a[4] for a in actions if a[4] is not None}
    jobs = list(Job.objects.filter(pk__in=job_ids).values_list("pk", "cluster_id", "owner_id", "node_names"))
    node_ids |= set(card_node.values()) | set(alert_node.values()) | {a[2] for a in actions if a[2]}
    nodes = {
        pk: (c, r)
        for pk, c, r in Node.objects.filter(pk__in=node_ids).values_list("pk", "cluster_id", "rack_id")
    }
    cluster_ids = set(batch.get("cluster", ()))

    def node_groups(node_id: int) -> list[str]:
        cluster_id, rack_id = nodes.get(node_id, (None, None))
        gs = [groups.node(node_id)]
        if cluster_id is not None:
            gs.append(groups.cluster(cluster_id))
            cluster_ids.add(cluster_id)
        if rack_id is not None:
            gs.append(groups.rack(rack_id))
        return gs

    for pk in set(batch.get("node", ())):
        for g in node_groups(pk):
            add(g, "node", pk)
    for pk, node_id in card_node.items():
        for g in node_groups(node_id):
            add(g, "card", pk)
    for pk, node_id in alert_node.items():
        for g in node_groups(node_id):
            add(g, "alert", pk)
    job_nodes = _job_nodes(jobs)
    for pk, cluster_id, owner_id, _names in jobs:
        add(groups.ALL_JOBS, "job", pk)
        add(groups.cluster(cluster_id), "job", pk)
        cluster_ids.add(cluster_id)
        if owner_id is not None:
            add(groups.user(owner_id), "job", pk)
        for node_id in job_nodes.get(pk, ()):
            add(groups.node(node_id), "job", pk)
    for pk, cluster_id, node_id, user_id, _job in actions:
        add(groups.ALL_JOBS, "action", pk)
        add(groups.cluster(cluster_id), "action", pk)
        if user_id is not None:
            add(groups.user(user_id), "action", pk)
        if node_id is not None:
            add(groups.node(node_id), "action", pk)
    telemetry_nodes = set(batch.get("node", ())) | set(card_node.values()) | set(alert_node.values())
    for fabric_id, node_id in _fabric_nodes(telemetry_nodes):
        add(groups.fabric(fabric_id), "node", node_id)
    for pk in cluster_ids:
        add(groups.OVERVIEW, "cluster", pk)
    # the summaries first (most sockets listen there), the many node groups last
    order = sorted(out, key=lambda g: (g != groups.OVERVIEW, g.startswith("node."), g))
    return {
        group: {
            "type": EVENT_TYPE,
            "seq": seq,
            "ts": ts,
            "ids": {k: _plain(v) for k, v in out[group].items()},
        }
        for group in order
    }


def _fabric_nodes(node_ids: set[int]) -> set[tuple[int, int]]:
    """(fabric pk, node pk) of the fabrics whose members (cards or nodes) are on these nodes."""
    from django.db.models import Q

    from inventory.models import FabricMember

    if not node_ids:
        return set()
    rows = FabricMember.objects.filter(Q(node_id__in=node_ids) | Q(card__node_id__in=node_ids)).values_list(
        "fabric_id", "node_id", "card__node_id"
    )
    return {(fabric_id, node_id or card_node_id) for fabric_id, node_id, card_node_id in rows}


def _plain(ids: set[Any]) -> list[Any]:
    """Sorted ids the layer can serialise (action uuids as text)."""
    return sorted((i if isinstance(i, int) else str(i) for i in ids), key=str)


def _job_nodes(jobs: Sequence[tuple[int, int, int | None, str]]) -> dict[int, list[int]]:
    """Inventory node pks each job runs on (``node_names`` is ",a,b," of Slurm names)."""
    from inventory.models import Node

    wanted = {(c, name) for _pk, c, _o, names in jobs for name in names.strip(",").split(",") if name}
    if not wanted:
        return {}
    by_name: dict[tuple[int, str], int] = {}
    for pk, cluster_id, slurm_name, hostname in Node.objects.filter(
        cluster_id__in={c for c, _ in wanted}
    ).values_list("pk", "cluster_id", "slurm_name", "hostname"):
        by_name[(cluster_id, slurm_name or hostname.split(".")[0])] = pk
    out: dict[int, list[int]] = {}
    for pk, cluster_id, _o, names in jobs:
        out[pk] = [
            by_name[(cluster_id, n)] for n in names.strip(",").split(",") if n and (cluster_id, n) in by_name
        ]
    return out
