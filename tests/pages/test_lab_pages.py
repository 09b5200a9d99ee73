"""Through the pages on the real loopback Slurm (scripts/slurm-lab): the job runs as the researcher."""

from __future__ import annotations

import time

import pytest

from jobs.backends import cluster_backend
from jobs.models import Action, Job
from jobs.sync import cluster_sync

pytestmark = [pytest.mark.django_db, pytest.mark.slurm]


def test_submitted_job_runs_on_lab_as_researcher_and_can_be_cancelled(
    lab_cluster, researcher_user, map_account, client_as, django_capture_on_commit_callbacks
):
    map_account(researcher_user, lab_cluster, "alice")
    c = client_as(researcher_user)
    # the form offers the lab's real partitions and refuses what they do not allow
    form = c.get("/jobs/submit/").context["form"]
    assert {"gpu", "debug"} <= {v for v, _label in form.fields["partition"].choices}
    r = c.post(
        "/jobs/submit/",
        {"name": "too-long", "cluster": lab_cluster.pk, "partition": "debug", "nodes": 1, "gpus": 0,
         "time_limit": "1:00:00", "script": "#!/bin/bash\nsleep 1\n"},
    )  # fmt: skip
    assert r.status_code == 400 and "30 minutes" in " ".join(r.context["form"].errors["time_limit"])
    assert Action.objects.count() == 0
    # a valid job is submitted as alice
    with django_capture_on_commit_callbacks(execute=True):
        r = c.post(
            "/jobs/submit/",
            {"name": "rp-page-test", "cluster": lab_cluster.pk, "partition": "debug", "nodes": 1, "gpus": 1,
             "time_limit": "5", "work_dir": "/tmp", "script": "#!/bin/bash\necho started\nsleep 120\n"},
        )  # fmt: skip
    action = Action.objects.get()
    assert r.status_code == 302, r.content.decode()[:2000]
    assert action.status == "succeeded", (action.output, action.error)
    job = Job.objects.get(submitted_by_action=action)
    with cluster_backend(lab_cluster) as backend:
        info = backend.get_job(job.job_id)
    assert info is not None and info.user == "alice"
    cluster_sync(lab_cluster)
    assert f'id="job-{job.pk}"' in c.get("/jobs/").content.decode()
    # cancel it from the page
    with django_capture_on_commit_callbacks(execute=True):
        c.post(f"/jobs/{job.pk}/cancel/")
    cancel = Action.objects.get(kind="cancel")
    assert cancel.status == "succeeded", (cancel.output, cancel.error)
    for _ in range(20):
        cluster_sync(lab_cluster)
        job.refresh_from_db()
        if job.state == "CANCELLED":
            break
        time.sleep(0.5)
    assert job.state == "CANCELLED"
