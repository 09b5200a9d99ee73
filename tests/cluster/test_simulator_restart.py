"""The simulator on an injected clock, and a simulator that continues a remembered world (no Django)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from jobs.cluster import JobInfo, JobSpec, NodeInfo, SimNode, SimulatedCluster, TerminalError
from jobs.cluster.simscript import ShellContext, hostlist_compress, hostlist_expand, script_plan

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self, at: datetime = T0) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at

    def move(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


def _sim(clock: Clock, **kw: object) -> SimulatedCluster:
    nodes = [SimNode(f"node{i}", gpus=4, gpu_type="p150a", cpus=8) for i in range(1, 4)]
    return SimulatedCluster(nodes, seed=3, clock=clock, min_job_age=300, **kw)  # type: ignore[arg-type]


def _spec(seconds: int, tag: str, **kw: object) -> JobSpec:
    script = f"#!/bin/bash\n# sim: duration={seconds}\necho 'hello from' $SLURM_JOB_NODELIST\n"
    return JobSpec(name=tag, script=script, tag=tag, gpus=4, time_limit_minutes=60, **kw)  # type: ignore[arg-type]


def test_a_simulator_on_a_clock_keeps_its_time() -> None:
    clock = Clock()
    sim = _sim(clock)
    # when a job is submitted and the clock moves past its run time
    job_id = sim.submit_job(_spec(90, "a"), as_user="alice")
    assert sim.now() == T0
    clock.move(60)
    running = sim.get_job(job_id)
    assert running is not None and (running.state, running.start_time) == ("RUNNING", T0)
    clock.move(40)
    # then its times are the clock's, to the second
    done = sim.get_job(job_id)
    assert done is not None and done.state == "COMPLETED"
    assert (done.submit_time, done.start_time, done.end_time) == (T0, T0, T0 + timedelta(seconds=90))
    assert sim.now() == T0 + timedelta(seconds=100)


def test_a_long_gap_in_the_clock_is_jumped_over() -> None:
    clock = Clock()
    sim = _sim(clock)
    job_id = sim.submit_job(_spec(600, "a"), as_user="alice")
    # when the machine slept for a day
    clock.move(86_400)
    # then the job ended during the replayed last hour, and the simulation is at the clock's time
    info = sim.list_finished_jobs([job_id])[0]
    assert info.state == "COMPLETED"
    assert info.end_time == T0 + timedelta(seconds=86_400 - 3600)
    assert sim.now() == clock()


def test_output_stays_readable_after_the_job_leaves_the_queue() -> None:
    clock = Clock()
    sim = _sim(clock)
    job_id = sim.submit_job(_spec(10, "a"), as_user="alice")
    clock.move(10 + 301)  # past min_job_age: squeue no longer lists it
    assert sim.get_job(job_id) is None
    out = sim.read_job_output(job_id, as_user="alice")
    assert out.splitlines()[3:] == ["hello from node1", "[2026-12-01 09:00:10] done, exit 0"]
    with pytest.raises(TerminalError, match="Permission denied"):
        sim.read_job_output(job_id, as_user="bob")


def _info(job_id: int, state: str, **kw: object) -> JobInfo:
    base: dict[str, object] = {
        "name": f"job{job_id}", "user": "alice", "partition": "gpu", "gpus": 4, "node_count": 1,
        "time_limit_minutes": 60, "submit_time": T0, "stdout_path": f"/home/alice/slurm-{job_id}.out",
        "work_dir": "/home/alice", "comment": f"rackpilot:t{job_id}",
    }  # fmt: skip
    base.update(kw)
    return JobInfo(job_id=job_id, state=state, **base)  # type: ignore[arg-type]


def _script(seconds: int) -> str:
    return f'#!/bin/bash\n# sim: duration={seconds}\necho "on $SLURM_JOB_NODELIST as $USER"\n'


def test_restore_continues_the_remembered_jobs_and_nodes() -> None:
    # given what a database remembers: the restart is 60 s after the last sync
    clock = Clock(T0 + timedelta(seconds=300))
    last_seen = T0 + timedelta(seconds=240)
    sim = _sim(clock)
    remembered = [
        (_info(1000, "COMPLETED", start_time=T0, end_time=T0 + timedelta(seconds=100), exit_code=0,
               nodes="node1"), _script(100)),
        (_info(1001, "RUNNING", start_time=T0 + timedelta(seconds=100), nodes="node1"), _script(600)),
        (_info(1002, "RUNNING", start_time=T0 + timedelta(seconds=120), nodes="node2"), _script(150)),
        (_info(1003, "PENDING", state_reason="Resources"), _script(50)),
    ]  # fmt: skip
    nodes = [
        NodeInfo("node1", "mixed"),
        NodeInfo("node2", "mixed"),
        NodeInfo("node3", "idle", flags=frozenset({"DRAIN"}), reason="fan", reason_set_by="root"),
    ]
    # when a new simulator takes it over
    outcome = sim.restore(nodes=nodes, jobs=remembered, last_seen=last_seen)
    # then the job with time left runs on, the one whose time ran out while nothing ran ended at the
    # last sync with the reason, the queued one queues again, and the drained node stays drained
    assert outcome == {1000: "finished", 1001: "resumed", 1002: "ended", 1003: "queued"}
    jobs = {j.job_id: j for j in sim.list_jobs()}
    assert (jobs[1001].state, jobs[1001].start_time, jobs[1001].nodes) == (
        "RUNNING", T0 + timedelta(seconds=100), "node1",
    )  # fmt: skip
    assert (jobs[1002].state, jobs[1002].state_reason, jobs[1002].end_time) == (
        "CANCELLED", "demo restarted", last_seen,
    )  # fmt: skip
    assert jobs[1003].state == "RUNNING" and jobs[1003].nodes == "node2"  # node2 was freed
    drained = {n.name: n for n in sim.list_nodes()}["node3"]
    assert (drained.display_state, drained.reason, drained.reason_set_by) == ("drained", "fan", "root")
    # and new jobs get ids above every remembered one
    assert sim.submit_job(_spec(10, "new"), as_user="alice") == 1004
    # and every job that started has its output file, as it was written
    assert sim.read_job_output(1000, as_user="alice").splitlines()[3:] == [
        "on node1 as alice",
        "[2026-12-01 09:01:40] done, exit 0",
    ]
    assert sim.read_job_output(1002, as_user="alice").splitlines()[-1] == (
        "slurmstepd: error: *** JOB 1002 ON node2 CANCELLED AT 2026-12-01T09:04:00 (demo restarted) ***"
    )
    # and the resumed job ends when its script says, on the clock
    clock.move(400)
    assert sim.list_finished_jobs([1001])[0].end_time == T0 + timedelta(seconds=700)


def test_restore_leaves_known_ids_alone_and_keeps_a_down_node_down() -> None:
    clock = Clock()
    sim = _sim(clock)
    mine = sim.submit_job(_spec(100, "mine"), as_user="alice")
    outcome = sim.restore(
        nodes=[NodeInfo("node2", "down", flags=frozenset({"NOT_RESPONDING"}), reason="Not responding")],
        jobs=[(_info(mine, "PENDING"), _script(5))],
    )
    assert outcome == {}
    assert sim.get_job(mine) is not None and sim.get_job(mine).name == "mine"  # type: ignore[union-attr]
    node2 = {n.name: n for n in sim.list_nodes()}["node2"]
    assert (node2.display_state, node2.reason) == ("down", "Not responding")


def test_hostlists_compress_and_expand_as_slurm_writes_them() -> None:
    names = ["gpu01", "gpu02", "gpu03", "gpu07", "rig01", "login"]
    assert hostlist_compress(names) == "gpu[01-03,07],rig01,login"
    assert hostlist_expand("gpu[01-03,07],rig01,login") == names
    assert hostlist_compress(["node1"]) == "node1"


@pytest.mark.parametrize(
    ("line", "printed"),
    [
        ("$A", "x y"),  # unquoted: split and joined by echo
        ('"$A"', "x  y"),
        ("'$A' \\$A", "$A $A"),
        ("${E:-dflt} ${Z-z} $UNSET end", "dflt z end"),
        ("a # comment", "a"),
        ('x"$(hostname)"y $(echo one two | wc -l)', "xnode7y 1"),
        ('$(scontrol show hostnames "gpu[1-3]" | tail -n 2)', "gpu2 gpu3"),
        ("$(nvidia-smi -L)", ""),  # a command the simulator does not know prints nothing
    ],
)
def test_echo_lines_read_as_bash_reads_them(line: str, printed: str) -> None:
    shell = ShellContext(env={"A": "x  y", "E": ""}, hostname="node7", now=T0)
    assert shell.echo(line) == printed


def test_script_plan_keeps_assignments_and_echoes_in_order() -> None:
    plan = script_plan(
        "#!/bin/bash\nexport X=1\necho $X\nY=two\nsleep 5\nsleep 2.5\nexit 4\n", random.Random(0)
    )
    assert (plan.duration, plan.exit_code) == (7.5, 4)
    assert plan.steps == (("set", "X=1"), ("echo", "$X"), ("set", "Y=two"))
