"""The loopback Slurm lab (scripts/slurm-lab/) for the suites that drive a real Slurm over real SSH.

Pure Python (no Django): the cluster suite also runs with `-p no:django`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LAB_DIR = Path(os.environ.get("SLURM_LAB_DIR", "/tmp/rackpilot-slurm-lab"))
START = REPO / "scripts" / "slurm-lab" / "start.sh"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def skip_or_fail(reason: str) -> None:
    """Skip on a developer's machine; in CI a missing lab is a failure, never a silent skip."""
    if in_ci():
        pytest.fail(f"CI=true and the Slurm lab is unavailable: {reason}")
    pytest.skip(reason)


def read_lab_env(path: Path = LAB_DIR / "env") -> dict[str, str]:
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("export "):
            key, _, value = line[len("export ") :].partition("=")
            env[key] = (shlex.split(value) or [""])[0]
    return env


def slurm_installed() -> bool:
    return bool(shutil.which("sinfo")) and (
        bool(shutil.which("slurmctld")) or Path("/usr/sbin/slurmctld").exists()
    )


def ensure_lab() -> dict[str, str]:
    """Start the lab if needed (idempotent, about a second) and return its connection facts."""
    env_file = LAB_DIR / "env"
    if slurm_installed() and os.geteuid() == 0:
        proc = subprocess.run(
            [str(START)], capture_output=True, text=True, timeout=180,
            env={**os.environ, "SLURM_LAB_DIR": str(LAB_DIR)},
        )  # fmt: skip
        if proc.returncode != 0:
            pytest.fail(f"scripts/slurm-lab/start.sh failed:\n{proc.stdout}\n{proc.stderr}")
    elif not env_file.exists():
        skip_or_fail(
            "Slurm is not installed or the lab is not running (scripts/slurm-lab/install.sh, start.sh)"
        )
    return read_lab_env(env_file)


def wait_nodes_responding(lab: dict[str, str], seconds: float = 120) -> None:
    """Until every lab node answers slurmctld again (sinfo marks a node that does not with ``*``):
    after a slurmctld restart the nodes stay NOT_RESPONDING until they register, which
    ``scontrol reconfigure`` asks them to do now rather than at the next ping."""
    import time

    env = {**os.environ, "SLURM_CONF": lab["SLURM_CONF"]}
    subprocess.run(["scontrol", "reconfigure"], capture_output=True, timeout=30, env=env)
    deadline = time.monotonic() + seconds
    states = ""
    while time.monotonic() < deadline:
        proc = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, timeout=30, env=env
        )
        states = proc.stdout
        if (
            proc.returncode == 0
            and states.strip()
            and not any(line.rstrip().endswith("*") for line in states.splitlines())
        ):
            return
        time.sleep(1)
    raise AssertionError(f"lab nodes still not responding after {seconds:g} s:\n{states}")
