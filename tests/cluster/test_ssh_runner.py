"""SSHRunner against the lab's sshd: hostile argv and stdin arrive byte for byte."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.cluster import SSHRunner

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def ssh(slurm_lab: dict[str, str]) -> Iterator[SSHRunner]:
    runner = SSHRunner(
        slurm_lab["SLURM_LAB_SSH_HOST"],
        port=int(slurm_lab["SLURM_LAB_SSH_PORT"]),
        username=slurm_lab["SLURM_LAB_SSH_USER"],
        host_key=slurm_lab["SLURM_LAB_SSH_HOST_KEY"],
        client_key=slurm_lab["SLURM_LAB_SSH_KEY"],
    )
    yield runner
    runner.close()


text_no_nul = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arg=text_no_nul, data=text_no_nul)
def test_argv_and_stdin_are_inert(ssh: SSHRunner, arg: str, data: str) -> None:
    res = ssh.run(["printf", "%s", arg], timeout=10)
    assert res.exit_code == 0 and res.stdout == arg
    res = ssh.run(["cat"], stdin=data, timeout=10)
    assert res.exit_code == 0 and res.stdout == data


def test_hostile_examples(ssh: SSHRunner) -> None:
    for arg in ["$(id)", "`id`", "a; echo pwned", "'\"", "\n-rf", "*", "~", "$HOME", "a\\b"]:
        assert ssh.run(["printf", "%s", arg], timeout=10).stdout == arg


def test_env_from_sshd_and_sudo_keeps_slurm_conf(ssh: SSHRunner, slurm_lab: dict[str, str]) -> None:
    assert ssh.run(["printenv", "SLURM_CONF"], timeout=10).stdout.strip() == slurm_lab["SLURM_CONF"]
    # sudo rules: only the listed commands; anything else is refused without a password prompt
    res = ssh.run(["id"], timeout=10, as_user="alice")
    assert res.exit_code != 0 and "password is required" in res.stderr
    res = ssh.run(["scontrol", "shutdown"], timeout=10, sudo=True)
    assert res.exit_code != 0


def test_connection_is_reused(ssh: SSHRunner) -> None:
    ssh.run(["true"], timeout=10)
    conn = ssh._conn
    ssh.run(["true"], timeout=10)
    assert ssh._conn is conn
