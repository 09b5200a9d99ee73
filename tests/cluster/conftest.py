"""Fixtures for the cluster layer tests (no Django, no database).

``backend`` is parametrised over the simulator and the real Slurm lab reached over SSH
(scripts/slurm-lab). The lab is started when it is not running and Slurm is installed; when
Slurm is missing the slurm-ssh cases are skipped — unless CI=true, where they fail.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from jobs.cluster import (
    ClusterBackend,
    SimNode,
    SimPartition,
    SimulatedCluster,
    get_backend,
)

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"


@dataclass
class ContractEnv:
    """What the contract tests need to know about a backend besides the protocol."""

    kind: str
    backend: ClusterBackend
    users: tuple[str, str] = ("alice", "bob")
    node_names: tuple[str, ...] = ("node1", "node2", "node3", "node4")
    gpus_per_node: int = 4
    tick: Callable[[], None] = lambda: None
    timeout_ticks: int = 100
    make_unreachable: Callable[[], ClusterBackend] | None = None
    make_wrong_host_key: Callable[[], ClusterBackend] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def wait_until(self, predicate: Callable[[], Any], what: str, ticks: int | None = None) -> Any:
        for _ in range(ticks or self.timeout_ticks):
            value = predicate()
            if value:
                return value
            self.tick()
        value = predicate()
        if value:
            return value
        raise AssertionError(f"timed out waiting for {what}")


_ENVS: dict[int, ContractEnv] = {}


def _simulator_env() -> ContractEnv:
    sim = SimulatedCluster(
        [SimNode(f"node{i}", gpus=4, gpu_type="fake", cpus=4, memory_mb=2000) for i in range(1, 5)],
        [
            SimPartition("gpu", is_default=True, max_time_minutes=1440),
            SimPartition("debug", max_time_minutes=30),
        ],
        seed=42,
        reboot_seconds=4,
    )

    def unreachable() -> ClusterBackend:
        sim.inject("controller_unreachable", count=1)
        return sim

    return ContractEnv(
        kind="simulator", backend=sim, tick=lambda: sim.advance(1), make_unreachable=unreachable
    )


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ssh_env(lab: dict[str, str]) -> ContractEnv:
    config = {
        "host": lab["SLURM_LAB_SSH_HOST"],
        "port": int(lab["SLURM_LAB_SSH_PORT"]),
        "username": lab["SLURM_LAB_SSH_USER"],
        "host_key": lab["SLURM_LAB_SSH_HOST_KEY"],
        "client_key": lab["SLURM_LAB_SSH_KEY"],
        "connect_timeout": 5,
    }
    backend = get_backend("slurm-ssh", **config)

    def unreachable() -> ClusterBackend:
        return get_backend("slurm-ssh", **{**config, "port": _free_port(), "connect_timeout": 3})

    def wrong_key() -> ClusterBackend:
        import asyncssh

        other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
        return get_backend("slurm-ssh", **{**config, "host_key": other})

    return ContractEnv(
        kind="slurm-ssh",
        backend=backend,
        users=tuple(lab.get("SLURM_LAB_USERS", "alice bob").split()[:2]),  # type: ignore[arg-type]
        tick=lambda: time.sleep(0.25),
        timeout_ticks=160,  # 40 s
        make_unreachable=unreachable,
        make_wrong_host_key=wrong_key,
        extra={"lab": lab},
    )


@pytest.fixture(scope="session", params=["simulator", pytest.param("slurm-ssh", marks=pytest.mark.slurm)])
def backend(request: pytest.FixtureRequest) -> Iterator[ClusterBackend]:
    if request.param == "simulator":
        env = _simulator_env()
    else:
        env = _ssh_env(request.getfixturevalue("slurm_lab"))
    _ENVS[id(env.backend)] = env
    try:
        yield env.backend
    finally:
        # leave the cluster clean: cancel what the suite left running, resume drained nodes
        try:
            for job in env.backend.list_jobs():
                if job.active and job.comment and job.comment.startswith("rackpilot:contract-"):
                    env.backend.cancel_job(job.job_id, as_user=None)
        except Exception:  # noqa: BLE001
            pass
        env.backend.close()
        _ENVS.pop(id(env.backend), None)


@pytest.fixture
def cluster_env(backend: ClusterBackend) -> ContractEnv:
    return _ENVS[id(backend)]


@pytest.fixture
def fixture_text() -> Callable[[str], str]:
    return lambda name: (FIXTURES / name).read_text()
