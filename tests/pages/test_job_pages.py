"""Submit, My jobs, the job page, cancel and node operations through the pages (simulator cluster)."""

from __future__ import annotations

import pytest

from jobs.models import Action, Job
from jobs.seed import TORCHRUN, jobs_seed_templates
from jobs.sync import cluster_sync
from portal.models import AuditEntry

pytestmark = pytest.mark.django_db

SCRIPT = "#!/bin/bash\necho hello\nsleep 30\n"


def _form(cluster, **extra):
    data = {"name": "hello", "cluster": cluster.pk, "nodes": 1, "gpus": 1, "script": SCRIPT}
    data.update(extra)
    return data


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        ({"partition": "nope"}, "partition", "Select a valid choice."),
        (
            {"partition": "debug", "time_limit": "2:00:00"},
            "time_limit",
            "The time limit of debug is 30 minutes.",
        ),
        ({"gpus": 5}, "gpus", "No node of this cluster has more than 4 such GPUs."),
        ({"time_limit": "soon"}, "time_limit", "Use minutes, HH:MM:SS or D-HH:MM:SS"),
        ({"environment": "NOEQUALS"}, "environment", "Line 1: use NAME=value."),
    ],
)
def test_submit_form_refuses_what_the_cluster_cannot_run(
    sim_cluster, researcher_user, map_account, client_as, extra, field, message
):
    map_account(researcher_user, sim_cluster)
    r = client_as(researcher_user).post("/jobs/submit/", _form(sim_cluster, **extra))
    assert r.status_code == 400
    assert message in " ".join(r.context["form"].errors[field])
    assert Action.objects.count() == 0 and AuditEntry.objects.filter(action="submit").count() == 0


def test_inline_validation_checks_without_submitting(sim_cluster, researcher_user, map_account, client_as):
    map_account(researcher_user, sim_cluster)
    c = client_as(researcher_user)
    r = c.post("/jobs/submit/", {**_form(sim_cluster, gpus=9), "_validate": "1"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    assert b'id="submit-form"' in r.content and b"<html" not in r.content
    assert "more than 4" in r.content.decode()
    r = c.post("/jobs/submit/", {**_form(sim_cluster), "_validate": "1"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and b'class="errors"' not in r.content
    assert Action.objects.count() == 0 and AuditEntry.objects.count() == 0


def test_submit_runs_as_own_account_and_shows_in_my_jobs(
    sim_cluster, researcher_user, map_account, client_as, django_capture_on_commit_callbacks
):
    map_account(researcher_user, sim_cluster)
    c = client_as(researcher_user)
    with django_capture_on_commit_callbacks(execute=True):
        r = c.post("/jobs/submit/", _form(sim_cluster, time_limit="10", environment="A=1\nB=two"))
    action = Action.objects.get()
    assert r.status_code == 302 and r["Location"] == f"/jobs/actions/{action.pk}/"
    assert action.status == "succeeded"
    job = Job.objects.get()
    assert (job.user, job.owner_id, job.name, job.time_limit) == ("alice", researcher_user.pk, "hello", 10)
    assert AuditEntry.objects.filter(action="submit", username="alice").count() == 1
    page = c.get(r["Location"]).content.decode()
    assert f"/jobs/{job.pk}/" in page  # the action card links to the job
    body = c.get("/jobs/").content.decode()
    assert f'id="job-{job.pk}"' in body and ">hello<" in body


def test_template_prefills_and_locked_fields_cannot_be_changed(
    sim_cluster, researcher_user, map_account, client_as, django_capture_on_commit_callbacks
):
    map_account(researcher_user, sim_cluster)
    templates = {t.name: t for t in jobs_seed_templates()}
    torchrun = templates[TORCHRUN]
    c = client_as(researcher_user)
    r = c.get(f"/jobs/submit/?template={torchrun.pk}")
    form = r.context["form"]
    assert form.fields["ntasks_per_node"].disabled is True
    assert form.initial["nodes"] == 2 and "torchrun" in form.initial["script"]
    data = _form(
        sim_cluster, template=torchrun.pk, nodes=2, gpus=4, ntasks_per_node=8, time_limit="1-00:00:00"
    )
    data["script"] = torchrun.script
    with django_capture_on_commit_callbacks(execute=True):
        r = c.post("/jobs/submit/", data)
    assert r.status_code == 302
    spec = Action.objects.get().params["spec"]
    assert spec["ntasks_per_node"] == 1  # the locked value, not the posted 8
    assert (spec["nodes"], spec["gpus"], spec["time_limit_minutes"]) == (2, 4, 1440)


def test_job_page_explains_the_pending_reason(sim_cluster, researcher_user, client_as):
    job = Job.objects.create(
        cluster=sim_cluster, job_id=812, name="big", user="alice", owner=researcher_user,
        state="PENDING", state_reason="(ReqNodeNotAvail, UnavailableNodes:node[1-2])",
    )  # fmt: skip
    body = client_as(researcher_user).get(f"/jobs/{job.pk}/").content.decode()
    assert "A node the job needs is not available" in body
    assert "<code>node[1-2]</code>" in body
    assert "scontrol show job 812" in body


def test_cancel_own_job_and_not_another_researchers(
    sim_cluster, sim, researcher_user, make_user, map_account, client_as, django_capture_on_commit_callbacks
):
    bob = make_user("bob", "researcher")
    map_account(researcher_user, sim_cluster)
    c = client_as(researcher_user)
    with django_capture_on_commit_callbacks(execute=True):
        c.post("/jobs/submit/", _form(sim_cluster))
    job = Job.objects.get()
    # bob may not even see it
    assert client_as(bob).post(f"/jobs/{job.pk}/cancel/").status_code == 404
    assert Action.objects.filter(kind="cancel").count() == 0
    # alice cancels it
    with django_capture_on_commit_callbacks(execute=True):
        r = c.post(f"/jobs/{job.pk}/cancel/", HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and b'id="action-' in r.content
    cancel = Action.objects.get(kind="cancel")
    assert cancel.status == "succeeded"
    cluster_sync(sim_cluster)
    job.refresh_from_db()
    assert job.state == "CANCELLED"
    assert AuditEntry.objects.filter(action="cancel", username="alice").count() == 1


def test_a_repeated_cancel_shows_the_cancel_in_progress(
    sim_cluster, sim, researcher_user, map_account, client_as, django_capture_on_commit_callbacks
):
    # given alice's job and her cancel of it, not yet run (no worker has taken it)
    map_account(researcher_user, sim_cluster)
    c = client_as(researcher_user)
    with django_capture_on_commit_callbacks(execute=True):
        c.post("/jobs/submit/", _form(sim_cluster))
    job = Job.objects.get()
    r = c.post(f"/jobs/{job.pk}/cancel/", HTTP_HX_REQUEST="true")
    first = Action.objects.get(kind="cancel")
    # when she clicks cancel again (htmx), then the card of that same action comes back
    r = c.post(f"/jobs/{job.pk}/cancel/", HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and f'id="action-{first.pk}"'.encode() in r.content
    # and without htmx the job page says so
    r = c.post(f"/jobs/{job.pk}/cancel/", follow=True)
    assert f"Job {job.job_id} is already being cancelled.".encode() in r.content
    assert list(Action.objects.filter(kind="cancel").values_list("pk", flat=True)) == [first.pk]


def test_drain_needs_a_reason_then_drains_and_resumes_selected_nodes(
    sim_cluster, sim, operator_user, client_as, django_capture_on_commit_callbacks
):
    nodes = list(sim_cluster.nodes.order_by("hostname")[:2])
    c = client_as(operator_user)
    r = c.post("/jobs/nodes/", {"operation": "drain", "nodes": [n.pk for n in nodes], "reason": ""})
    assert r.status_code == 400 and "A reason is required" in r.content.decode()
    assert Action.objects.count() == 0
    with django_capture_on_commit_callbacks(execute=True):
        r = c.post(
            "/jobs/nodes/", {"operation": "drain", "nodes": [n.pk for n in nodes], "reason": "fan"},
            HTTP_HX_REQUEST="true",
        )  # fmt: skip
    assert r.status_code == 200
    actions = list(Action.objects.filter(kind="drain"))
    assert sorted(a.status for a in actions) == ["succeeded", "succeeded"]
    assert all(f'id="action-{a.pk}"' in r.content.decode() for a in actions)
    states = {n.name: n for n in sim.list_nodes()}
    assert states["node1"].drained and states["node1"].reason == "fan" and states["node2"].drained
    with django_capture_on_commit_callbacks(execute=True):
        c.post("/jobs/nodes/", {"operation": "resume", "nodes": [nodes[0].pk]})
    assert not {n.name: n for n in sim.list_nodes()}["node1"].drained
    with django_capture_on_commit_callbacks(execute=True):
        c.post("/jobs/nodes/", {"operation": "reboot", "nodes": [nodes[1].pk], "next_state": "resume"})
    reboot = Action.objects.get(kind="reboot")
    assert reboot.status == "succeeded" and "Reboot of node2 requested" in reboot.output
    assert AuditEntry.objects.filter(action="action", username="otto").count() == 4
    # the node row partial is one fragment with a stable id
    r = c.get(f"/jobs/nodes/{nodes[0].pk}/row/")
    assert r.content.decode().strip().startswith(f'<tr id="node-{nodes[0].pk}">')


def test_researcher_cannot_operate_nodes(sim_cluster, sim, researcher_user, client_as):
    node = sim_cluster.nodes.first()
    r = client_as(researcher_user).post(
        "/jobs/nodes/", {"operation": "drain", "nodes": [node.pk], "reason": "x"}
    )
    assert r.status_code == 403
    assert Action.objects.count() == 0
    assert not any(n.drained for n in sim.list_nodes())
