"""Django adapter: build a jobs.cluster backend from an inventory.Cluster row.

* ``Cluster.backend == "slurm-ssh"``: Slurm over SSH with the row's login host, port, service
  account, pinned host key and key path (the key itself never enters the database).
* ``"simulator"`` (or ``settings.PORTAL_CLUSTER_BACKEND_OVERRIDE == "simulator"``, the demo): one
  process-wide :class:`SimulatedCluster` per cluster, built from its inventory compute nodes and
  their cards. With ``settings.PORTAL_SIMULATOR_REALTIME`` it runs on the wall clock. With
  ``settings.PORTAL_SIMULATOR_CONTINUE`` (the demo) a new one continues what the database holds for
  the cluster (node states, queued and running jobs, finished jobs' output), so a restarted demo
  goes on with the world its database remembers.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from inventory.choices import CARD_SCHEDULABLE, NodeRole
from inventory.models import Cluster
from jobs.cluster import (
    ClusterBackend,
    ListingMemo,
    SimNode,
    SimPartition,
    SimulatedCluster,
    ValidationError,
    get_backend,
)
from jobs.cluster.types import TAG_PREFIX, JobInfo, NodeInfo
from jobs.models import Job, NodeState

logger = logging.getLogger(__name__)

_SIMULATORS: dict[int, SimulatedCluster] = {}
_RESTORED: dict[int, dict[int, str]] = {}
_SIM_LOCK = threading.Lock()
#: per cluster pk, the previous listings' records (records equal to them are not parsed again)
_LISTING_MEMOS: dict[int, ListingMemo] = {}
#: the most stored jobs a continuing simulator takes over (newest first)
RESTORE_MAX_JOBS = 10_000


def _gpu_type(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug[:32] or "gpu"


def simulator_nodes(cluster: Cluster) -> list[SimNode]:
    """One SimNode per compute node of the cluster: GPUs = its cards Slurm may schedule (burn-in,
    accepted, in service; rejected and RMA cards are kept out, as a gres.conf without them would)."""
    nodes = []
    for node in cluster.nodes.filter(role=NodeRole.COMPUTE).prefetch_related("cards__card_model"):
        cards = [c for c in node.cards.all() if c.status in CARD_SCHEDULABLE]
        gpu_type = _gpu_type(cards[0].card_model.name) if cards else "none"
        nodes.append(SimNode(node.effective_slurm_name, gpus=len(cards), gpu_type=gpu_type))
    return nodes


def simulator_get(cluster: Cluster, *, clock: Callable[[], datetime] | None = None) -> SimulatedCluster:
    """The process-wide simulator of this cluster (created on first use: on ``clock``, else on the
    wall clock when ``PORTAL_SIMULATOR_REALTIME``, else moved only by ``advance``)."""
    with _SIM_LOCK:
        sim = _SIMULATORS.get(cluster.pk)
        if sim is None:
            nodes = simulator_nodes(cluster) or None
            parts = [
                SimPartition("gpu", is_default=True, max_time_minutes=1440),
                SimPartition("debug", max_time_minutes=30),
            ]
            if clock is None and getattr(settings, "PORTAL_SIMULATOR_REALTIME", True):
                clock = timezone.now
            # continue after the jobs already stored, so a restarted process never reuses their ids
            last = Job.objects.filter(cluster=cluster).aggregate(last=Max("job_id"))["last"]
            sim = SimulatedCluster(
                nodes, parts, seed=cluster.pk, reboot_seconds=10, min_job_age=300,
                first_job_id=max(1000, (last or 0) + 1), clock=clock,
            )  # fmt: skip
            if getattr(settings, "PORTAL_SIMULATOR_CONTINUE", False):
                _RESTORED[cluster.pk] = simulator_continue(cluster, sim)
            _SIMULATORS[cluster.pk] = sim
        return sim


def simulator_continue(cluster: Cluster, sim: SimulatedCluster) -> dict[int, str]:
    """Give ``sim`` what the database remembers of ``cluster``: its node states as last synced and
    its jobs (see :meth:`SimulatedCluster.restore`); returns what became of each job."""
    nodes = [
        NodeInfo(
            name=ns.node.effective_slurm_name,
            state=ns.state,
            flags=frozenset(ns.flags or ()),
            reason=ns.reason or None,
            reason_set_by=ns.reason_set_by or None,
            reason_changed_at=ns.reason_changed_at,
            boot_time=ns.boot_time,
        )  # fmt: skip
        for ns in NodeState.objects.filter(node__cluster=cluster).select_related("node")
    ]
    jobs = [
        (
            JobInfo(
                job_id=j.job_id,
                name=j.name,
                user=j.user or None,
                state=j.state,
                account=j.account or None,
                partition=j.partition or None,
                state_reason=j.state_reason or None,
                nodes=",".join(x for x in j.node_names.split(",") if x),
                node_count=j.node_count,
                gpus=j.gpus,
                gpu_type=j.gpu_type or None,
                cpus=j.cpus,
                submit_time=j.submit_time,
                start_time=j.start_time,
                end_time=j.end_time,
                time_limit_minutes=j.time_limit,
                exit_code=j.exit_code,
                stdout_path=j.stdout_path or None,
                work_dir=j.work_dir or None,
                comment=TAG_PREFIX + j.tag if j.tag else None,
            ),  # fmt: skip
            j.script,
        )
        for j in Job.objects.filter(cluster=cluster).order_by("-job_id")[:RESTORE_MAX_JOBS]
    ]
    outcome = sim.restore(nodes=nodes, jobs=jobs, last_seen=cluster.last_sync_ok_at)
    if outcome:
        counts = {
            k: sum(1 for v in outcome.values() if v == k) for k in ("queued", "resumed", "ended", "finished")
        }
        logger.debug("simulated cluster %s continues from the database: %s", cluster.name, counts)
    return outcome


def simulator_restored(cluster: Cluster) -> dict[int, str]:
    """What the simulator of ``cluster`` made of the stored jobs when it was created ({} if nothing)."""
    with _SIM_LOCK:
        return dict(_RESTORED.get(cluster.pk, {}))


def simulator_reset(cluster_id: int | None = None) -> None:
    """Forget simulators (tests; or after the inventory of a demo cluster changed)."""
    with _SIM_LOCK:
        if cluster_id is None:
            _SIMULATORS.clear()
            _RESTORED.clear()
        else:
            _SIMULATORS.pop(cluster_id, None)
            _RESTORED.pop(cluster_id, None)


def uses_simulator(cluster: Cluster) -> bool:
    override = getattr(settings, "PORTAL_CLUSTER_BACKEND_OVERRIDE", "")
    return override == "simulator" or cluster.backend == Cluster.Backend.SIMULATOR


def ssh_config(cluster: Cluster) -> dict[str, Any]:
    missing = [f for f in ("ssh_host", "ssh_user", "ssh_host_key", "ssh_key_path") if not getattr(cluster, f)]
    if missing:
        raise ValidationError(f"cluster {cluster.name} is missing SSH settings: {', '.join(missing)}")
    config: dict[str, Any] = {
        "host": cluster.ssh_host,
        "port": cluster.ssh_port,
        "username": cluster.ssh_user,
        "host_key": cluster.ssh_host_key.strip(),
        "client_key": cluster.ssh_key_path,
        "connect_timeout": float(getattr(settings, "PORTAL_SSH_CONNECT_TIMEOUT", 10)),
        "timeout": float(getattr(settings, "PORTAL_SLURM_COMMAND_TIMEOUT", 60)),
        "memo": _LISTING_MEMOS.setdefault(cluster.pk, ListingMemo()),
    }
    if cluster.slurm_conf:
        config["slurm_conf"] = cluster.slurm_conf
    # how the login host reaches a node (the telemetry pull's prefix): card resets run this way
    config["node_prefix"] = list(settings.PORTAL_TELEMETRY_NODE_PREFIX)
    return config


#: Tests may replace how a backend is built for a cluster (e.g. a fake listing for benchmarks).
backend_factory: Callable[[Cluster], ClusterBackend] | None = None


def backend_for_cluster(cluster: Cluster) -> ClusterBackend:
    if backend_factory is not None:
        return backend_factory(cluster)
    if uses_simulator(cluster):
        return simulator_get(cluster)
    if cluster.backend != Cluster.Backend.SLURM_SSH:
        raise ValidationError(f"unknown backend {cluster.backend!r} for cluster {cluster.name}")
    return get_backend("slurm-ssh", **ssh_config(cluster))


@contextmanager
def cluster_backend(cluster: Cluster) -> Iterator[ClusterBackend]:
    """A backend for the duration of a block; SSH connections are closed afterwards."""
    backend = backend_for_cluster(cluster)
    try:
        yield backend
    finally:
        if not isinstance(backend, SimulatedCluster):
            backend.close()
