"""A worker killed in the middle of an action does not lose it (acks_late + reject_on_worker_lost,
Redis visibility timeout), and the retried submit finds the job the first try created (tag)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from jobs import services
from jobs.backends import cluster_backend
from jobs.models import Action, ClusterAccount
from tests.clusters import lab_cluster_create

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]


def _worker(tmp_path: Path, name: str, slow: float) -> subprocess.Popen:
    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "CELERY_VISIBILITY_TIMEOUT": "4",
        "PORTAL_SIMULATOR_REALTIME": "false",
        "SLOW_ACTION_SECONDS": str(slow),
        "SLOW_ACTION_MARKER": str(tmp_path / "marker"),
        "PYTHONPATH": str(REPO),
    }
    log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("slow_worker.py")), "-n", f"{name}@%h"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _wait(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_submit_survives_a_killed_worker(slurm_lab, researcher_user, tmp_path) -> None:
    from portal.celery import app

    app.conf.task_always_eager = False
    app.control.purge()
    cluster = lab_cluster_create(slurm_lab)
    ClusterAccount.objects.create(user=researcher_user, cluster=cluster, username="alice")
    first = _worker(tmp_path, "first", slow=30)
    second = None
    try:
        # when alice submits and the worker dies after sbatch returned but before the result was recorded
        action = services.job_submit(
            user=researcher_user,
            cluster=cluster,
            name="contract-killed",
            script="#!/bin/bash\nsleep 1\n",
            partition="debug",
        )
        _wait(lambda: (tmp_path / "marker").exists(), 60, "the first worker to submit")
        assert Action.objects.get(pk=action.pk).status == "running"
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)
        # then a new worker gets the message again and finishes the action
        second = _worker(tmp_path, "second", slow=0)
        done = _wait(
            lambda: Action.objects.filter(pk=action.pk, status__in=["succeeded", "failed"]).first(),
            90,
            "the action to be redelivered and finished",
        )
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(20)
        app.conf.task_always_eager = True
    assert (done.status, done.attempts) == ("succeeded", 2), (
        done.output,
        (tmp_path / "second.log").read_text(),
    )
    # and Slurm has exactly one job carrying the action's tag
    with cluster_backend(cluster) as backend:
        tagged = [j for j in backend.list_jobs(user="alice") if j.tag == str(action.pk)]
    assert [j.job_id for j in tagged] == [done.job.job_id]
    assert len((tmp_path / "marker").read_text().splitlines()) == 2  # both tries reached sbatch's answer
