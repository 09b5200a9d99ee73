"""Page fixtures: a simulator cluster (synced, so partitions and GPUs are known), the loopback
Slurm lab as a cluster row, researchers mapped to cluster accounts, eager Celery, logged-in clients."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import Client

from inventory.models import Cluster
from jobs.backends import simulator_get, simulator_reset
from jobs.models import ClusterAccount
from jobs.sync import cluster_sync
from tests.clusters import lab_cluster_create, make_nodes, sim_cluster_create


@pytest.fixture(autouse=True)
def _eager(settings: Any, celery_eager: Any) -> Iterator[None]:
    settings.PORTAL_SIMULATOR_REALTIME = False
    settings.PORTAL_ACTION_MAX_ATTEMPTS = 1
    simulator_reset()
    yield
    simulator_reset()


@pytest.fixture
def sim_cluster(db: Any) -> Cluster:
    cluster = sim_cluster_create()
    make_nodes(cluster, ["node1", "node2", "node3", "node4"])
    result = cluster_sync(cluster)
    assert result.ok, result.error
    return cluster


@pytest.fixture
def sim(sim_cluster: Cluster) -> Any:
    return simulator_get(sim_cluster)


@pytest.fixture
def map_account() -> Callable[..., ClusterAccount]:
    def make(user: Any, cluster: Cluster, username: str | None = None) -> ClusterAccount:
        return ClusterAccount.objects.create(user=user, cluster=cluster, username=username or user.username)

    return make


@pytest.fixture
def client_as() -> Callable[[Any], Client]:
    def make(user: Any) -> Client:
        c = Client()
        c.force_login(user)
        return c

    return make


@pytest.fixture
def lab_cluster(db: Any, slurm_lab: dict[str, str]) -> Cluster:
    """The loopback Slurm (scripts/slurm-lab/start.sh) as a synced cluster row."""
    cluster = lab_cluster_create(slurm_lab)
    make_nodes(cluster, ["node1", "node2", "node3", "node4"])
    result = cluster_sync(cluster)
    assert result.ok, result.error
    return cluster
