"""Parsers on recorded 22.05 output and on hand-written newer shapes (FORMATS.md §5)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from jobs.cluster import CommandResult, RetryableError, SlurmOutputError, SlurmReportedError, TerminalError
from jobs.cluster.slurm import classify_failure, classify_output_error
from jobs.cluster.slurm_parsers import (
    RecordMemo,
    decode_wait_status,
    expand_output_pattern,
    parse_gres,
    parse_partitions,
    parse_sacct_json,
    parse_sacct_parsable,
    parse_sbatch_error,
    parse_sbatch_parsable,
    parse_scontrol_kv,
    parse_scontrol_nodes,
    parse_sinfo_json,
    parse_slurm_duration,
    parse_squeue_json,
    slurm_error_numbers,
    slurm_errors,
    slurm_number,
    slurm_timestamp,
    slurm_version,
    slurm_warnings,
)

Text = Callable[[str], str]


def ts(n: int) -> datetime:
    return datetime.fromtimestamp(n, tz=UTC)


# ------------------------------------------------------------------ squeue 22.05 (recorded)


def test_squeue_v0038_recorded(fixture_text: Text) -> None:
    jobs = {j.job_id: j for j in parse_squeue_json(fixture_text("squeue_v0.0.38.json"))}
    assert sorted(jobs) == list(range(1, 11))
    assert slurm_version(json.loads(fixture_text("squeue_v0.0.38.json"))) == (22, 5, 8)

    t1 = jobs[1]
    assert (t1.name, t1.user, t1.state, t1.state_reason) == ("t1", "alice", "FAILED", "NonZeroExitCode")
    assert t1.exit_code == 3  # raw wait status 768
    assert (t1.gpus, t1.gpu_type, t1.nodes, t1.node_count, t1.cpus) == (2, "fake", "node1", 1, 1)
    assert t1.stdout_path == "/home/alice/t1-1.out"  # %x-%j expanded
    assert t1.comment == "rackpilot:abc" and t1.tag == "abc"
    assert t1.submit_time == ts(1796001189) and t1.start_time == ts(1796001190)
    assert t1.end_time == ts(1796001191) and t1.time_limit_minutes == 1440
    assert t1.account is None

    pending = jobs[2]
    assert (pending.state, pending.state_reason, pending.node_count) == ("PENDING", "PartitionNodeLimit", 5)
    assert pending.start_time is None and pending.end_time is None and pending.exit_code is None
    assert pending.stdout_path == "/home/bob/slurm-2.out"
    assert pending.cpus == 5

    refused = jobs[3]  # --gres=gpu:5: burned a job id, never ran
    assert (refused.state, refused.state_reason, refused.gpus) == ("FAILED", "BadConstraints", 5)
    assert refused.exit_code is None and refused.nodes == ""

    running = jobs[4]
    assert (running.state, running.state_reason, running.gpus, running.time_limit_minutes) == (
        "RUNNING",
        None,
        4,
        120,
    )
    assert running.end_time is None and running.exit_code is None and running.active

    assert (jobs[5].partition, jobs[5].gpus, jobs[5].gpu_type) == ("debug", 1, None)
    assert (jobs[6].state_reason, jobs[6].node_count, jobs[6].gpus) == ("Resources", 4, 4)
    assert (jobs[7].state, jobs[7].exit_code) == ("COMPLETED", 0)
    assert (jobs[9].state, jobs[9].exit_code, jobs[9].finished) == ("CANCELLED", None, True)
    assert (jobs[10].state, jobs[10].exit_code, jobs[10].nodes) == ("FAILED", 3, "node4")


def test_sinfo_v0038_recorded(fixture_text: Text) -> None:
    nodes = {n.name: n for n in parse_sinfo_json(fixture_text("sinfo_v0.0.38.json"))}
    assert sorted(nodes) == ["node1", "node2", "node3", "node4"]
    n1, n2, n3, n4 = (nodes[f"node{i}"] for i in range(1, 5))
    assert (n1.state, n1.flags, n1.display_state) == ("mixed", frozenset(), "mixed")
    assert (n1.gpus_total, n1.gpus_used, n1.gpu_type, n1.cpus, n1.cpus_alloc, n1.memory_mb) == (
        4,
        4,
        "fake",
        4,
        1,
        2000,
    )
    assert n1.reason is None and n1.reason_set_by is None and n1.reason_changed_at is None
    assert n1.partitions == ("gpu", "debug") and n1.boot_time == ts(1796000953)

    assert (n2.state, n2.flags, n2.display_state) == ("mixed", frozenset({"DRAIN"}), "draining")
    assert (n2.reason, n2.reason_set_by, n2.reason_changed_at) == ("disk check", "root", ts(1796001201))
    assert n2.gpus_used == 1

    assert (n3.state, n3.display_state, n3.reason) == ("idle", "drained", "bad gpu 2")
    assert (n4.state, n4.flags, n4.display_state) == ("down", frozenset({"DRAIN", "REBOOT_ISSUED"}), "reboot")
    assert n4.reason == "firmware : reboot issued"


def test_partitions_recorded(fixture_text: Text) -> None:
    parts = parse_partitions(fixture_text("scontrol_show_partition.txt"))
    assert [(p.name, p.state, p.max_time_minutes, p.nodes, p.is_default, p.total_nodes) for p in parts] == [
        ("gpu", "up", 1440, "node[1-4]", True, 4),
        ("debug", "up", 30, "node[1-4]", False, 4),
    ]


def test_scontrol_nodes_recorded(fixture_text: Text) -> None:
    nodes = {n.name: n for n in parse_scontrol_nodes(fixture_text("scontrol_show_node.txt"))}
    assert nodes["node2"].display_state == "draining"
    assert nodes["node2"].reason == "disk check" and nodes["node2"].reason_set_by == "root"
    assert nodes["node3"].display_state == "drained"
    assert nodes["node4"].display_state == "reboot"
    assert nodes["node1"].cpus == 4 and nodes["node1"].gpus_total == 4 and nodes["node1"].gpu_type == "fake"


def test_scontrol_kv_job_recorded(fixture_text: Text) -> None:
    recs = parse_scontrol_kv(fixture_text("scontrol_show_job.txt"))
    by_id = {r["JobId"]: r for r in recs}
    assert by_id["1"]["JobName"] == "t1" and by_id["1"]["ExitCode"] == "3:0"
    assert by_id["1"]["StdOut"] == "/home/alice/t1-1.out"
    assert by_id["4"]["JobState"] == "RUNNING"


def test_scontrol_kv_values_with_spaces() -> None:
    [rec] = parse_scontrol_kv(
        "NodeName=n1 OS=Linux 6.1 #1 SMP State=IDLE+DRAIN Reason=a b=c [root@2024-01-01T00:00:00]"
    )
    assert rec["OS"] == "Linux 6.1 #1 SMP" and rec["State"] == "IDLE+DRAIN"
    assert rec["Reason"] == "a b=c [root@2024-01-01T00:00:00]"
    with pytest.raises(SlurmOutputError):
        parse_scontrol_kv("this is not scontrol output")


# ------------------------------------------------------------------ newer shapes (hand-written)


def test_squeue_v0040(fixture_text: Text) -> None:
    doc = json.loads(fixture_text("squeue_v0.0.40.json"))
    assert slurm_version(doc) == (23, 11, 5)
    jobs = {j.job_id: j for j in parse_squeue_json(doc)}
    p = jobs[812]
    assert (p.state, p.state_reason, p.time_limit_minutes, p.node_count, p.gpus, p.cpus) == (
        "PENDING",
        "Resources",
        60,
        2,
        8,
        64,
    )
    assert p.start_time is None and p.exit_code is None and p.submit_time == ts(1717230000)
    assert p.stdout_path == "/home/alice/llm/train-70b-812.out" and p.account == "ml" and p.tag == "run-7"

    f = jobs[813]
    assert (f.state, f.exit_code, f.time_limit_minutes, f.gpus) == ("FAILED", 3, None, 2)
    assert f.end_time == ts(1717240000) and f.start_time == ts(1717239000)
    assert f.stdout_path == "/home/bob/slurm-813.out"

    k = jobs[814]
    assert (k.state, k.exit_code, k.submit_time, k.user) == ("CANCELLED", 128 + 9, None, "bob")
    assert k.partition is None and k.account is None and k.cpus is None and k.gpus == 0

    r = jobs[815]
    assert (r.state, r.state_reason) == ("PENDING", "BeginTime")


def test_sinfo_v0041(fixture_text: Text) -> None:
    doc = json.loads(fixture_text("sinfo_nodes_v0.0.41.json"))
    assert slurm_version(doc) == (24, 5, 1)
    nodes = {n.name: n for n in parse_sinfo_json(doc)}
    g1, g2, g3, tt = nodes["gpu01"], nodes["gpu02"], nodes["gpu03"], nodes["tt01"]
    assert (g1.state, g1.flags, g1.display_state) == ("idle", frozenset({"DRAIN"}), "drained")
    assert (g1.reason, g1.reason_set_by, g1.reason_changed_at) == ("bad gpu 3", "ops", ts(1717236000))
    assert (g1.gpus_total, g1.gpus_used, g1.gpu_type) == (8, 0, "h100")
    assert (g2.display_state, g2.gpus_used, g2.partitions) == ("draining", 2, ("gpu", "debug"))
    assert (g3.state, g3.display_state, g3.boot_time) == ("down", "reboot", None)
    assert (tt.state, tt.display_state, tt.gpus_total, tt.gpus_used, tt.gpu_type) == (
        "allocated",
        "alloc",
        4,
        4,
        "n300",
    )
    assert tt.reason is None and tt.reason_changed_at is None


def test_sinfo_v0041_grouped_shape() -> None:
    doc = {
        "sinfo": [
            {
                "node": {"state": ["IDLE", "DRAIN"]},
                "nodes": {"nodes": ["a1", "a2"]},
                "gres": {"total": "gpu:l40s:4", "used": "gpu:l40s:0"},
                "cpus": {"maximum": 32, "allocated": 0},
                "memory": {"maximum": 128000},
                "partition": {"name": "gpu"},
                "reason": {"description": "rma", "user": "ops", "time": {"set": True, "number": 1717236000}},
            }
        ],
        "meta": {"slurm": {"version": {"major": "24", "minor": "11", "micro": "0"}}},
        "errors": [],
    }
    nodes = parse_sinfo_json(doc)
    assert [(n.name, n.display_state, n.gpus_total, n.reason, n.partitions) for n in nodes] == [
        ("a1", "drained", 4, "rma", ("gpu",)),
        ("a2", "drained", 4, "rma", ("gpu",)),
    ]


def test_error_documents(fixture_text: Text) -> None:
    doc = json.loads(fixture_text("squeue_error_v0.0.41.json"))
    assert slurm_errors(doc) == ["Unable to query jobs: Unable to contact slurm controller (connect failure)"]
    with pytest.raises(SlurmOutputError, match="Unable to contact slurm controller"):
        parse_squeue_json(doc)
    assert slurm_errors({"errors": [{"error": "Invalid job id", "error_number": 2017}]}) == ["Invalid job id"]


@pytest.mark.parametrize(
    "bad",
    ["", "not json", "[]", '{"jobs": 3}', '{"jobs": [1, 2]}', '{"jobs": [{"name": "x"}]}', '{"meta": {}}'],
)
def test_structurally_invalid_squeue_raises_value_error(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_squeue_json(bad)


def test_a_memo_parses_only_the_records_that_changed_since_the_previous_listing(fixture_text: Text) -> None:
    # given the recorded 22.05 listing parsed once with a memo
    memo: RecordMemo = RecordMemo()
    doc = json.loads(fixture_text("squeue_v0.0.38.json"))
    first = {j.job_id: j for j in parse_squeue_json(json.dumps(doc), memo=memo)}
    # when job 2 changes state and the listing is read again, in another order
    doc["jobs"].reverse()
    [pending] = [j for j in doc["jobs"] if j["job_id"] == 2]
    pending.update(job_state="RUNNING", nodes="node1", start_time=1796001300)
    second = {j.job_id: j for j in parse_squeue_json(json.dumps(doc), memo=memo)}
    # then the unchanged records are the very same objects, the changed one is parsed anew,
    # and every result is what parsing without a memo gives
    assert sorted(second) == sorted(first)
    assert [k for k in second if second[k] is not first[k]] == [2]
    assert second[2].state == "RUNNING" and first[2].state == "PENDING"
    assert list(second.values()) == parse_squeue_json(json.dumps(doc))
    # and a listing printed differently (other spacing) is parsed anew, to the same jobs
    third = parse_squeue_json(json.dumps(doc, indent=1), memo=memo)
    assert third == list(second.values()) and all(a is not b for a, b in zip(third, second.values()))


def test_a_memo_does_not_lose_the_checks_of_a_listing() -> None:
    # given a memo that holds a good listing
    memo: RecordMemo = RecordMemo()
    good = '{"jobs": [{"job_id": 5, "job_state": "RUNNING"}]}'
    [job] = parse_squeue_json(good, memo=memo)
    # then a listing with a non-object, a non-list or errors is refused all the same
    for bad in ('{"jobs": [{"job_id": 5, "job_state": "RUNNING"}, 7]}', '{"jobs": 3}'):
        with pytest.raises(SlurmOutputError):
            parse_squeue_json(bad, memo=memo)
    with pytest.raises(SlurmReportedError):
        parse_squeue_json(
            '{"errors": [{"error": "x"}], "jobs": [{"job_id": 5, "job_state": "RUNNING"}]}', memo=memo
        )
    # and the good listing still parses to the same job
    assert parse_squeue_json(good, memo=memo) == [job]


def test_numbers_past_64_bits_or_nan_are_read_as_pythons_decoder_reads_them() -> None:
    # msgspec refuses them; the parse falls back to json (a value it cannot use becomes None)
    [j] = parse_squeue_json(
        '{"jobs": [{"job_id": 5, "time_limit": 123456789012345678901234567890, "priority": NaN}]}'
    )
    assert (j.job_id, j.time_limit_minutes) == (5, 123456789012345678901234567890)
    [n] = parse_sinfo_json(
        '{"nodes": [{"name": "x", "cpus": 1e400, "real_memory": 64.0}]}', memo=RecordMemo()
    )
    assert (n.name, n.cpus, n.memory_mb) == ("x", None, 64)


def test_missing_values_become_none() -> None:
    [j] = parse_squeue_json('{"jobs": [{"job_id": 5}]}')
    assert (j.job_id, j.name, j.user, j.state, j.time_limit_minutes, j.exit_code, j.submit_time) == (
        5,
        "",
        None,
        "UNKNOWN",
        None,
        None,
        None,
    )
    [n] = parse_sinfo_json('{"nodes": [{"name": "x", "state": 7, "gres": 3}]}')
    assert (n.state, n.gpus_total, n.cpus) == ("unknown", 0, None)


# ------------------------------------------------------------------ sacct


def test_sacct_parsable(fixture_text: Text) -> None:
    recs = parse_sacct_parsable(fixture_text("sacct_parsable.txt"))
    main = {r.job_id: r for r in recs if r.step is None}
    assert (main[11].state, main[11].exit_code, main[11].signal) == ("COMPLETED", 0, 0)
    assert (main[12].state, main[12].exit_code) == ("FAILED", 3)
    assert (main[14].state, main[14].signal) == ("CANCELLED", 15)
    assert main[15].state == "TIMEOUT" and main[16].state == "OUT_OF_MEMORY"
    assert [r.step for r in recs if r.job_id == 12] == [None, "batch", "extern"]
    with pytest.raises(SlurmOutputError):
        parse_sacct_parsable("garbage")


def test_sacct_json(fixture_text: Text) -> None:
    [j] = parse_sacct_json(fixture_text("sacct_v0.0.38.json"))
    assert (j.job_id, j.state, j.user, j.gpus, j.gpu_type, j.node_count, j.cpus) == (
        12,
        "FAILED",
        "alice",
        2,
        "fake",
        1,
        1,
    )
    assert j.start_time == ts(1796001190) and j.end_time == ts(1796001191) and j.time_limit_minutes == 5
    assert j.exit_code == 0  # 22.05's sacct JSON bug; parse_sacct_parsable has the real code
    newer = {
        "jobs": [
            {
                "job_id": 9,
                "state": {"current": ["COMPLETED"], "reason": "None"},
                "time": {"start": 10, "end": 20, "submission": 5, "limit": {"set": True, "number": 60}},
                "exit_code": {"status": ["EXITED"], "return_code": {"set": True, "number": 4}},
            }
        ]
    }
    [k] = parse_sacct_json(newer)
    assert (k.state, k.exit_code, k.time_limit_minutes) == ("COMPLETED", 4, 60)


def _result(argv: str, exit_code: int, stdout: str = "", stderr: str = "") -> CommandResult:
    return CommandResult(
        argv=tuple(argv.split()), exit_code=exit_code, stdout=stdout, stderr=stderr, duration=0.0
    )


def test_sacct_without_accounting_is_a_terminal_error_with_slurms_message(fixture_text: Text) -> None:
    # recorded: sacct exits 1 with this text when there is no slurmdbd; retrying will not help
    res = _result("sacct --json -j 1", 1, stderr=fixture_text("sacct_disabled.stderr"))
    err = classify_failure(res, "sacct")
    assert type(err) is TerminalError
    assert (str(err), err.slurm_message, err.result) == (
        "sacct: Slurm accounting storage is disabled",
        "Slurm accounting storage is disabled",
        res,
    )


# ------------------------------------------------------------------ a controller that is down


@pytest.mark.parametrize(
    ("name", "parse"),
    [("sinfo_down_v0.0.38.json", parse_sinfo_json), ("squeue_down_v0.0.38.json", parse_squeue_json)],
)
def test_recorded_outage_listing_is_an_error_not_an_empty_cluster(
    fixture_text: Text, name: str, parse
) -> None:
    # recorded with slurmctld stopped: exit 0, an EMPTY list and "errors" beside it
    doc = json.loads(fixture_text(name))
    assert doc.get("nodes", doc.get("jobs")) == []
    with pytest.raises(SlurmReportedError) as caught:
        parse(fixture_text(name))
    expected = (
        "Unspecified error"
        if name.startswith("sinfo")
        else "Failed while looking for jobs: Unspecified error"
    )
    assert (str(caught.value), caught.value.errors, caught.value.error_numbers) == (
        f"Slurm reported: {expected}",
        (expected,),
        (-1,),
    )


def test_recorded_outage_is_retryable_for_the_backend(fixture_text: Text) -> None:
    for name, what in (("sinfo_down_v0.0.38.json", "sinfo"), ("squeue_down_v0.0.38.json", "squeue")):
        res = _result(f"{what} --json", 0, stdout=fixture_text(name))
        with pytest.raises(SlurmReportedError) as caught:
            parse_squeue_json(res.stdout) if what == "squeue" else parse_sinfo_json(res.stdout)
        err = classify_output_error(caught.value, res, what)
        assert type(err) is RetryableError and err.result is res
        assert str(err).startswith(f"{what}: Slurm reported: ")
    # scontrol with the controller down exits 1 (recorded stderr)
    res = _result("scontrol show partition -o", 1, stderr=fixture_text("scontrol_down.stderr"))
    err = classify_failure(res, "scontrol show partition")
    assert type(err) is RetryableError
    assert str(err) == (
        "scontrol show partition: slurm_load_partitions error: Unable to contact slurm controller (connect failure)"
    )


def _error_doc(key: str, error: dict, *, version: dict | None = None, records: list | None = None) -> dict:
    doc: dict = {"errors": [error], "warnings": []}
    if version is not None:
        doc["meta"] = version
    doc[key] = records if records is not None else []
    return doc


V38 = {"Slurm": {"version": {"major": 22, "minor": 5, "micro": 8}}}
V41 = {"slurm": {"version": {"major": "24", "minor": "11", "micro": "4"}}}
DOWN41 = {
    "description": "Unable to query jobs",
    "source": "slurm_load_jobs()",
    "error": "Unable to contact slurm controller (connect failure)",
    "error_number": 1007,
}


@pytest.mark.parametrize(
    ("key", "parse", "version", "error"),
    [
        ("nodes", parse_sinfo_json, V38, {"error": "Unspecified error", "errno": -1}),
        ("jobs", parse_squeue_json, V38, {"error": "Unspecified error", "error_number": -1}),
        ("jobs", parse_sacct_json, V38, {"error": "Unspecified error", "error_number": -1}),
        ("nodes", parse_sinfo_json, V41, DOWN41),
        ("sinfo", parse_sinfo_json, V41, DOWN41),
        ("jobs", parse_squeue_json, V41, DOWN41),
        ("jobs", parse_sacct_json, V41, DOWN41),
    ],
)
def test_errors_beside_a_list_raise_for_every_command_and_version(key, parse, version, error) -> None:
    # even beside records: a listing that Slurm says is wrong is never believed
    for records in ([], [{"name": "node1", "job_id": 1}]):
        doc = _error_doc(key, error, version=version, records=records)
        with pytest.raises(SlurmReportedError) as caught:
            parse(json.dumps(doc))
        number = error.get("error_number", error.get("errno"))
        assert caught.value.error_numbers == (number,)
        assert caught.value.errors == tuple(slurm_errors(doc))
        res = _result("x --json", 0, stdout=json.dumps(doc))
        assert type(classify_output_error(caught.value, res, "x")) is RetryableError


def test_an_error_that_is_not_an_outage_is_terminal() -> None:
    doc = {"errors": [{"error": "Invalid job id specified", "error_number": 2017}], "jobs": []}
    res = _result("squeue --json", 0, stdout=json.dumps(doc))
    with pytest.raises(SlurmReportedError) as caught:
        parse_squeue_json(res.stdout)
    err = classify_output_error(caught.value, res, "squeue")
    assert isinstance(err, SlurmReportedError) and isinstance(err, TerminalError)
    assert (str(err), err.slurm_message, err.result) == (
        "squeue: Slurm reported: Invalid job id specified",
        "Invalid job id specified",
        res,
    )


def test_text_instead_of_json_is_classified_by_what_it_says() -> None:
    down = _result(
        "squeue --json",
        0,
        stdout="slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n",
    )
    with pytest.raises(SlurmOutputError) as caught:
        parse_squeue_json(down.stdout)
    err = classify_output_error(caught.value, down, "squeue")
    assert type(err) is RetryableError
    assert str(err) == "squeue: slurm_load_jobs error: Unable to contact slurm controller (connect failure)"
    garbage = _result("squeue --json", 0, stdout="hello")
    with pytest.raises(SlurmOutputError) as caught:
        parse_squeue_json(garbage.stdout)
    err = classify_output_error(caught.value, garbage, "squeue")
    assert type(err) is SlurmOutputError and str(err).startswith("squeue: Slurm output is not JSON")


def test_warnings_are_kept_but_are_not_errors() -> None:
    doc = {
        "meta": V41,
        "errors": [],
        "warnings": [
            {"description": "Node node9 not found in any partition", "source": "sinfo"},
            "plain text",
        ],
        "nodes": [{"name": "node1", "state": ["IDLE"]}],
    }
    assert [n.name for n in parse_sinfo_json(doc)] == ["node1"]
    assert slurm_warnings(doc) == ["Node node9 not found in any partition", "plain text"]
    assert slurm_errors(doc) == [] and slurm_error_numbers(doc) == []


# ------------------------------------------------------------------ sbatch & helpers


def test_sbatch_parsable() -> None:
    assert parse_sbatch_parsable("123\n") == 123
    assert parse_sbatch_parsable("456;cluster\n") == 456
    for bad in ("", "Submitted batch job 5", "abc"):
        with pytest.raises(SlurmOutputError):
            parse_sbatch_parsable(bad)


def test_sbatch_error() -> None:
    assert (
        parse_sbatch_error(
            "sbatch: error: invalid partition specified: nope\n"
            "sbatch: error: Batch job submission failed: Invalid partition name specified\n"
        )
        == "Invalid partition name specified"
    )
    assert parse_sbatch_error(
        "sbatch: error: This does not look like a batch script.  The first\n"
        "sbatch: error: line must start with #! followed by the path to an interpreter.\n"
        "sbatch: error: For instance: #!/bin/sh\n"
    ).startswith("This does not look like a batch script.  The first line must start with #!")
    assert parse_sbatch_error("") == "sbatch failed without a message"


def test_numbers_and_times() -> None:
    assert slurm_number(5) == 5 and slurm_number(None) is None
    assert slurm_number({"set": True, "infinite": False, "number": 60}) == 60
    assert slurm_number({"set": False, "infinite": False, "number": 0}) is None
    assert slurm_number({"set": True, "infinite": True, "number": 0}) is None
    assert slurm_number(True) is None and slurm_number("x") is None
    assert slurm_timestamp(0) is None and slurm_timestamp(1717236000) == ts(1717236000)
    assert decode_wait_status(768) == 3 and decode_wait_status(9) == 137 and decode_wait_status(0) == 0
    assert parse_slurm_duration("1-00:00:00") == 1440 and parse_slurm_duration("00:30:00") == 30
    assert parse_slurm_duration("UNLIMITED") is None and parse_slurm_duration("90") == 90
    assert parse_slurm_duration("2-12") == 3600 and parse_slurm_duration("1:30") == 2
    assert parse_gres("gpu:a100:4(S:0-1),gpu:t4:2,nic:1") == (6, "a100")
    assert parse_gres("gres/gpu=3") == (3, None) and parse_gres(None) == (0, None)


def test_expand_output_pattern() -> None:
    kw = {"job_id": 42, "name": "train", "user": "alice", "first_node": "n1", "work_dir": "/w"}
    assert expand_output_pattern("%x_%j_%u_%N.out", **kw) == "/w/train_42_alice_n1.out"  # type: ignore[arg-type]
    assert expand_output_pattern("/abs/%5j-%%.log", **kw) == "/abs/00042-%.log"  # type: ignore[arg-type]
    assert expand_output_pattern("%a.out", **kw) == "/w/%a.out"  # type: ignore[arg-type]


# ------------------------------------------------------------------ job arrays (FORMATS.md §5 shapes)


def _n(number: int, *, set_: bool = True) -> dict[str, object]:
    return {"set": set_, "infinite": False, "number": number}


def _squeue_array_doc(version: str) -> dict[str, object]:
    """An array 1234: task 7 running as job 1241, tasks 8-15 pending (two at a time), and a plain job."""
    if version == "v0.0.38":
        meta = {"Slurm": {"version": {"major": 22, "minor": 5, "micro": 8}}}
        element = {"array_job_id": 1234, "array_task_id": 7, "array_task_string": ""}
        rest = {"array_job_id": 1234, "array_task_id": None, "array_task_string": "8-15%2"}
        plain = {"array_job_id": 0, "array_task_id": None, "array_task_string": ""}
        running, pending = "RUNNING", "PENDING"
    else:
        meta = {"slurm": {"version": {"major": "24", "minor": "05", "micro": "4"}}}
        element = {"array_job_id": _n(1234), "array_task_id": _n(7), "array_task_string": ""}
        rest = {"array_job_id": _n(1234), "array_task_id": _n(0, set_=False), "array_task_string": "8-15%2"}
        plain = {"array_job_id": _n(0), "array_task_id": _n(0, set_=False), "array_task_string": ""}
        running, pending = ["RUNNING"], ["PENDING"]
    base = {
        "name": "sweep",
        "user_name": "alice",
        "batch_flag": True,
        "current_working_directory": "/home/alice",
    }
    return {
        "meta": meta,
        "errors": [],
        "jobs": [
            {
                **base,
                **element,
                "job_id": 1241,
                "job_state": running,
                "nodes": "node1",
                "batch_host": "node1",
            },
            {**base, **rest, "job_id": 1234, "job_state": pending, "nodes": ""},
            {**base, **plain, "job_id": 1300, "job_state": pending, "nodes": "", "name": "plain"},
        ],
    }


@pytest.mark.parametrize("version", ["v0.0.38", "v0.0.40", "v0.0.41", "v0.0.42"])
def test_squeue_keeps_array_job_and_task_ids(version: str) -> None:
    jobs = {j.job_id: j for j in parse_squeue_json(json.dumps(_squeue_array_doc(version)))}
    element, rest, plain = jobs[1241], jobs[1234], jobs[1300]
    assert (element.array_job_id, element.array_task_id, element.array_tasks, element.slurm_id) == (
        1234,
        7,
        None,
        "1234_7",
    )
    assert element.stdout_path == "/home/alice/slurm-1234_7.out"  # Slurm's default for an array element
    assert (rest.array_job_id, rest.array_task_id, rest.array_tasks, rest.slurm_id) == (
        1234,
        None,
        "8-15%2",
        "1234_[8-15%2]",
    )
    assert (plain.array_job_id, plain.array_task_id, plain.array_tasks, plain.slurm_id) == (
        None,
        None,
        None,
        "1300",
    )


@pytest.mark.parametrize("version", ["v0.0.38", "v0.0.41"])
def test_sacct_keeps_array_job_and_task_ids(version: str) -> None:
    if version == "v0.0.38":
        array = {"job_id": 1234, "limits": {"max": {"running": {"tasks": 0}}}, "task": None, "task_id": 7}
        plain = {"job_id": 0, "limits": {"max": {"running": {"tasks": 0}}}, "task": None, "task_id": None}
        state = "COMPLETED"
    else:
        array = {"job_id": 1234, "limits": {"max": {"running": {"tasks": 0}}}, "task": "", "task_id": _n(7)}
        plain = {
            "job_id": 0,
            "limits": {"max": {"running": {"tasks": 0}}},
            "task": "",
            "task_id": _n(0, set_=False),
        }
        state = ["COMPLETED"]
    records = [
        {
            "job_id": 1241,
            "name": "sweep",
            "user": "alice",
            "state": {"current": state},
            "array": array,
            "time": {},
        },
        {
            "job_id": 1300,
            "name": "plain",
            "user": "alice",
            "state": {"current": state},
            "array": plain,
            "time": {},
        },
    ]
    jobs = {j.job_id: j for j in parse_sacct_json(json.dumps({"meta": {}, "errors": [], "jobs": records}))}
    assert (jobs[1241].array_job_id, jobs[1241].array_task_id, jobs[1241].slurm_id) == (1234, 7, "1234_7")
    assert (jobs[1300].array_job_id, jobs[1300].array_task_id, jobs[1300].slurm_id) == (None, None, "1300")
