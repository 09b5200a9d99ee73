"""The killed-worker scenario, shared by tests/jobs/test_worker_killed.py and
benchmarks/action_recovery.py: real Celery worker and beat processes (tests/jobs/slow_worker.py)
on the real broker, the database of the caller, the loopback Slurm lab."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SLOW_WORKER = Path(__file__).with_name("slow_worker.py")


def wait_for(predicate: Callable[[], Any], seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@dataclass
class Processes:
    """Celery processes started for one scenario (each in its own session, killed as a group)."""

    workdir: Path
    db: dict[str, Any]
    broker_url: str
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def _env(self, slow: float) -> dict[str, str]:
        db = self.db
        env = {k: v for k, v in os.environ.items() if k != "CELERY_VISIBILITY_TIMEOUT"}
        return {
            **env,
            "DJANGO_SETTINGS_MODULE": "portal.settings.test",
            "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
            "CELERY_BROKER_URL": self.broker_url,
            "PORTAL_SIMULATOR_REALTIME": "false",
            "SLOW_ACTION_SECONDS": str(slow),
            "SLOW_ACTION_MARKER": str(self.workdir / "marker"),
            "PYTHONPATH": str(REPO),
        }

    def _start(self, name: str, args: list[str], slow: float) -> subprocess.Popen[bytes]:
        log = open(self.workdir / f"{name}.log", "w")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, str(SLOW_WORKER), *args], cwd=REPO, env=self._env(slow),
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        self.procs.append(proc)
        return proc

    def worker(self, name: str, *, slow: float) -> subprocess.Popen[bytes]:
        return self._start(name, ["-n", f"{name}@%h"], slow)

    def beat(self) -> subprocess.Popen[bytes]:
        return self._start("beat", ["beat", str(self.workdir / "beat-schedule")], 0)

    @staticmethod
    def kill(proc: subprocess.Popen[bytes]) -> None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    self.kill(proc)

    def marker_lines(self) -> list[str]:
        path = self.workdir / "marker"
        return path.read_text().splitlines() if path.exists() else []

    def log(self, name: str) -> str:
        return (self.workdir / f"{name}.log").read_text()


@dataclass
class Outcome:
    action: Any
    kill_to_done_s: float


def submit_killed_and_recovered(procs: Processes, *, user: Any, cluster: Any, name: str) -> Outcome:
    """Submit as ``user``; kill the worker after sbatch answered and before the outcome was
    recorded; start a new worker at once; wait for the action to end. Beat runs throughout."""
    from jobs import services
    from jobs.models import Action

    procs.beat()
    first = procs.worker("first", slow=120)
    action = services.job_submit(
        user=user, cluster=cluster, name=name, script="#!/bin/bash\nsleep 1\n", partition="debug"
    )
    wait_for(lambda: len(procs.marker_lines()) >= 1, 90, "the first worker to submit")
    assert Action.objects.get(pk=action.pk).status == "running"
    procs.kill(first)
    killed = time.monotonic()
    procs.worker("second", slow=0)
    done = wait_for(
        lambda: Action.objects.filter(pk=action.pk, status__in=["succeeded", "failed"]).first(),
        180,
        "the action to be recovered and finished",
    )
    return Outcome(action=done, kill_to_done_s=time.monotonic() - killed)
