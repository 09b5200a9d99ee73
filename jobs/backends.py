"""Django adapter: build a jobs.cluster backend from an inventory.Cluster row.

* ``Cluster.backend == "slurm-ssh"``: Slurm over SSH with the row's login host, port, service
  account, pinned host key and key path (the key itself never enters the database).
* ``"simulator"`` (or ``settings.PORTAL_CLUSTER_BACKEND_OVERRIDE == "simulator"``, the demo): one
  process-wide :class:`SimulatedCluster` per cluster, built from its inventory compute nodes and
  their cards. With ``settings.PORTAL_SIMULATOR_REALTIME`` its clock follows the wall clock.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

from django.conf import settings
from django.db.models import Max

from inventory.choices import CardStatus, NodeRole
from inventory.models import Cluster
from jobs.cluster import ClusterBackend, SimNode, SimPartition, SimulatedCluster, ValidationError, get_backend
from jobs.models import Job

_SIMULATORS: dict[int, SimulatedCluster] = {}
_SIM_LOCK = threading.Lock()


def _gpu_type(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug[:32] or "gpu"


def simulator_nodes(cluster: Cluster) -> list[SimNode]:
    """One SimNode per compute node of the cluster: GPUs = its active cards."""
    nodes = []
    for node in cluster.nodes.filter(role=NodeRole.COMPUTE).prefetch_related("cards__card_model"):
        cards = [c for c in node.cards.all() if c.status == CardStatus.ACTIVE]
        gpu_type = _gpu_type(cards[0].card_model.name) if cards else "none"
        nodes.append(SimNode(node.effective_slurm_name, gpus=len(cards), gpu_type=gpu_type))
    return nodes


class _RealtimeSimulator:
    """Advances the wrapped simulator by the wall-clock time elapsed since the last call."""

    def __init__(self, sim: SimulatedCluster) -> None:
        self._sim = sim
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._sim, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                now = time.monotonic()
                elapsed, self._last = now - self._last, now
            if elapsed > 0:
                self._sim.advance(min(elapsed, 3600.0))
            return attr(*args, **kwargs)

        return call


def simulator_get(cluster: Cluster) -> SimulatedCluster:
    """The process-wide simulator of this cluster (created on first use)."""
    with _SIM_LOCK:
        sim = _SIMULATORS.get(cluster.pk)
        if sim is None:
            nodes = simulator_nodes(cluster) or None
            parts = [
                SimPartition("gpu", is_default=True, max_time_minutes=1440),
                SimPartition("debug", max_time_minutes=30),
            ]
            # continue after the jobs already stored, so a restarted process never reuses their ids
            last = Job.objects.filter(cluster=cluster).aggregate(last=Max("job_id"))["last"]
            sim = SimulatedCluster(
                nodes, parts, seed=cluster.pk, reboot_seconds=10, min_job_age=300,
                first_job_id=max(1000, (last or 0) + 1),
            )  # fmt: skip
            _SIMULATORS[cluster.pk] = sim
        return sim


def simulator_reset(cluster_id: int | None = None) -> None:
    """Forget simulators (tests; or after the inventory of a demo cluster changed)."""
    with _SIM_LOCK:
        if cluster_id is None:
            _SIMULATORS.clear()
        else:
            _SIMULATORS.pop(cluster_id, None)


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
    }
    if cluster.slurm_conf:
        config["slurm_conf"] = cluster.slurm_conf
    return config


#: Tests may replace how a backend is built for a cluster (e.g. a fake listing for benchmarks).
backend_factory: Callable[[Cluster], ClusterBackend] | None = None


def backend_for_cluster(cluster: Cluster) -> ClusterBackend:
    if backend_factory is not None:
        return backend_factory(cluster)
    if uses_simulator(cluster):
        sim = simulator_get(cluster)
        if getattr(settings, "PORTAL_SIMULATOR_REALTIME", True):
            return cast(ClusterBackend, _realtime(cluster.pk, sim))
        return sim
    if cluster.backend != Cluster.Backend.SLURM_SSH:
        raise ValidationError(f"unknown backend {cluster.backend!r} for cluster {cluster.name}")
    return get_backend("slurm-ssh", **ssh_config(cluster))


_REALTIME: dict[int, _RealtimeSimulator] = {}


def _realtime(cluster_id: int, sim: SimulatedCluster) -> _RealtimeSimulator:
    with _SIM_LOCK:
        wrapper = _REALTIME.get(cluster_id)
        if wrapper is None or wrapper._sim is not sim:
            wrapper = _REALTIME[cluster_id] = _RealtimeSimulator(sim)
        return wrapper


@contextmanager
def cluster_backend(cluster: Cluster) -> Iterator[ClusterBackend]:
    """A backend for the duration of a block; SSH connections are closed afterwards."""
    backend = backend_for_cluster(cluster)
    try:
        yield backend
    finally:
        if not isinstance(backend, SimulatedCluster | _RealtimeSimulator):
            backend.close()
