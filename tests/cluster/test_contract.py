"""One contract suite, run against every backend (simulator and the real Slurm over SSH)."""

from __future__ import annotations

import uuid

import pytest

from jobs.cluster import (
    ClusterBackend,
    HostKeyError,
    JobInfo,
    JobSpec,
    RetryableError,
    TerminalError,
)

from .conftest import ContractEnv


def _tag() -> str:
    return f"contract-{uuid.uuid4().hex[:12]}"


def _spec(script: str, **kw: object) -> JobSpec:
    defaults: dict[str, object] = {"name": "contract", "tag": _tag(), "time_limit_minutes": 5}
    defaults.update(kw)
    return JobSpec(script=script, **defaults)  # type: ignore[arg-type]


def _job(backend: ClusterBackend, job_id: int) -> JobInfo | None:
    return backend.get_job(job_id)


def test_list_nodes(backend: ClusterBackend, cluster_env: ContractEnv) -> None:
    nodes = backend.list_nodes()
    assert [n.name for n in nodes] == list(cluster_env.node_names)
    for n in nodes:
        assert n.gpus_total == cluster_env.gpus_per_node
        assert n.gpu_type == "fake"
        assert "gpu" in n.partitions and "debug" in n.partitions
        assert n.cpus == 4
        assert n.display_state in {"idle", "mixed", "alloc", "drained", "draining", "reboot", "down"}


def test_list_partitions(backend: ClusterBackend) -> None:
    parts = {p.name: p for p in backend.list_partitions()}
    assert parts["gpu"].is_default and parts["gpu"].max_time_minutes == 1440
    assert not parts["debug"].is_default and parts["debug"].max_time_minutes == 30
    assert parts["gpu"].max_gpus_per_node == 4
    assert parts["gpu"].state == "up"


def test_submit_runs_finishes_with_exit_code_and_output(
    backend: ClusterBackend, cluster_env: ContractEnv
) -> None:
    alice = cluster_env.users[0]
    ok = backend.submit_job(
        _spec("#!/bin/bash\necho contract-ok-line\nsleep 1\nexit 0\n", name="ok", gpus=1), as_user=alice
    )
    bad = backend.submit_job(
        _spec("#!/bin/bash\necho contract-bad-line\nsleep 1\nexit 3\n", name="bad"), as_user=alice
    )
    assert ok != bad

    done = cluster_env.wait_until(
        lambda: all((j := _job(backend, i)) is not None and j.finished for i in (ok, bad)), "jobs to finish"
    )
    assert done
    j_ok, j_bad = _job(backend, ok), _job(backend, bad)
    assert j_ok is not None and j_bad is not None
    assert (j_ok.state, j_ok.exit_code) == ("COMPLETED", 0)
    assert (j_bad.state, j_bad.exit_code) == ("FAILED", 3)
    assert j_ok.user == alice and j_ok.gpus == 1 and j_ok.nodes
    assert j_ok.start_time is not None and j_ok.end_time is not None and j_ok.submit_time is not None
    assert j_ok.start_time.tzinfo is not None
    assert j_ok.stdout_path and j_ok.stdout_path.startswith("/")

    out = cluster_env.wait_until(
        lambda: "contract-ok-line" in backend.read_job_output(j_ok, as_user=alice), "output file"
    )
    assert out
    assert "contract-bad-line" in backend.read_job_output(bad, as_user=alice, max_bytes=4096)
    tail = backend.read_job_output(j_ok, as_user=alice, max_bytes=5)
    assert len(tail.encode()) <= 5


def test_output_expands_the_variables_slurm_sets(backend: ClusterBackend, cluster_env: ContractEnv) -> None:
    from jobs.cluster.simscript import hostlist_compress, hostlist_expand

    alice = cluster_env.users[0]
    # the torchrun template's lines: the node list, its first host, and quoting as bash reads it
    script = (
        "#!/bin/bash\n"
        'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)\n'
        'echo "nodes: $SLURM_JOB_NODELIST  count: $SLURM_JOB_NUM_NODES  master: $MASTER_ADDR:29500"\n'
        "echo id=$SLURM_JOB_ID name=${SLURM_JOB_NAME} 'literal $SLURM_JOB_ID' ${UNSET_VAR:-fallback}\n"
        "sleep 1\n"
    )
    job_id = backend.submit_job(_spec(script, name="vars", nodes=2), as_user=alice)
    cluster_env.wait_until(lambda: (j := _job(backend, job_id)) is not None and j.finished, "job to finish")
    info = _job(backend, job_id)
    assert info is not None and info.state == "COMPLETED"
    hosts = hostlist_expand(info.nodes)
    assert len(hosts) == 2
    out = cluster_env.wait_until(
        lambda: "master:" in (text := backend.read_job_output(info, as_user=alice)) and text, "output file"
    )
    lines = [line for line in out.splitlines() if line.startswith(("nodes:", "id="))]
    assert lines == [
        f"nodes: {hostlist_compress(hosts)}  count: 2  master: {hosts[0]}:29500",
        f"id={job_id} name=vars literal $SLURM_JOB_ID fallback",
    ]


def test_submit_bad_partition_is_terminal(backend: ClusterBackend, cluster_env: ContractEnv) -> None:
    with pytest.raises(TerminalError) as exc:
        backend.submit_job(_spec("#!/bin/bash\ntrue\n", partition="nosuchpart"), as_user=cluster_env.users[0])
    assert "Invalid partition name specified" in exc.value.slurm_message


def test_submit_too_many_gpus_is_terminal(backend: ClusterBackend, cluster_env: ContractEnv) -> None:
    with pytest.raises(TerminalError) as exc:
        backend.submit_job(
            _spec("#!/bin/bash\ntrue\n", gpus=cluster_env.gpus_per_node + 1), as_user=cluster_env.users[0]
        )
    assert "Requested node configuration is not available" in exc.value.slurm_message


def test_submit_without_shebang_is_terminal(backend: ClusterBackend, cluster_env: ContractEnv) -> None:
    with pytest.raises(TerminalError) as exc:
        backend.submit_job(_spec("echo no shebang\n"), as_user=cluster_env.users[0])
    assert "does not look like a batch script" in exc.value.slurm_message


def test_idempotent_submit_and_cancel(backend: ClusterBackend, cluster_env: ContractEnv) -> None:
    alice, bob = cluster_env.users
    spec = _spec("#!/bin/bash\nsleep 300\n", name="idem")
    first = backend.submit_job(spec, as_user=alice)
    try:
        assert backend.submit_job(spec, as_user=alice) == first
        found = backend.find_job_by_tag(spec.tag, as_user=alice)
        assert found is not None and found.job_id == first and found.tag == spec.tag
        assert backend.find_job_by_tag(spec.tag, as_user=bob) is None

        with pytest.raises(TerminalError):
            backend.cancel_job(first, as_user=bob)  # not bob's job

        backend.cancel_job(first, as_user=alice)
        job = cluster_env.wait_until(
            lambda: (j := _job(backend, first)) is not None and j.state == "CANCELLED" and j, "cancelled"
        )
        assert job.finished
        # cancelling a finished job is harmless; the same tag still finds the same job
        backend.cancel_job(first, as_user=alice)
        assert backend.submit_job(spec, as_user=alice) == first
    finally:
        j = _job(backend, first)
        if j is not None and j.active:
            backend.cancel_job(first, as_user=None)


def test_cancel_missing_job_is_terminal(backend: ClusterBackend, cluster_env: ContractEnv) -> None:
    with pytest.raises(TerminalError, match="no such job"):
        backend.cancel_job(987654, as_user=cluster_env.users[0])


def test_drain_and_resume(backend: ClusterBackend, cluster_env: ContractEnv) -> None:
    node = cluster_env.node_names[2]
    reason = "contract; $(whoami) `id` 'quoted' \"dq\" & | > x"
    backend.drain_node(node, reason)
    try:
        n = next(n for n in backend.list_nodes() if n.name == node)
        assert "DRAIN" in n.flags and n.drained
        assert n.display_state in ("drained", "draining")
        assert n.reason == reason
        assert n.reason_set_by is not None and n.reason_changed_at is not None
        # drain again is fine (idempotent)
        backend.drain_node(node, reason)
    finally:
        backend.resume_node(node)
    # Slurm marks a resumed node "not responding" until its slurmd answers the next ping
    n = cluster_env.wait_until(
        lambda: (
            (m := next(n for n in backend.list_nodes() if n.name == node)).display_state
            in ("idle", "mixed", "alloc")
            and m
        ),
        f"{node} to be in service again",
    )
    assert not n.drained and not n.reason
    backend.resume_node(node)  # resuming a node that is not drained is a no-op


def test_bad_node_name_refused(backend: ClusterBackend) -> None:
    with pytest.raises(TerminalError):
        backend.drain_node("node1 state=resume", "x")
    with pytest.raises(TerminalError):
        backend.drain_node("node1", "two\nlines")


def test_reboot_node_comes_back(backend: ClusterBackend, cluster_env: ContractEnv) -> None:
    node = cluster_env.node_names[3]
    before = next(n for n in backend.list_nodes() if n.name == node)
    backend.reboot_node(node, asap=True, next_state="resume", reason="contract reboot")
    seen: set[str] = set()

    def back() -> bool:
        n = next(n for n in backend.list_nodes() if n.name == node)
        seen.add(n.display_state)
        return (
            "reboot" in seen
            and n.display_state == "idle"
            and n.boot_time is not None
            and (before.boot_time is None or n.boot_time >= before.boot_time)
            and not n.flags & {"REBOOT_REQUESTED", "REBOOT_ISSUED", "DRAIN"}
        )

    cluster_env.wait_until(back, f"{node} to come back from reboot")


def test_unreachable_is_retryable(backend: ClusterBackend, cluster_env: ContractEnv) -> None:
    assert cluster_env.make_unreachable is not None
    target = cluster_env.make_unreachable()
    try:
        with pytest.raises(RetryableError):
            target.list_nodes()
    finally:
        if target is not backend:
            target.close()
    assert backend.list_nodes()  # and the real one still works


def test_wrong_host_key_is_refused(backend: ClusterBackend, cluster_env: ContractEnv) -> None:
    if cluster_env.make_wrong_host_key is None:
        pytest.skip(f"{cluster_env.kind} has no host key")
    target = cluster_env.make_wrong_host_key()
    try:
        with pytest.raises(HostKeyError):
            target.list_nodes()
    finally:
        target.close()
