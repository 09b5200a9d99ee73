"""Fixtures for the jobs app: a simulator-backed cluster, the loopback Slurm lab as a cluster row,
users mapped to cluster accounts, eager Celery with on-commit callbacks executed."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from inventory.models import Cluster, Node
from jobs.backends import simulator_get, simulator_reset
from jobs.cluster import SimulatedCluster
from jobs.models import ClusterAccount
from jobs.sync import SyncResult, cluster_sync
from tests.clusters import lab_cluster_create, make_nodes, sim_cluster_create

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _eager(settings: Any, celery_eager: Any) -> Iterator[None]:
    """Tasks run in-process; the simulator only moves when a test ticks it."""
    settings.PORTAL_SIMULATOR_REALTIME = False
    settings.PORTAL_ACTION_RETRY_BACKOFF = 0
    settings.PORTAL_ACTION_MAX_ATTEMPTS = 2
    simulator_reset()
    yield
    simulator_reset()


@pytest.fixture
def sim_cluster(db: Any) -> Cluster:
    cluster = sim_cluster_create()
    make_nodes(cluster, ["node1", "node2", "node3", "node4"])
    return cluster


@pytest.fixture
def sim(sim_cluster: Cluster) -> SimulatedCluster:
    return simulator_get(sim_cluster)


@pytest.fixture
def alice_account(researcher_user: Any) -> Callable[[Cluster], ClusterAccount]:
    return lambda cluster: ClusterAccount.objects.create(
        user=researcher_user, cluster=cluster, username="alice"
    )


# ---------------------------------------------------------------------------- the Slurm lab


@dataclass
class Env:
    """One cluster (simulator or real Slurm over SSH) and how to let time pass on it."""

    kind: str
    cluster: Cluster
    nodes: dict[str, Node]
    tick: Callable[[], None]
    ticks: int

    def sync(self) -> SyncResult:
        result = cluster_sync(self.cluster)
        assert result.ok, result.error
        return result

    def wait_until(self, predicate: Callable[[], Any], what: str) -> Any:
        for _ in range(self.ticks):
            self.sync()
            value = predicate()
            if value:
                return value
            self.tick()
        raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(params=["simulator", pytest.param("slurm", marks=pytest.mark.slurm)])
def env(request: pytest.FixtureRequest, db: Any) -> Iterator[Env]:
    if request.param == "simulator":
        cluster = sim_cluster_create()
        nodes = make_nodes(cluster, ["node1", "node2", "node3", "node4"])
        simulator = simulator_get(cluster)
        yield Env("simulator", cluster, {n.slurm_name: n for n in nodes}, lambda: simulator.advance(1), 120)
        return
    lab = request.getfixturevalue("slurm_lab")
    cluster = lab_cluster_create(lab)
    nodes = make_nodes(cluster, ["node1", "node2", "node3", "node4"])
    yield Env("slurm", cluster, {n.slurm_name: n for n in nodes}, lambda: time.sleep(0.5), 120)


# ---------------------------------------------------------------------------- the job report


@pytest.fixture
def rig(db: Any) -> Cluster:
    """The seeded converted mining rig (rig01, four p150a cards in a QSFP-DD mesh)."""
    from tests.jobs.telemetry import rig_seed

    return rig_seed()


@pytest.fixture
def pod(db: Any) -> Cluster:
    """The seeded H100 pod (gpu01-gpu04, eight H100 each)."""
    from tests.jobs.telemetry import pod_seed

    return pod_seed()
