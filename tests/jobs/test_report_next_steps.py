"""The report in the API and on the job page, and its next steps: resubmit excluding the suspect
node (through the submit path, onto the simulator), resume from a template's checkpoints, drain
the suspect node and mark the suspect cable faulty (operators); the same refusals in both."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.urls import reverse

from inventory.choices import CableStatus
from inventory.models import Cable
from jobs import services
from jobs.api.serializers import JobReportSerializer, ReportCardSerializer, ReportNodeSerializer
from jobs.models import Action, Job, JobTemplate
from jobs.sync import cluster_sync
from portal.models import AuditEntry
from tests.jobs.telemetry import NCCL_LOG, feed, make_job, sims, start_ago

pytestmark = pytest.mark.django_db
SCRIPT = "#!/bin/bash\necho training\nsleep 600\n"


def _failed_on_a_down_node(sim_cluster: Any, sim: Any, user: Any, **submit: Any) -> Job:
    """A job of ``user`` submitted through the portal that Slurm killed when its node went down."""
    action = services.job_submit(
        user=user, cluster=sim_cluster, name="train", script=SCRIPT, gpus=2, **submit
    )
    services.action_execute(str(action.pk))
    sim.advance(5)
    assert cluster_sync(sim_cluster).ok
    job = Job.objects.get(submitted_by_action=action)
    assert job.state == "RUNNING"
    sim.inject("node_down", node=job.nodes)
    sim.advance(5)
    assert cluster_sync(sim_cluster).ok
    job.refresh_from_db()
    assert job.state == "NODE_FAIL"
    return job


def test_resubmit_excluding_the_node_that_went_down_runs_elsewhere(
    sim_cluster, sim, researcher_user, alice_account, client
) -> None:
    # given alice's job that failed when its node went down
    alice_account(sim_cluster)
    job = _failed_on_a_down_node(sim_cluster, sim, researcher_user)
    down = job.nodes
    client.force_login(researcher_user)

    # when she opens its report, it names the node and offers to resubmit without it
    page = client.get(reverse("jobs:job_report", args=[job.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert f"Node {job.nodes}-" in html or f"Node {down}" in html
    assert f"Resubmit excluding {down}" in html
    assert "Drain" not in html  # not hers to do

    # and follows it
    response = client.post(reverse("jobs:job_resubmit", args=[job.pk]), {"exclude": down})

    # then a submit action with --exclude was recorded, and the new job runs on another node
    action = Action.objects.exclude(pk=job.submitted_by_action_id).get(kind="submit")
    assert response.status_code == 302 and response["Location"] == reverse("jobs:action", args=[action.pk])
    assert action.params["spec"]["exclude"] == [down]
    assert action.params["script"] == SCRIPT and action.requested_by == researcher_user
    services.action_execute(str(action.pk))
    sim.advance(5)
    assert cluster_sync(sim_cluster).ok
    new = Job.objects.get(submitted_by_action=action)
    assert new.state == "RUNNING" and new.nodes != down


def test_resubmit_refusals_are_the_same_in_the_api(
    sim_cluster, sim, researcher_user, operator_user, alice_account, api_as
) -> None:
    alice_account(sim_cluster)
    job = _failed_on_a_down_node(sim_cluster, sim, researcher_user)
    before = Action.objects.count()

    # an operator may not resubmit alice's job as himself
    response = api_as(operator_user).post(f"/api/jobs/jobs/{job.pk}/resubmit/", {"exclude": job.nodes})
    assert response.status_code == 403
    # a node that is not the job's is refused with a field error
    response = api_as(researcher_user).post(f"/api/jobs/jobs/{job.pk}/resubmit/", {"exclude": "node9"})
    assert response.status_code == 400 and "exclude" in response.json()
    # resuming needs a template with checkpoints
    response = api_as(researcher_user).post(f"/api/jobs/jobs/{job.pk}/resubmit/", {"resume": True})
    assert response.status_code == 400 and "resume" in response.json()
    assert Action.objects.count() == before

    # and the API's own resubmit works like the page's
    response = api_as(researcher_user).post(f"/api/jobs/jobs/{job.pk}/resubmit/", {"exclude": job.nodes})
    assert response.status_code == 202
    assert Action.objects.get(pk=response.json()["id"]).params["spec"]["exclude"] == [job.nodes]


def test_resubmit_resumes_from_the_templates_checkpoint_directory(
    sim_cluster, sim, researcher_user, admin_user, alice_account, api_as
) -> None:
    alice_account(sim_cluster)
    template = JobTemplate.objects.create(
        name="trainer", script=SCRIPT, checkpoint_dir="/scratch/alice/ckpt", resume_variable="RESUME_FROM"
    )
    job = _failed_on_a_down_node(sim_cluster, sim, researcher_user, template=template)

    response = api_as(researcher_user).post(
        f"/api/jobs/jobs/{job.pk}/resubmit/", {"exclude": job.nodes, "resume": True}, format="json"
    )

    assert response.status_code == 202
    params = Action.objects.get(pk=response.json()["id"]).params
    assert params["spec"]["environment"] == {"RESUME_FROM": "/scratch/alice/ckpt"}
    assert params["template"] == template.pk


def test_a_template_needs_both_checkpoint_directory_and_resume_variable(admin_user, api_as) -> None:
    response = api_as(admin_user).post(
        "/api/jobs/templates/",
        {"name": "half", "script": SCRIPT, "checkpoint_dir": "/scratch/ckpt"},
        format="json",
    )
    assert response.status_code == 400
    assert not JobTemplate.objects.filter(name="half").exists()


def test_operator_drains_the_suspect_node_with_the_job_as_reason(
    sim_cluster, sim, researcher_user, operator_user, alice_account, api_as
) -> None:
    alice_account(sim_cluster)
    job = _failed_on_a_down_node(sim_cluster, sim, researcher_user)

    # a researcher may not
    response = api_as(researcher_user).post(f"/api/jobs/jobs/{job.pk}/drain-suspect/")
    assert response.status_code == 403 and not Action.objects.filter(kind="drain").exists()

    response = api_as(operator_user).post(f"/api/jobs/jobs/{job.pk}/drain-suspect/")

    assert response.status_code == 202
    drain = Action.objects.get(kind="drain")
    assert drain.node is not None and drain.node.slurm_name == job.nodes
    assert drain.params["reason"] == f"report of job {job.job_id} on {sim_cluster.name}: node_down"


def test_operator_marks_the_flapping_cable_faulty_from_the_report(
    rig, operator_user, researcher_user, api_as, client
) -> None:
    start = start_ago()

    def flap(t: int, s: Any) -> None:
        for card in s.cards[:2]:
            if t == 120:
                card.links_down.add(0)
            if t == 150:
                card.links_down.discard(0)

    feed(sims("rig01"), start, 300, at=flap)
    job = make_job(
        rig, "rig01", state="FAILED", start=start, minutes=5, exit_code=1, gpus=4, owner=researcher_user
    )
    from django.core.cache import cache

    cache.set(f"jobs:output:{job.pk}", {"text": NCCL_LOG, "error": "", "at": job.end_time + dt.timedelta(seconds=5),
                                         "final": True})  # fmt: skip

    # the page offers the operator both buttons, the researcher neither
    client.force_login(operator_user)
    html = client.get(reverse("jobs:job_report", args=[job.pk])).content.decode()
    assert "Mark cable A1-B1 faulty" in html and "Drain rig01" in html
    client.force_login(researcher_user)
    html = client.get(reverse("jobs:job_report", args=[job.pk])).content.decode()
    assert "Mark cable" not in html and "rig01/A QSFP1 ↔ rig01/B QSFP1" in html
    assert api_as(researcher_user).post(f"/api/jobs/jobs/{job.pk}/cable-faulty/").status_code == 403

    response = api_as(operator_user).post(f"/api/jobs/jobs/{job.pk}/cable-faulty/")

    assert response.status_code == 200
    cable = Cable.objects.get(label="A1-B1")
    assert cable.status == CableStatus.FAULTY and response.json()["status"] == "faulty"
    entry = AuditEntry.objects.get(object_id=str(cable.pk), action="update")
    assert entry.message == f"report of job {job.job_id} on rig-01: nccl_link"
    assert entry.user == operator_user


def test_report_api_is_in_the_schema_and_scoped_to_the_owner(rig, researcher_user, make_user, api_as) -> None:
    start = start_ago()
    feed(sims("rig01"), start, 120)
    job = make_job(
        rig, "rig01", state="FAILED", start=start, minutes=2, exit_code=1, gpus=4, owner=researcher_user
    )
    other = make_user("bob", "researcher")

    assert api_as(other).get(f"/api/jobs/jobs/{job.pk}/report/").status_code == 404
    body = api_as(researcher_user).get(f"/api/jobs/jobs/{job.pk}/report/").json()

    assert body["failed"] is True and body["unexplained"] is True
    assert set(body) == set(JobReportSerializer().fields)
    assert set(body["nodes"][0]) == set(ReportNodeSerializer().fields)
    assert set(body["nodes"][0]["cards"][0]) == set(ReportCardSerializer().fields)
    assert [c["label"] for c in body["nodes"][0]["cards"]] == ["rig01/A", "rig01/B", "rig01/C", "rig01/D"]
    assert body["nodes"][0]["cards"][0]["power_mean"] > 100
    schema = api_as(researcher_user).get("/api/schema/?format=json").json()
    assert "/api/jobs/jobs/{id}/report/" in schema["paths"]
