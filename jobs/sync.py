"""Reconcile what Slurm says (nodes, jobs, partitions) into the database.

One read of the existing rows per table (for jobs only their fingerprints), diffs computed in
Python on plain tuples, then a fixed number of bulk statements whatever the number of rows (see
:mod:`jobs.sync_storage`: COPY and one UPDATE per table on PostgreSQL), and JobTransition rows
for state changes. Returns a :class:`SyncResult` with the changed ids and sends ``cluster_synced``
on commit (the live-update layer listens to it).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.db.models import DateTimeField, F, Q, Value
from django.db.models.functions import Coalesce
from django.dispatch import Signal
from django.utils import timezone
from django.utils.translation import gettext

from inventory.models import Cluster, Node
from jobs import sync_storage
from jobs.backends import cluster_backend
from jobs.cluster import ClusterBackend, ClusterError, JobInfo, NodeInfo, PartitionInfo, RetryableError
from jobs.models import (
    JOB_STATE_UNKNOWN,
    ClusterAccount,
    Job,
    JobTransition,
    NodeState,
    NodeTransition,
    Partition,
)

logger = logging.getLogger(__name__)

#: sent on commit after a successful sync: cluster_synced.send(sender=Cluster, cluster=..., node_ids=..., job_ids=...)
cluster_synced = Signal()


@dataclass
class SyncResult:
    cluster_id: int
    ok: bool
    error: str = ""
    node_ids: list[int] = field(default_factory=list)  # inventory Node pks whose Slurm state changed
    job_ids: list[int] = field(default_factory=list)  # Job pks created or changed
    created_jobs: int = 0
    transitions: int = 0
    unknown_nodes: list[str] = field(default_factory=list)  # in Slurm, not in the inventory


# ---------------------------------------------------------------------------- hostlists

_HOSTLIST_PART = re.compile(r"([^,\[]+(?:\[[^\]]*\][^,\[]*)*)")


def expand_hostlist(text: str | None, *, limit: int = 100_000) -> list[str]:
    """``node[1-3,5],gpu07`` -> ``[node1, node2, node3, node5, gpu07]`` (zero padding kept)."""
    if not text:
        return []
    out: list[str] = []
    for m in _HOSTLIST_PART.finditer(text):
        item = m.group(1).strip()
        if not item:
            continue
        names = [""]
        for literal, ranges in re.findall(r"([^\[]*)(?:\[([^\]]*)\])?", item):
            expanded: list[str] = []
            for r in ranges.split(",") if ranges else [""]:
                lo, _, hi = r.partition("-")
                if hi and lo.isdigit() and hi.isdigit():
                    width = len(lo)
                    expanded += [
                        str(i).zfill(width) for i in range(int(lo), min(int(hi), int(lo) + limit) + 1)
                    ]
                else:
                    expanded.append(r)
            names = [n + literal + e for n in names for e in expanded]
        out += names
        if len(out) > limit:
            break
    return out


def node_names_field(nodes: str | None) -> str:
    if not nodes:
        return ""
    names = expand_hostlist(nodes) if "[" in nodes else nodes.split(",")
    return f",{','.join(names)},"


def _fingerprint(values: tuple[Any, ...]) -> int:
    """Stable 64-bit fingerprint of a job's synced values (stored in ``Job.sync_hash``)."""
    plain = list(values)
    for i in _TIMES:
        if plain[i] is not None:
            plain[i] = plain[i].timestamp()
    return int.from_bytes(hashlib.blake2b(repr(plain).encode(), digest_size=8).digest(), "big", signed=True)


# ---------------------------------------------------------------------------- jobs

JOB_SYNC_FIELDS = (
    "name", "user", "owner_id", "account", "partition", "state", "state_reason", "nodes", "node_names",
    "node_count", "gpus", "gpu_type", "cpus", "submit_time", "start_time", "end_time", "time_limit",
    "exit_code", "stdout_path", "work_dir", "tag", "array_job_id", "array_task_id", "array_tasks",
)  # fmt: skip
_STATE = JOB_SYNC_FIELDS.index("state")
_REASON = JOB_SYNC_FIELDS.index("state_reason")
_TIMES = tuple(JOB_SYNC_FIELDS.index(f) for f in ("submit_time", "start_time", "end_time"))

#: Per cluster pk, the account map and the last listing's ``{job_id: (info, values, fingerprint)}``:
#: a memo of _job_values and _fingerprint (pure functions of the JobInfo and the account map), so
#: an unchanged job costs an identity check when the parser handed back the same JobInfo (see
#: jobs.cluster.slurm_parsers.RecordMemo), else a tuple comparison, never a hash.
#: What is in the database is always read and compared; the memo never stands in for it.
_fingerprints: dict[int, tuple[dict[str, int], dict[int, tuple[JobInfo, tuple[Any, ...], int]]]] = {}


def _job_values(j: JobInfo, owners: dict[str, int], names: dict[str, str]) -> tuple[Any, ...]:
    user = j.user or ""
    nodes = j.nodes[:1024]
    node_names = names.get(nodes)
    if node_names is None:
        node_names = names[nodes] = node_names_field(nodes)
    return (
        j.name[:255], user, owners.get(user), j.account or "", j.partition or "", j.state,
        (j.state_reason or "")[:255], nodes, node_names, j.node_count, j.gpus,
        j.gpu_type or "", j.cpus, j.submit_time, j.start_time, j.end_time, j.time_limit_minutes,
        j.exit_code, j.stdout_path or "", j.work_dir or "", j.tag or "", j.array_job_id, j.array_task_id,
        (j.array_tasks or "")[:255],
    )  # fmt: skip


def reconcile_jobs(
    cluster: Cluster,
    jobs: Sequence[JobInfo],
    *,
    now: datetime,
    listed_since: datetime | None = None,
    finished: Sequence[JobInfo] | None = (),
) -> tuple[list[int], int, int]:
    """Returns (changed Job pks, number created, number of transitions).

    An active row that the listing lacks takes its final state, end time and exit code from
    ``finished`` (records from Slurm accounting, see :func:`finished_jobs_lookup`); only the
    ones not found there become UNKNOWN. ``finished=None`` (accounting could not be read this
    time) leaves such rows as they are: a later sync looks them up again.

    Reads back only (job_id, pk, state, fingerprint) of every row; a row is written when its
    stored fingerprint differs from the listing's (so a row created or changed by another
    writer, whose fingerprint is not the listing's, converges too).
    """
    from jobs.cluster.types import ACTIVE_JOB_STATES

    owners = dict(ClusterAccount.objects.filter(cluster=cluster).values_list("username", "user_id"))
    existing: dict[int, tuple[int, str, int]] = {
        job_id: (pk, state, fp)
        for job_id, pk, state, fp in sync_storage.fetch_rows(
            Job.objects.filter(cluster=cluster).values_list("job_id", "pk", "state", "sync_hash")
        )
    }
    memo_owners, memo = _fingerprints.get(cluster.pk, ({}, {}))
    same_owners = memo_owners == owners
    listed: dict[int, tuple[JobInfo, tuple[Any, ...], int]] = {}
    names: dict[str, str] = {}
    new_rows: list[tuple[Any, ...]] = []
    updates: list[tuple[Any, ...]] = []
    transitions: list[tuple[int, str, str, str, datetime]] = []
    for info in jobs:
        job_id = info.job_id
        if job_id in listed:
            continue
        known = memo.get(job_id)
        if known is not None and known[0] is info and same_owners:
            listed[job_id] = known
            values, fp = known[1], known[2]
        else:
            values = _job_values(info, owners, names)
            fp = known[2] if known is not None and known[1] == values else _fingerprint(values)
            listed[job_id] = (info, values, fp)
        row = existing.get(job_id)
        if row is None:
            new_rows.append((cluster.pk, job_id, now, now, fp, *values))
        elif row[2] != fp:
            updates.append((row[0], *values, fp, now))
            if row[1] != values[_STATE]:
                transitions.append((row[0], row[1], values[_STATE], values[_REASON], now))
    _fingerprints[cluster.pk] = (owners, listed)
    # Active jobs that Slurm no longer lists (purged before we saw their end): never leave them "running".
    gone = [
        row[0] for job_id, row in existing.items() if job_id not in listed and row[1] in ACTIVE_JOB_STATES
    ]
    if finished is None:
        gone = []
    vanished: list[tuple[Any, ...]] = []
    if gone:
        recent = Q(last_seen__gt=listed_since) if listed_since is not None else Q(pk__in=[])
        final = {j.job_id: j for j in finished or () if j.finished}
        # rows written (e.g. by a submit) after the listing was taken are left alone
        for pk, job_id, state, start, end, code in (
            Job.objects.filter(pk__in=gone)
            .exclude(recent)
            .values_list("pk", "job_id", "state", "start_time", "end_time", "exit_code")
        ):
            record = final.get(job_id)
            if record is None:
                reason = "no longer reported by Slurm"
                vanished.append((pk, JOB_STATE_UNKNOWN, reason, start, end, code, 0))
                transitions.append((pk, state, JOB_STATE_UNKNOWN, reason, now))
            else:
                reason = (record.state_reason or "")[:255]
                vanished.append(
                    (
                        pk,
                        record.state,
                        reason,
                        start or record.start_time,
                        record.end_time,
                        record.exit_code,
                        0,
                    )
                )
                transitions.append(
                    (pk, state, record.state, reason or "final state from Slurm accounting", now)
                )
    new_ids = sync_storage.insert_rows(
        Job,
        ("cluster_id", "job_id", "first_seen", "last_seen", "sync_hash", *JOB_SYNC_FIELDS),
        new_rows,
        ids=True,
    )
    sync_storage.update_rows(Job, (*JOB_SYNC_FIELDS, "sync_hash", "last_seen"), updates)
    sync_storage.update_rows(
        Job, ("state", "state_reason", "start_time", "end_time", "exit_code", "sync_hash"), vanished
    )
    transitions += [
        (pk, "", row[5 + _STATE], row[5 + _REASON], now) for pk, row in zip(new_ids, new_rows, strict=True)
    ]
    sync_storage.insert_rows(JobTransition, ("job_id", "from_state", "to_state", "reason", "at"), transitions)
    ids = new_ids + [row[0] for row in updates] + [row[0] for row in vanished]
    return ids, len(new_rows), len(transitions)


# ---------------------------------------------------------------------------- nodes

NODE_SYNC_FIELDS = (
    "state", "display_state", "flags", "reason", "reason_set_by", "reason_changed_at", "cpus", "cpus_alloc",
    "memory_mb", "gpus_total", "gpus_alloc", "gpu_type", "partitions", "boot_time",
)  # fmt: skip


def _node_values(n: NodeInfo) -> tuple[Any, ...]:
    return (
        n.state, n.display_state, sorted(n.flags), (n.reason or "")[:255], n.reason_set_by or "",
        n.reason_changed_at, n.cpus, n.cpus_alloc, n.memory_mb, n.gpus_total, n.gpus_used, n.gpu_type or "",
        list(n.partitions), n.boot_time,
    )  # fmt: skip


def reconcile_nodes(
    cluster: Cluster, nodes: Sequence[NodeInfo], *, now: datetime
) -> tuple[list[int], list[str]]:
    """Returns (changed inventory Node pks, Slurm node names unknown to the inventory)."""
    inventory = {
        (slurm_name or hostname.split(".")[0]): (pk, state, reason, since)
        for pk, hostname, slurm_name, state, reason, since in Node.objects.filter(
            cluster=cluster
        ).values_list("pk", "hostname", "slurm_name", "slurm_state", "slurm_reason", "slurm_state_since")
    }
    states = {
        row[0]: row[1:]
        for row in NodeState.objects.filter(node__cluster=cluster).values_list("node_id", *NODE_SYNC_FIELDS)
    }
    new_states: list[tuple[Any, ...]] = []
    changed_states: list[tuple[Any, ...]] = []
    node_updates: list[tuple[int, str, str, datetime | None]] = []
    history: list[tuple[int, str, str, str, datetime]] = []
    changed_ids: list[int] = []
    unknown: list[str] = []
    listed: set[int] = set()
    for info in nodes:
        inv = inventory.get(info.name)
        if inv is None:
            unknown.append(info.name)
            continue
        pk, old_state, old_reason, since = inv
        listed.add(pk)
        values = _node_values(info)
        old = states.get(pk)
        changed = old != values
        if old is None:
            new_states.append((pk, now, *values))
        elif changed:
            changed_states.append((pk, *values, now))
        display, reason = info.display_state, (info.reason or "")[:255]
        if old_state != display or old_reason != reason:
            node_updates.append((pk, display, reason, now if old_state != display else since))
            history.append((pk, old_state, display, reason, now))
            changed = True
        if changed:
            changed_ids.append(pk)
    # inventory nodes of this cluster that Slurm no longer reports
    for name, (pk, old_state, _reason, _since) in inventory.items():
        if pk not in listed and old_state not in ("", "missing"):
            node_updates.append((pk, "missing", f"{name} not reported by Slurm", now))
            history.append((pk, old_state, "missing", f"{name} not reported by Slurm", now))
            changed_ids.append(pk)
    sync_storage.insert_rows(NodeState, ("node_id", "last_seen", *NODE_SYNC_FIELDS), new_states)
    sync_storage.update_rows(NodeState, (*NODE_SYNC_FIELDS, "last_seen"), changed_states)
    sync_storage.update_rows(Node, ("slurm_state", "slurm_reason", "slurm_state_since"), node_updates)
    sync_storage.insert_rows(NodeTransition, ("node_id", "from_state", "to_state", "reason", "at"), history)
    return changed_ids, unknown


# ---------------------------------------------------------------------------- partitions


def reconcile_partitions(cluster: Cluster, partitions: Sequence[PartitionInfo], *, now: datetime) -> None:
    existing = {p.name: p for p in Partition.objects.filter(cluster=cluster)}
    fields = ("state", "is_default", "max_time_minutes", "max_gpus_per_node", "total_nodes", "nodes")
    changed: list[Partition] = []
    for info in partitions:
        values = {
            "state": info.state, "is_default": info.is_default, "max_time_minutes": info.max_time_minutes,
            "max_gpus_per_node": info.max_gpus_per_node, "total_nodes": info.total_nodes, "nodes": info.nodes[:1024],
        }  # fmt: skip
        row = existing.pop(info.name, None)
        if row is None:
            Partition.objects.create(cluster=cluster, name=info.name, last_seen=now, **values)
        elif any(getattr(row, k) != v for k, v in values.items()):
            for k, v in values.items():
                setattr(row, k, v)
            row.last_seen = now
            changed.append(row)
    if changed:
        Partition.objects.bulk_update(changed, [*fields, "last_seen"])
    if existing:
        Partition.objects.filter(pk__in=[p.pk for p in existing.values()]).delete()


# ---------------------------------------------------------------------------- the sync


def reconcile(
    cluster: Cluster,
    *,
    nodes: Sequence[NodeInfo],
    jobs: Sequence[JobInfo],
    partitions: Sequence[PartitionInfo] | None = None,
    listed_since: datetime | None = None,
    finished: Sequence[JobInfo] | None = (),
    warnings: Sequence[str] = (),
) -> SyncResult:
    """Write one listing into the database (one transaction); mark the cluster synced and
    reachable again (``sync_failing_since`` cleared), keeping Slurm's ``warnings``.

    ``finished``: final records of active jobs the listing lacks (see :func:`finished_jobs_lookup`;
    None when they could not be read: those jobs are left as they are)."""
    now = timezone.now()
    result = SyncResult(cluster_id=cluster.pk, ok=True)
    with transaction.atomic():
        result.node_ids, result.unknown_nodes = reconcile_nodes(cluster, nodes, now=now)
        result.job_ids, result.created_jobs, result.transitions = reconcile_jobs(
            cluster, jobs, now=now, listed_since=listed_since, finished=finished
        )
        if partitions is not None:
            reconcile_partitions(cluster, partitions, now=now)
        Cluster.objects.filter(pk=cluster.pk).update(
            last_sync_at=now,
            last_sync_ok_at=now,
            last_sync_error="",
            sync_failing_since=None,
            last_sync_warnings="\n".join(dict.fromkeys(warnings))[:4000],
        )
        if result.node_ids or result.job_ids:
            transaction.on_commit(
                lambda: cluster_synced.send(
                    sender=Cluster, cluster=cluster, node_ids=result.node_ids, job_ids=result.job_ids
                )
            )
    return result


def cluster_mark_stale(cluster: Cluster, error: str) -> None:
    """Record a sync that could not read the cluster: nothing else is written (no job, node or
    partition changes); the outage's start is kept across failed syncs ("unreachable since")."""
    now = timezone.now()
    Cluster.objects.filter(pk=cluster.pk).update(
        last_sync_at=now,
        last_sync_error=error[:2000],
        sync_failing_since=Coalesce(F("sync_failing_since"), Value(now, output_field=DateTimeField())),
    )
    transaction.on_commit(
        lambda: cluster_synced.send(sender=Cluster, cluster=cluster, node_ids=[], job_ids=[])
    )


def finished_jobs_lookup(
    cluster: Cluster,
    backend: ClusterBackend,
    jobs: Sequence[JobInfo],
    *,
    listed_since: datetime,
    warnings: list[str] | None = None,
) -> list[JobInfo] | None:
    """Final records of the jobs the database has active but the listing lacks (Slurm purged
    them after MinJobAge, e.g. while the portal could not sync): one query, and one backend
    call only when there are such jobs. A terminal failure (no accounting) is logged and those
    jobs become UNKNOWN; a retryable one (controller or slurmdbd unreachable) returns None, so
    they stay as they are until a later sync can read their end (noted in ``warnings``)."""
    from jobs.cluster.types import ACTIVE_JOB_STATES

    listed = {j.job_id for j in jobs}
    active = (
        Job.objects.filter(cluster=cluster, state__in=ACTIVE_JOB_STATES)
        .exclude(last_seen__gt=listed_since)
        .values_list("job_id", flat=True)
    )
    missing = sorted(set(active) - listed)
    if not missing:
        return []
    try:
        return backend.list_finished_jobs(missing)
    except RetryableError as exc:
        logger.warning("cluster %s: final state of %d jobs not read yet: %s", cluster.name, len(missing), exc)
        if warnings is not None:
            warnings.append(
                gettext("final state of %(n)d jobs not read yet: %(error)s")
                % {"n": len(missing), "error": exc}
            )
        return None
    except ClusterError as exc:
        logger.warning(
            "cluster %s: final state of %d vanished jobs unavailable: %s", cluster.name, len(missing), exc
        )
        return []


def cluster_sync(cluster: Cluster, *, backend: ClusterBackend | None = None) -> SyncResult:
    """Read nodes, jobs and partitions from the cluster and reconcile them.

    A cluster that cannot be read (unreachable, or a listing Slurm itself flags with errors, as
    22.05 does with an EMPTY list while slurmctld is down) changes nothing: it is marked stale
    with the error and "unreachable since" its first failed sync; the next good sync carries on.
    Active jobs that Slurm no longer lists are looked up in its accounting first.
    """
    started = timezone.now()
    warnings: list[str] = []
    try:
        with nullcontext(backend) if backend is not None else cluster_backend(cluster) as b:
            nodes, jobs, parts = b.list_nodes(), b.list_jobs(), b.list_partitions()
            finished = finished_jobs_lookup(cluster, b, jobs, listed_since=started, warnings=warnings)
            warnings[:0] = getattr(b, "warnings", None) or []
    except ClusterError as exc:
        logger.warning("sync of cluster %s failed: %s", cluster.name, exc)
        cluster_mark_stale(cluster, str(exc))
        return SyncResult(cluster_id=cluster.pk, ok=False, error=str(exc))
    return reconcile(
        cluster,
        nodes=nodes,
        jobs=jobs,
        partitions=parts,
        listed_since=started,
        finished=finished,
        warnings=warnings,
    )


def cluster_sync_locked(cluster: Cluster, *, lock_seconds: int = 120) -> SyncResult | None:
    """cluster_sync unless another sync of this cluster is running (returns None then)."""
    key = f"jobs:sync-lock:{cluster.pk}"
    if not cache.add(key, "1", timeout=lock_seconds):
        return None
    try:
        return cluster_sync(cluster)
    finally:
        cache.delete(key)
