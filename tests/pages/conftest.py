"""Page fixtures: a simulator cluster (synced, so partitions and GPUs are known), the loopback
Slurm lab as a cluster row, researchers mapped to cluster accounts, eager Celery, logged-in clients."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import Client

from inventory.choices import NodeRole
from inventory.models import Card, CardModel, Cluster, Node
from jobs.backends import simulator_get, simulator_reset
from jobs.models import ClusterAccount
from jobs.sync import cluster_sync

_seq = itertools.count(1)


@pytest.fixture(autouse=True)
def _eager(settings: Any, celery_eager: Any) -> Iterator[None]:
    settings.PORTAL_SIMULATOR_REALTIME = False
    settings.PORTAL_ACTION_MAX_ATTEMPTS = 1
    simulator_reset()
    yield
    simulator_reset()


def make_nodes(cluster: Cluster, names: list[str], gpus: int = 4) -> list[Node]:
    model = CardModel.objects.create(vendor="Fake", name=f"fake-{next(_seq)}", tdp_w=100)
    nodes = []
    for name in names:
        node = Node.objects.create(
            hostname=f"{name}-{cluster.name}", slurm_name=name, cluster=cluster, role=NodeRole.COMPUTE
        )
        for slot in range(gpus):
            Card.objects.create(node=node, card_model=model, slot=str(slot))
        nodes.append(node)
    return nodes


@pytest.fixture
def sim_cluster(db: Any) -> Cluster:
    cluster = Cluster.objects.create(name=f"sim-{next(_seq)}", backend=Cluster.Backend.SIMULATOR)
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
    lab = slurm_lab
    cluster = Cluster.objects.create(
        name=f"lab-{next(_seq)}",
        backend=Cluster.Backend.SLURM_SSH,
        ssh_host=lab["SLURM_LAB_SSH_HOST"],
        ssh_port=int(lab["SLURM_LAB_SSH_PORT"]),
        ssh_user=lab["SLURM_LAB_SSH_USER"],
        ssh_host_key=lab["SLURM_LAB_SSH_HOST_KEY"],
        ssh_key_path=lab["SLURM_LAB_SSH_KEY"],
        slurm_conf=lab.get("SLURM_CONF", ""),
    )
    make_nodes(cluster, ["node1", "node2", "node3", "node4"])
    result = cluster_sync(cluster)
    assert result.ok, result.error
    return cluster
