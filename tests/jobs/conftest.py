"""Fixtures for the jobs app: a simulator-backed cluster, the loopback Slurm lab as a cluster row,
users mapped to cluster accounts, eager Celery with on-commit callbacks executed."""

from __future__ import annotations

import itertools
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from inventory.choices import NodeRole
from inventory.models import Card, CardModel, Cluster, Node
from jobs.backends import simulator_get, simulator_reset
from jobs.cluster import SimulatedCluster
from jobs.models import ClusterAccount
from jobs.sync import SyncResult, cluster_sync

REPO = Path(__file__).resolve().parents[2]
LAB_DIR = Path(os.environ.get("SLURM_LAB_DIR", "/tmp/rackpilot-slurm-lab"))
_seq = itertools.count(1)


@pytest.fixture(autouse=True)
def _eager(settings: Any) -> Iterator[None]:
    """Tasks run in-process (on commit; without propagation so that eager retries run as retries);
    the simulator only moves when a test ticks it."""
    from portal.celery import app

    settings.PORTAL_SIMULATOR_REALTIME = False
    settings.PORTAL_ACTION_RETRY_BACKOFF = 0
    settings.PORTAL_ACTION_MAX_ATTEMPTS = 2
    old = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager, app.conf.task_eager_propagates = True, False
    simulator_reset()
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = old
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


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def _skip_or_fail(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"CI=true and the Slurm lab is unavailable: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def slurm_lab() -> dict[str, str]:
    env_file = LAB_DIR / "env"
    if shutil.which("sinfo") and os.geteuid() == 0:
        proc = subprocess.run(
            [str(REPO / "scripts/slurm-lab/start.sh")],
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, "SLURM_LAB_DIR": str(LAB_DIR)},
        )
        if proc.returncode != 0:
            pytest.fail(f"scripts/slurm-lab/start.sh failed:\n{proc.stdout}\n{proc.stderr}")
    elif not env_file.exists():
        _skip_or_fail("Slurm is not installed or the lab is not running (scripts/slurm-lab/)")
    env: dict[str, str] = {}
    for line in env_file.read_text().splitlines():
        if line.startswith("export "):
            key, _, value = line[len("export ") :].partition("=")
            env[key] = (shlex.split(value) or [""])[0]
    return env


def lab_cluster_create(lab: dict[str, str], **overrides: Any) -> Cluster:
    fields = {
        "name": f"lab-{next(_seq)}",
        "backend": Cluster.Backend.SLURM_SSH,
        "ssh_host": lab["SLURM_LAB_SSH_HOST"],
        "ssh_port": int(lab["SLURM_LAB_SSH_PORT"]),
        "ssh_user": lab["SLURM_LAB_SSH_USER"],
        "ssh_host_key": lab["SLURM_LAB_SSH_HOST_KEY"],
        "ssh_key_path": lab["SLURM_LAB_SSH_KEY"],
        **overrides,
    }
    return Cluster.objects.create(**fields)


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
        cluster = Cluster.objects.create(name=f"sim-{next(_seq)}", backend=Cluster.Backend.SIMULATOR)
        nodes = make_nodes(cluster, ["node1", "node2", "node3", "node4"])
        simulator = simulator_get(cluster)
        yield Env("simulator", cluster, {n.slurm_name: n for n in nodes}, lambda: simulator.advance(1), 120)
        return
    lab = request.getfixturevalue("slurm_lab")
    cluster = lab_cluster_create(lab)
    nodes = make_nodes(cluster, ["node1", "node2", "node3", "node4"])
    yield Env("slurm", cluster, {n.slurm_name: n for n in nodes}, lambda: time.sleep(0.5), 120)
