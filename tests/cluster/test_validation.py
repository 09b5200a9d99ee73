"""Validators and argv building: hostile input is refused or passed as one inert argv item."""

from __future__ import annotations

import string
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.cluster import CommandResult, JobSpec, LocalRunner, SlurmBackend, ValidationError
from jobs.cluster.runners import build_argv, parse_host_key
from jobs.cluster.validation import (
    validate_env_name,
    validate_env_value,
    validate_job_name,
    validate_job_spec,
    validate_node_name,
    validate_partition,
    validate_path,
    validate_reason,
    validate_username,
)

HOSTILE = [
    "",
    " ",
    "-rf",
    "--help",
    "a b",
    "a;b",
    "$(id)",
    "`id`",
    "a\nb",
    "a\x00b",
    "a'b",
    'a"b',
    "a|b",
    "a>b",
]


@pytest.mark.parametrize("bad", HOSTILE + ["node[1-4]", "n1,n2", "x" * 64, "state=resume"])
def test_node_name_refuses_hostile(bad: str) -> None:
    with pytest.raises(ValidationError):
        validate_node_name(bad)


@pytest.mark.parametrize("good", ["node1", "gpu-01", "tt01.rack2", "n_3", "A100x"])
def test_node_name_accepts(good: str) -> None:
    assert validate_node_name(good) == good


@given(st.text(min_size=1, max_size=80))
def test_node_name_only_hostlist_chars(name: str) -> None:
    allowed = set(string.ascii_letters + string.digits + "._-")
    try:
        validate_node_name(name)
    except ValidationError:
        return
    assert set(name) <= allowed and name[0] not in "-._" and len(name) <= 63


@given(st.text(max_size=300))
def test_reason_never_has_control_chars(reason: str) -> None:
    try:
        validate_reason(reason)
    except ValidationError:
        return
    assert reason.isprintable() and "\n" not in reason and 0 < len(reason) <= 200 and reason.strip()


@pytest.mark.parametrize(
    "reason", ["disk; rm -rf /", "$(reboot)", "`id`", "a'b\"c", "x & y | z > w", "key=value"]
)
def test_shell_metachars_in_reason_are_fine(reason: str) -> None:
    # argv items never meet a shell: metacharacters are just text
    assert validate_reason(reason) == reason


@pytest.mark.parametrize(
    "reason", ["", "   ", "two\nlines", "cr\rhere", "tab\there", "nul\x00", "x" * 201, "\x1b[31m"]
)
def test_bad_reasons(reason: str) -> None:
    with pytest.raises(ValidationError):
        validate_reason(reason)


@pytest.mark.parametrize(
    ("fn", "bad"),
    [
        (validate_username, "Alice"),
        (validate_username, "-u"),
        (validate_username, "root;id"),
        (validate_job_name, "-x"),
        (validate_job_name, "a b"),
        (validate_partition, "gpu,debug"),
        (validate_partition, "--x"),
        (validate_env_name, "1X"),
        (validate_env_name, "A-B"),
        (validate_env_value, "a,b"),
        (validate_env_value, "a\nb"),
        (validate_path, "a\nb"),
        (validate_path, "-o"),
        (validate_path, ""),
    ],
)
def test_other_validators_refuse(fn: Any, bad: str) -> None:
    with pytest.raises(ValidationError):
        fn(bad)


def test_path_absolute() -> None:
    assert validate_path("/home/alice/out-%j.log", absolute=True)
    with pytest.raises(ValidationError):
        validate_path("relative", absolute=True)


def _spec(**kw: Any) -> JobSpec:
    base: dict[str, Any] = {"name": "j", "script": "#!/bin/sh\ntrue\n", "tag": "t1"}
    base.update(kw)
    return JobSpec(**base)


@pytest.mark.parametrize(
    "kw",
    [
        {"name": "--wrap=id"},
        {"tag": "a b"},
        {"partition": "x;y"},
        {"gpus": -1},
        {"gpus": True},
        {"nodes": 0},
        {"time_limit_minutes": 0},
        {"work_dir": "relative/dir"},
        {"environment": {"BAD-NAME": "x"}},
        {"environment": {"OK": "a,b"}},
        {"script": ""},
        {"script": "#!/bin/sh\n\x00"},
    ],
)
def test_bad_job_specs(kw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        validate_job_spec(_spec(**kw))


class RecordingRunner:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def run(
        self,
        argv: Any,
        *,
        stdin: Any = None,
        timeout: float,
        as_user: Any = None,
        sudo: bool = False,
        env: Any = None,
    ) -> CommandResult:
        self.calls.append({"argv": list(argv), "stdin": stdin, "as_user": as_user, "sudo": sudo, "env": env})
        if argv[0] == "squeue":
            return CommandResult(tuple(argv), 0, '{"jobs": []}', "", 0.0)
        return CommandResult(tuple(argv), 0, "77\n", "", 0.0)

    def close(self) -> None:
        pass


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(min_size=1).filter(lambda s: "\x00" not in s))
def test_script_goes_to_sbatch_stdin_untouched(body: str) -> None:
    runner = RecordingRunner()
    backend = SlurmBackend(runner, slurm_conf="/etc/slurm/slurm.conf")
    script = "#!/bin/bash\n" + body
    assert backend.submit_job(_spec(script=script, environment={"A": "1 2"}), as_user="alice") == 77
    call = runner.calls[-1]
    assert call["stdin"] == script and call["as_user"] == "alice" and not call["sudo"]
    assert call["argv"][:2] == ["sbatch", "--parsable"]
    assert all(a.startswith("--") for a in call["argv"][1:])  # every item is one option
    assert "--comment=rackpilot:t1" in call["argv"] and "--export=ALL,A=1 2" in call["argv"]
    assert call["env"] == {"SLURM_CONF": "/etc/slurm/slurm.conf"}


@given(st.text(min_size=1, max_size=200))
def test_drain_reason_is_one_argv_item(reason: str) -> None:
    runner = RecordingRunner()
    backend = SlurmBackend(runner)
    try:
        backend.drain_node("node1", reason)
    except ValidationError:
        assert not runner.calls
        return
    [call] = runner.calls
    assert call["argv"] == ["scontrol", "update", "nodename=node1", "state=drain", f"reason={reason}"]
    assert call["sudo"] is True


def test_build_argv() -> None:
    assert build_argv(["sinfo"], as_user=None, sudo=False) == ["sinfo"]
    assert build_argv(["scontrol", "x"], as_user=None, sudo=True) == ["sudo", "-n", "--", "scontrol", "x"]
    assert build_argv(["sbatch"], as_user="bob", sudo=False) == ["sudo", "-n", "-u", "bob", "--", "sbatch"]
    with pytest.raises(ValidationError):
        build_argv(["sbatch"], as_user="-uroot", sudo=False)


@settings(max_examples=40)
@given(st.text().filter(lambda s: "\x00" not in s))
def test_local_runner_stdin_roundtrip(data: str) -> None:
    res = LocalRunner().run(["cat"], stdin=data, timeout=10)
    assert res.exit_code == 0 and res.stdout == data.encode("utf-8", "surrogatepass").decode(
        "utf-8", "replace"
    )


def test_local_runner_timeout_is_retryable() -> None:
    from jobs.cluster import RetryableError

    with pytest.raises(RetryableError):
        LocalRunner().run(["sleep", "5"], timeout=0.2)


def test_parse_host_key() -> None:
    assert parse_host_key("ssh-ed25519 AAAAC3 comment") == "ssh-ed25519 AAAAC3"
    assert parse_host_key("[127.0.0.1]:2222 ssh-ed25519 AAAAC3") == "ssh-ed25519 AAAAC3"
    from jobs.cluster import HostKeyError

    with pytest.raises(HostKeyError):
        parse_host_key("garbage")
