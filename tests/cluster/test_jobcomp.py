"""Finished jobs after the queue forgot them: the jobcomp/filetxt parser and list_finished_jobs."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from jobs.cluster import ClusterBackend, CommandResult, JobInfo, JobSpec, SimulatedCluster, SlurmBackend
from jobs.cluster.errors import TerminalError, ValidationError
from jobs.cluster.slurm_parsers import parse_jobcomp_filetxt, parse_scontrol_config

from .conftest import ContractEnv


def test_recorded_jobcomp_lines_are_parsed(fixture_text: Callable[[str], str]) -> None:
    # given the lab's completion log lines (refused, completed, exit 3, kill -9, cancelled)
    errors: list[str] = []
    # when parsed
    jobs = {j.job_id: j for j in parse_jobcomp_filetxt(fixture_text("jobcomp_filetxt.txt"), errors=errors)}
    # then every line is a finished job with its final state and real exit status
    assert errors == []
    assert {i: (j.state, j.exit_code) for i, j in jobs.items()} == {
        3: ("FAILED", 129),  # ExitCode=0:1 (refused --gres=gpu:5)
        91: ("COMPLETED", 0),
        92: ("FAILED", 3),  # ExitCode=3:0
        93: ("FAILED", 137),  # ExitCode=0:9 (kill -9)
        94: ("CANCELLED", 0),
    }
    assert jobs[92] == JobInfo(
        job_id=92,
        name="rec job",
        user="alice",
        state="FAILED",
        account=None,
        partition="debug",
        nodes="node1",
        node_count=1,
        gpus=0,
        cpus=1,
        submit_time=datetime(2026, 11, 30, 2, 56, 39, tzinfo=UTC),
        start_time=datetime(2026, 11, 30, 2, 56, 39, tzinfo=UTC),
        end_time=datetime(2026, 11, 30, 2, 56, 39, tzinfo=UTC),
        time_limit_minutes=5,
        exit_code=3,
        work_dir="/home/alice",
    )
    assert jobs[3].nodes == "" and jobs[3].node_count == 0
    assert all(j.finished for j in jobs.values())


def test_jobcomp_variants_and_malformed_lines() -> None:
    # given other states, UNLIMITED, Unknown times, GPUs in Tres, an unknown key and bad lines
    text = (
        "JobId=7 UserId=bob(1003) GroupId=bob(1003) Name=train JobState=TIMEOUT Partition=gpu "
        "TimeLimit=UNLIMITED StartTime=Unknown EndTime=2026-11-30T03:00:00 NodeList=node[1-2] NodeCnt=2 "
        "ProcCnt=8 WorkDir=/home/bob ReservationName= Tres=cpu=8,mem=1G,node=2,gres/gpu=4 Account=ml "
        "QOS=normal WcKey= Cluster=lab SubmitTime=2026-11-30T02:00:00 EligibleTime=2026-11-30T02:00:00 "
        "DerivedExitCode=0:0 ExitCode=0:15 FutureKey=x y\n"
        "\n"
        "garbage without keys\n"
        "JobId=abc JobState=FAILED\n"
        "JobId=8 Name=nostate\n"
        "JobId=9 JobState=OUT_OF_MEMORY ExitCode=0:0 NodeCnt=1 Tres=cpu=1\n"
        "JobId=10 JobState=NODE_FAIL ExitCode=bad\n"
    )
    errors: list[str] = []
    # when parsed
    jobs = {j.job_id: j for j in parse_jobcomp_filetxt(text, errors=errors)}
    # then good lines are kept, bad ones reported and skipped
    assert sorted(jobs) == [7, 9, 10]
    assert [e.split(":")[0] for e in errors] == ["line 3", "line 4", "line 5"]
    seven = jobs[7]
    assert (seven.state, seven.exit_code, seven.time_limit_minutes) == ("TIMEOUT", 143, None)
    assert (seven.user, seven.account, seven.nodes, seven.node_count, seven.gpus, seven.cpus) == (
        "bob", "ml", "node[1-2]", 2, 2, 8,
    )  # fmt: skip
    assert seven.start_time is None and seven.end_time == datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
    assert (jobs[9].state, jobs[9].exit_code, jobs[9].user, jobs[9].name) == ("OUT_OF_MEMORY", 0, None, "")
    assert (jobs[10].state, jobs[10].exit_code) == ("NODE_FAIL", None)
    # and without an errors list nothing raises
    assert len(parse_jobcomp_filetxt(text)) == 3


class _Recorder:
    """A runner answering canned output per command name and recording argv."""

    def __init__(self, answers: dict[str, CommandResult]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, ...]] = []

    def run(self, argv, **kwargs):  # type: ignore[no-untyped-def]
        self.calls.append(tuple(argv))
        key = " ".join(argv[:2]) if argv[0] == "scontrol" else argv[0]
        return self.answers[key]

    def close(self) -> None:
        pass


def _ok(out: str = "", code: int = 0, err: str = "") -> CommandResult:
    return CommandResult(argv=(), exit_code=code, stdout=out, stderr=err, duration=0.0)


CONFIG = "Configuration data as of 2026-11-30T02:00:00\nAccountingStorageType   = {acct}\nJobCompLoc              = /var/log/slurm/jobcomp.txt\nJobCompType             = jobcomp/filetxt\n"  # noqa: E501


def test_jobcomp_lookup_builds_a_grep_argv_and_detects_the_source_once(
    fixture_text: Callable[[str], str],
) -> None:
    # given a cluster without accounting storage whose completion log holds the recorded lines
    runner = _Recorder(
        {
            "scontrol show": _ok(CONFIG.format(acct="accounting_storage/none")),
            "grep": _ok(fixture_text("jobcomp_filetxt.txt")),
        }
    )
    backend = SlurmBackend(runner)  # type: ignore[arg-type]
    # when asked twice
    first = backend.list_finished_jobs([92, 91, 92])
    runner.answers["grep"] = _ok(code=1)  # nothing matched
    second = backend.list_finished_jobs([500])
    # then the config is read once, grep gets an anchored pattern of the ids, order follows the ids
    assert [j.job_id for j in first] == [92, 91] and second == []
    assert runner.calls == [
        ("scontrol", "show", "config"),
        ("grep", "-E", "-e", "^JobId=(92|91) ", "--", "/var/log/slurm/jobcomp.txt"),
        ("grep", "-E", "-e", "^JobId=(500) ", "--", "/var/log/slurm/jobcomp.txt"),
    ]
    assert parse_scontrol_config(CONFIG)["JobCompType"] == "jobcomp/filetxt"


def test_unreadable_jobcomp_log_and_bad_ids_are_refused() -> None:
    runner = _Recorder(
        {
            "scontrol show": _ok(CONFIG.format(acct="accounting_storage/none")),
            "grep": _ok(code=2, err="grep: /var/log/slurm/jobcomp.txt: Permission denied"),
        }
    )
    backend = SlurmBackend(runner)  # type: ignore[arg-type]
    with pytest.raises(TerminalError, match="Permission denied"):
        backend.list_finished_jobs([1])
    for bad in (["1"], [True], [0], [-3], [1.5]):
        with pytest.raises(ValidationError):
            backend.list_finished_jobs(bad)  # type: ignore[arg-type]
    assert backend.list_finished_jobs([]) == []
    assert len(runner.calls) == 2  # no command for refused ids or an empty list


def test_accounting_lookup_uses_sacct_and_its_parsable_exit_codes(
    fixture_text: Callable[[str], str],
) -> None:
    # given a cluster with slurmdbd
    sacct_json = fixture_text("sacct_v0.0.38.json")
    runner = _Recorder({"scontrol show": _ok(CONFIG.format(acct="accounting_storage/slurmdbd"))})
    backend = SlurmBackend(runner)  # type: ignore[arg-type]
    from jobs.cluster.slurm_parsers import parse_sacct_json

    ids = [j.job_id for j in parse_sacct_json(sacct_json) if j.finished]
    codes = "".join(f"{i}|FAILED|3:0\n{i}.batch|FAILED|3:0\n" for i in ids)

    def run(argv, **kwargs):  # type: ignore[no-untyped-def]
        runner.calls.append(tuple(argv))
        if argv[0] == "scontrol":
            return runner.answers["scontrol show"]
        return _ok(sacct_json if "--json" in argv else codes)

    runner.run = run  # type: ignore[method-assign]
    # when asked
    found = backend.list_finished_jobs(ids)
    # then sacct is used (JSON for the record, parsable for the exit code), no jobcomp read
    wanted = ",".join(map(str, ids))
    assert runner.calls[1:] == [
        ("sacct", "--json", "-j", wanted),
        ("sacct", "--parsable2", "--noheader", "-X", "-o", "JobIDRaw,State,ExitCode", "-j", wanted),
    ]
    assert found and {j.exit_code for j in found} == {3}


# ---------------------------------------------------------------------------- contract (sim + lab)


def test_a_finished_job_is_found_after_the_queue_forgot_it(
    backend: ClusterBackend, cluster_env: ContractEnv
) -> None:
    # given a short job of alice that exits 3
    alice = cluster_env.users[0]
    spec = JobSpec(
        name="jobcomp", script="#!/bin/bash\nsleep 1\nexit 3\n", tag=f"contract-{uuid.uuid4().hex[:12]}",
        time_limit_minutes=5,
    )  # fmt: skip
    job_id = backend.submit_job(spec, as_user=alice)
    done = cluster_env.wait_until(
        lambda: (j := backend.get_job(job_id)) is not None and j.finished and j, "the job to finish"
    )
    if isinstance(backend, SimulatedCluster):
        backend.advance(backend.min_job_age + 5)  # past MinJobAge: gone from the queue
        assert backend.get_job(job_id) is None
    # when its final record is asked for (with an id Slurm never had)
    found = cluster_env.wait_until(
        lambda: backend.list_finished_jobs([job_id, 4_000_000]), "the completion record"
    )
    # then only that job comes back, with the state, times and exit code the queue showed
    assert [j.job_id for j in found] == [job_id]
    rec = found[0]
    assert (rec.state, rec.exit_code, rec.user, rec.name) == ("FAILED", 3, alice, "jobcomp")
    assert (rec.start_time, rec.end_time, rec.nodes) == (done.start_time, done.end_time, done.nodes)


def test_an_active_job_has_no_finished_record(backend: ClusterBackend, cluster_env: ContractEnv) -> None:
    alice = cluster_env.users[0]
    spec = JobSpec(
        name="jobcomp", script="#!/bin/bash\nsleep 120\n", tag=f"contract-{uuid.uuid4().hex[:12]}",
        time_limit_minutes=5,
    )  # fmt: skip
    job_id = backend.submit_job(spec, as_user=alice)
    try:
        assert backend.list_finished_jobs([job_id]) == []
    finally:
        backend.cancel_job(job_id, as_user=None)
