"""Simulator specifics: determinism, scheduler reasons, faults, thread safety."""

from __future__ import annotations

import threading

import pytest

from jobs.cluster import (
    BMC,
    ClusterBackend,
    JobSpec,
    RetryableError,
    SimNode,
    SimulatedCluster,
    TerminalError,
    get_backend,
)


def _sim(**kw: object) -> SimulatedCluster:
    return SimulatedCluster(
        [SimNode(f"n{i}", gpus=4, gpu_type="a100", cpus=8) for i in range(1, 3)], seed=7, **kw
    )  # type: ignore[arg-type]


def _spec(tag: str, script: str = "#!/bin/bash\nsleep 30\n", **kw: object) -> JobSpec:
    return JobSpec(name="j", script=script, tag=tag, **kw)  # type: ignore[arg-type]


def test_is_a_backend_and_factory() -> None:
    assert isinstance(_sim(), ClusterBackend)
    sim = get_backend("simulator", description={"nodes": [{"name": "a", "gpus": 2}], "seed": 3})
    assert [n.name for n in sim.list_nodes()] == ["a"]
    assert isinstance(get_backend("slurm-local"), ClusterBackend)


def test_deterministic_with_same_seed() -> None:
    def run() -> list[tuple[int, str, int | None]]:
        sim = _sim()
        for i in range(4):
            sim.submit_job(_spec(f"t{i}", "#!/bin/bash\npython train.py\n", gpus=2), as_user="alice")
        sim.advance(900)
        return [(j.job_id, j.state, j.exit_code) for j in sim.list_jobs()]

    assert run() == run()


def test_scheduler_reasons() -> None:
    sim = _sim()
    a = sim.submit_job(_spec("a", gpus=4, nodes=2), as_user="alice")
    b = sim.submit_job(_spec("b", gpus=1), as_user="bob")
    c = sim.submit_job(_spec("c", gpus=1), as_user="bob")
    too_big = sim.submit_job(_spec("d", nodes=3), as_user="bob")
    too_long = sim.submit_job(_spec("e", partition="debug", time_limit_minutes=60), as_user="bob")
    jobs = {j.job_id: j for j in sim.list_jobs()}
    assert jobs[a].state == "RUNNING" and jobs[a].nodes == "n1,n2"
    assert (jobs[b].state, jobs[b].state_reason) == ("PENDING", "Resources")
    assert (jobs[c].state, jobs[c].state_reason) == ("PENDING", "Priority")
    assert jobs[too_big].state_reason == "PartitionNodeLimit"
    assert jobs[too_long].state_reason == "PartitionTimeLimit"
    sim.advance(31)
    jobs = {j.job_id: j for j in sim.list_jobs()}
    assert (jobs[a].state, jobs[a].exit_code) == ("COMPLETED", 0)
    assert jobs[b].state == "RUNNING" and jobs[c].state == "RUNNING"
    sim.drain_node("n1", "maint")
    sim.drain_node("n2", "maint")
    d = sim.submit_job(_spec("f"), as_user="alice")
    assert (sim.get_job(d) or pytest.fail()).state_reason.startswith("ReqNodeNotAvail")  # type: ignore[union-attr]


def test_faults() -> None:
    sim = _sim()
    j = sim.submit_job(_spec("x", "#!/bin/bash\nsleep 100\n", gpus=4, nodes=2), as_user="alice")
    sim.inject("job_fail_nccl_timeout", job_id=j, after_seconds=10)
    sim.advance(11)
    job = sim.get_job(j)
    assert job is not None and (job.state, job.exit_code) == ("FAILED", 1)
    assert "Watchdog caught collective operation timeout" in sim.read_job_output(j, as_user="alice")

    k = sim.submit_job(_spec("y", gpus=1), as_user="alice")
    sim.inject("node_down", node="n1")
    kj = sim.get_job(k)
    assert kj is not None and kj.state == "NODE_FAIL"
    assert next(n for n in sim.list_nodes() if n.name == "n1").display_state == "down"

    sim.inject("controller_unreachable", count=2)
    for _ in range(2):
        with pytest.raises(RetryableError, match="Unable to contact slurm controller"):
            sim.list_jobs()
    assert sim.list_jobs()

    sim.inject("refuse_submit", message="Job violates accounting/QOS policy (job submit limit)")
    with pytest.raises(TerminalError) as exc:
        sim.submit_job(_spec("z"), as_user="alice")
    assert exc.value.slurm_message.startswith("Job violates accounting/QOS policy")
    sim.submit_job(_spec("z"), as_user="alice")  # only once

    sim.power_cycle_node(BMC(kind="ipmi", address="n2-bmc.mgmt", username="admin", password="pw"))
    assert next(n for n in sim.list_nodes() if n.name == "n2").display_state == "reboot"
    sim.advance(31)
    assert next(n for n in sim.list_nodes() if n.name == "n2").display_state == "idle"


def test_timeout_and_output() -> None:
    sim = _sim()
    j = sim.submit_job(
        _spec("t", "#!/bin/bash\necho hi there\nsleep 600\n", time_limit_minutes=1), as_user="bob"
    )
    sim.advance(61)
    job = sim.get_job(j)
    assert job is not None and job.state == "TIMEOUT"
    out = sim.read_job_output(j, as_user="bob")
    assert "hi there" in out and "DUE TO TIME LIMIT" in out
    with pytest.raises(TerminalError):
        sim.read_job_output(j, as_user="alice")
    sim.advance(700)  # MinJobAge
    assert sim.get_job(j) is None


def test_thread_safe_submissions() -> None:
    sim = _sim()
    ids: list[int] = []

    def worker(n: int) -> None:
        for i in range(20):
            ids.append(sim.submit_job(_spec(f"w{n}-{i % 5}"), as_user="alice"))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 20  # 4 workers x 5 distinct tags


def test_unknown_user_refused() -> None:
    with pytest.raises(TerminalError):
        _sim().submit_job(_spec("u"), as_user="mallory")
