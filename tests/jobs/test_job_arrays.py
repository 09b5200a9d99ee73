"""Job arrays: an element keeps its array job id and task id (Slurm writes it 1234_7) from the
listing to the database, the API and the pages; on the real Slurm lab and in the newer JSON shapes."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from django.test import Client

from inventory.models import Cluster
from jobs.backends import cluster_backend
from jobs.cluster import JobSpec
from jobs.cluster.slurm_parsers import parse_squeue_json
from jobs.models import ClusterAccount, Job
from jobs.sync import cluster_sync, reconcile
from tests.cluster.test_parsers import _squeue_array_doc
from tests.clusters import lab_cluster_create

pytestmark = pytest.mark.django_db


def test_a_v0041_array_listing_is_stored_as_slurm_writes_it(researcher_user: Any, api_as: Any) -> None:
    # given a v0.0.41 listing with task 7 of array 1234 running, tasks 8-15 pending and a plain job
    cluster = Cluster.objects.create(name="newer")
    ClusterAccount.objects.create(user=researcher_user, cluster=cluster, username="alice")
    reconcile(cluster, nodes=[], jobs=parse_squeue_json(json.dumps(_squeue_array_doc("v0.0.41"))))
    rows = {j.job_id: j for j in Job.objects.filter(cluster=cluster)}
    assert {k: (r.array_job_id, r.array_task_id, r.array_tasks, r.slurm_id) for k, r in rows.items()} == {
        1241: (1234, 7, "", "1234_7"),
        1234: (1234, None, "8-15%2", "1234_[8-15%2]"),
        1300: (None, None, "", "1300"),
    }
    # then the API gives both the ids and Slurm's form
    r = api_as(researcher_user).get("/api/jobs/jobs/?ordering=job_id")
    assert [
        (j["job_id"], j["slurm_id"], j["array_job_id"], j["array_task_id"]) for j in r.data["results"]
    ] == [
        (1234, "1234_[8-15%2]", 1234, None),
        (1241, "1234_7", 1234, 7),
        (1300, "1300", None, None),
    ]
    # and searching for 1234_7 or the array's id finds its elements
    r = api_as(researcher_user).get("/api/jobs/jobs/?q=1234_7")
    assert [j["slurm_id"] for j in r.data["results"]] == ["1234_7"]
    r = api_as(researcher_user).get("/api/jobs/jobs/?q=1234&ordering=job_id")
    assert [j["slurm_id"] for j in r.data["results"]] == ["1234_[8-15%2]", "1234_7"]


@pytest.mark.slurm
def test_a_lab_array_is_synced_and_shown_with_its_task_ids(
    slurm_lab: dict[str, str], researcher_user: Any
) -> None:
    # given alice's array of 3 tasks, one at a time, on the real Slurm (22.05, v0.0.38)
    cluster = lab_cluster_create(slurm_lab)
    ClusterAccount.objects.create(user=researcher_user, cluster=cluster, username="alice")
    spec = JobSpec(
        name="sweep", script="#!/bin/bash\nsleep 20\n", partition="debug", tag=f"array-{time.time_ns()}"
    )
    with cluster_backend(cluster) as backend:
        argv = [*backend.sbatch_argv(spec, as_user="alice"), "--array=0-2%1"]  # type: ignore[attr-defined]
        res = backend._exec(argv, stdin=spec.script, as_user="alice")  # type: ignore[attr-defined]
        assert res.exit_code == 0, res.stderr
        array_id = int(res.stdout.strip().split(";")[0])
        try:
            # when the portal syncs until task 0 has started
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                assert cluster_sync(cluster).ok
                ids = set(
                    Job.objects.filter(cluster=cluster, array_job_id=array_id).values_list(
                        "array_task_id", flat=True
                    )
                )
                if 0 in ids:
                    break
                time.sleep(0.5)
            rows = {j.slurm_id: j for j in Job.objects.filter(cluster=cluster, array_job_id=array_id)}
            # then task 0 is its own job (its own id) and the pending tasks one record, as squeue writes them
            assert sorted(rows) == [f"{array_id}_0", f"{array_id}_[1-2%1]"], sorted(rows)
            element = rows[f"{array_id}_0"]
            assert (element.array_task_id, element.name, element.user) == (0, "sweep", "alice")
            assert rows[f"{array_id}_[1-2%1]"].job_id == array_id
            # and alice's pages show them so
            client = Client()
            client.force_login(researcher_user)
            listing = client.get("/jobs/").content.decode()
            assert f">{array_id}_0</a>" in listing and f">{array_id}_[1-2%1]</a>" in listing
            page = client.get(f"/jobs/{element.pk}/").content.decode()
            assert f"Job {array_id}_0 · sweep" in page
            assert f"task 0 of array {array_id} (job id {element.job_id})" in page
        finally:
            backend.cancel_job(array_id, as_user="alice")
