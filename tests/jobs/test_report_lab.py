"""The job report of real Slurm jobs on the loopback lab: a job that exits 1 after printing an NCCL
watchdog line, and one that runs past its time limit. Submitted through jobs.services as alice,
synced, their output read over SSH as alice, then diagnosed."""

from __future__ import annotations

import time

import pytest

from inventory.models import Node
from jobs import services
from jobs.models import ClusterAccount, Job
from jobs.output import job_output_get, job_output_refresh
from jobs.report.selectors import job_report_get
from tests.clusters import lab_cluster_create, make_nodes
from tests.jobs.telemetry import NCCL_LOG

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slurm]

WATCHDOG = next(line for line in NCCL_LOG.splitlines() if "Watchdog caught" in line)


def _submit(slurm_lab, user, capture, script: str, **spec) -> Job:
    cluster = lab_cluster_create(slurm_lab)
    make_nodes(cluster, ["node1", "node2", "node3", "node4"])
    ClusterAccount.objects.create(user=user, cluster=cluster, username="alice")
    with capture(execute=True):
        action = services.job_submit(user=user, cluster=cluster, name="report-lab", script=script, **spec)
    action.refresh_from_db()
    assert action.status == "succeeded", action.output
    return Job.objects.get(pk=action.job_id)


def _wait_finished(job: Job, *, seconds: float) -> Job:
    from jobs.sync import cluster_sync

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert cluster_sync(job.cluster).ok
        job.refresh_from_db()
        if not job.is_active and job.end_time:
            return job
        time.sleep(1)
    raise AssertionError(f"job {job.job_id} still {job.state}")


def test_a_real_job_that_dies_of_an_nccl_timeout_is_diagnosed(
    slurm_lab, researcher_user, django_capture_on_commit_callbacks
) -> None:
    script = f"#!/bin/bash\necho 'epoch 1 step 40'\necho '{WATCHDOG}' >&2\nsleep 2\nexit 1\n"
    job = _submit(slurm_lab, researcher_user, django_capture_on_commit_callbacks, script, partition="debug",
                  time_limit_minutes=5, output="report-%j.out")  # fmt: skip

    job = _wait_finished(job, seconds=90)
    job_output_refresh(job.pk)  # the worker's read of the output file, over SSH as alice
    output = job_output_get(job)
    report = job_report_get(job, output=output.text)

    assert (job.state, job.exit_code) == ("FAILED", 1)
    assert WATCHDOG in output.text, output.error
    assert report.failed and [f.code for f in report.diagnosis] == ["nccl_timeout"]
    assert (
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808" in report.diagnosis[0].evidence[0]
    )
    assert Node.objects.filter(cluster=job.cluster, slurm_name=job.nodes).exists()


def test_a_real_job_past_its_time_limit_is_diagnosed(
    slurm_lab, researcher_user, django_capture_on_commit_callbacks
) -> None:
    job = _submit(slurm_lab, researcher_user, django_capture_on_commit_callbacks,
                  "#!/bin/bash\necho training\nsleep 600\n", partition="debug", time_limit_minutes=1)  # fmt: skip

    job = _wait_finished(job, seconds=180)
    report = job_report_get(job)

    assert job.state == "TIMEOUT"
    top = report.diagnosis[0]
    assert top.code == "time_limit" and top.title == "The job ran into its time limit (1 min)"
    assert report.facts.elapsed_s >= 60
