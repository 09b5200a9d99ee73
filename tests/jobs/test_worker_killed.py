"""A worker killed in the middle of an action does not lose it, and the action is not done twice:
the worker's lease on the row expires, beat enqueues the action again, a new worker finishes it
and the retried submit finds the job the first try created (tag). The broker's visibility timeout
stays the deployment's hour (its redelivery would come far too late); the kill-to-completion time
is measured by benchmarks/action_recovery.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from jobs.backends import cluster_backend
from jobs.models import ClusterAccount
from tests.clusters import lab_cluster_create
from tests.jobs.killed_worker import Processes, submit_killed_and_recovered

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]


def test_submit_survives_a_killed_worker_exactly_once(slurm_lab, researcher_user, tmp_path: Path) -> None:
    from portal.celery import app

    # given the deployment's visibility timeout and lease settings
    assert settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] == 3600
    assert (settings.PORTAL_ACTION_LEASE_S, settings.PORTAL_ACTION_HEARTBEAT_S) == (30, 10)
    app.conf.task_always_eager = False
    app.control.purge()
    cluster = lab_cluster_create(slurm_lab)
    ClusterAccount.objects.create(user=researcher_user, cluster=cluster, username="alice")
    procs = Processes(tmp_path, connection.settings_dict, settings.CELERY_BROKER_URL)
    try:
        # when alice submits and the worker dies after sbatch returned but before the result was
        # recorded, and a new worker starts
        outcome = submit_killed_and_recovered(
            procs, user=researcher_user, cluster=cluster, name="contract-killed"
        )
    finally:
        procs.stop_all()
        app.conf.task_always_eager = True
        app.control.purge()
    done = outcome.action
    # then the action succeeded on its second attempt, with the lost attempt in its output
    assert (done.status, done.attempts) == ("succeeded", 2), (done.output, procs.log("second"))
    lines = done.output.splitlines()
    assert lines[0].startswith("attempt 1: the worker stopped renewing its lease at "), lines
    assert lines[1:] == [f"Submitted batch job {done.job.job_id}"]
    # and Slurm has exactly one job carrying the action's tag
    with cluster_backend(cluster) as backend:
        tagged = [j for j in backend.list_jobs(user="alice") if j.tag == str(done.pk)]
    assert [j.job_id for j in tagged] == [done.job.job_id]
    assert len(procs.marker_lines()) == 2  # both tries reached sbatch's answer
    print(f"kill to completion: {outcome.kill_to_done_s:.1f} s")
