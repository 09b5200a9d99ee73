"""The jobs API: actions (request, list, scoping), synced jobs with filters, node actions on the node."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.models import Action, ClusterAccount, Job

SCRIPT = "#!/bin/bash\necho hi\n"
pytestmark = pytest.mark.django_db


def test_operator_drains_a_node_from_the_node_endpoint(
    sim_cluster, sim, operator_user, api_as, django_capture_on_commit_callbacks
) -> None:
    node = sim_cluster.nodes.get(slurm_name="node2")
    with django_capture_on_commit_callbacks(execute=True):
        r = api_as(operator_user).post(
            f"/api/inventory/nodes/{node.pk}/drain/", {"reason": "bad DIMM"}, format="json"
        )
    assert r.status_code == 202, r.content
    assert (r.data["kind"], r.data["status"], r.data["node"]["id"]) == ("drain", "pending", node.pk)
    r = api_as(operator_user).get(f"/api/jobs/actions/{r.data['id']}/")
    assert (r.data["status"], r.data["output"]) == ("succeeded", "Drained node2: bad DIMM")
    assert next(n for n in sim.list_nodes() if n.name == "node2").display_state == "drained"


def test_node_actions_need_operate_nodes(sim_cluster, researcher_user, api_as) -> None:
    node = sim_cluster.nodes.get(slurm_name="node2")
    for path in ("drain", "resume", "reboot", "power-cycle"):
        r = api_as(researcher_user).post(
            f"/api/inventory/nodes/{node.pk}/{path}/", {"reason": "x"}, format="json"
        )
        assert r.status_code == 403
    r = api_as(researcher_user).post(
        "/api/jobs/actions/", {"kind": "drain", "node": node.pk, "params": {"reason": "x"}}, format="json"
    )
    assert r.status_code == 403
    assert Action.objects.count() == 0


def test_bad_reason_is_a_400_with_the_field(sim_cluster, operator_user, api_as) -> None:
    node = sim_cluster.nodes.get(slurm_name="node2")
    r = api_as(operator_user).post(
        f"/api/inventory/nodes/{node.pk}/drain/", {"reason": "a\nb"}, format="json"
    )
    assert r.status_code == 400 and list(r.data) == ["reason"]
    r = api_as(operator_user).post(
        f"/api/inventory/nodes/{node.pk}/reboot/", {"next_state": "explode"}, format="json"
    )
    assert r.status_code == 400 and list(r.data) == ["next_state"]
    assert Action.objects.count() == 0


def test_second_action_on_a_busy_node_is_a_400(sim_cluster, operator_user, api_as) -> None:
    node = sim_cluster.nodes.get(slurm_name="node2")
    assert api_as(operator_user).post(f"/api/inventory/nodes/{node.pk}/resume/").status_code == 202
    r = api_as(operator_user).post(f"/api/inventory/nodes/{node.pk}/reboot/", {"asap": True}, format="json")
    assert (r.status_code, r.data) == (400, {"node": ["This node already has an action in progress."]})


def test_researcher_submits_through_the_actions_endpoint(
    sim_cluster, sim, researcher_user, api_as, django_capture_on_commit_callbacks
) -> None:
    ClusterAccount.objects.create(user=researcher_user, cluster=sim_cluster, username="alice")
    body = {
        "kind": "submit",
        "cluster": sim_cluster.pk,
        "params": {"name": "train", "script": SCRIPT, "gpus": 1, "partition": "gpu"},
    }
    with django_capture_on_commit_callbacks(execute=True):
        r = api_as(researcher_user).post("/api/jobs/actions/", body, format="json")
    assert r.status_code == 202, r.content
    action = Action.objects.get(pk=r.data["id"])
    assert (action.status, action.job.owner, action.job.user) == ("succeeded", researcher_user, "alice")
    assert [j.tag for j in sim.list_jobs()] == [str(action.pk)]


def test_submit_errors_are_400s(sim_cluster, researcher_user, api_as) -> None:
    body = {"kind": "submit", "cluster": sim_cluster.pk, "params": {"name": "x", "script": SCRIPT}}
    r = api_as(researcher_user).post("/api/jobs/actions/", body, format="json")
    assert r.status_code == 400 and list(r.data) == ["cluster"]  # no cluster account
    r = api_as(researcher_user).post("/api/jobs/actions/", {"kind": "submit"}, format="json")
    assert r.status_code == 400 and list(r.data) == ["cluster"]
    assert Action.objects.count() == 0


def _jobs(cluster, alice, bob):
    Job.objects.create(
        cluster=cluster,
        job_id=1,
        name="a1",
        user="alice",
        owner=alice,
        state="RUNNING",
        partition="gpu",
        nodes="node[1-2]",
        node_names=",node1,node2,",
    )
    Job.objects.create(
        cluster=cluster,
        job_id=2,
        name="a2",
        user="alice",
        owner=alice,
        state="COMPLETED",
        partition="debug",
        nodes="node3",
        node_names=",node3,",
    )
    Job.objects.create(
        cluster=cluster, job_id=3, name="b1", user="bob", owner=bob, state="PENDING", partition="gpu"
    )


def test_researchers_see_only_their_own_jobs(
    sim_cluster, researcher_user, make_user, operator_user, api_as, settings
) -> None:
    bob = make_user("bob", "researcher")
    _jobs(sim_cluster, researcher_user, bob)
    r = api_as(researcher_user).get("/api/jobs/jobs/")
    assert sorted(j["job_id"] for j in r.data["results"]) == [1, 2]
    assert api_as(researcher_user).get(f"/api/jobs/jobs/{Job.objects.get(job_id=3).pk}/").status_code == 404
    assert api_as(operator_user).get("/api/jobs/jobs/").data["count"] == 3
    settings.PORTAL_RESEARCHERS_SEE_ALL_JOBS = True
    assert api_as(researcher_user).get("/api/jobs/jobs/").data["count"] == 3


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("user=alice", [1, 2]),
        ("state=RUNNING&state=PENDING", [1, 3]),
        ("partition=gpu", [1, 3]),
        ("node=node2", [1]),
        ("node=node", []),
        ("active=true", [1, 3]),
        ("q=b1", [3]),
    ],
)
def test_job_filters(sim_cluster, researcher_user, make_user, operator_user, api_as, query, expected) -> None:
    _jobs(sim_cluster, researcher_user, make_user("bob", "researcher"))
    r = api_as(operator_user).get(f"/api/jobs/jobs/?{query}")
    assert sorted(j["job_id"] for j in r.data["results"]) == expected


def test_job_filter_by_inventory_node(sim_cluster, researcher_user, make_user, operator_user, api_as) -> None:
    _jobs(sim_cluster, researcher_user, make_user("bob", "researcher"))
    node = sim_cluster.nodes.get(slurm_name="node3")
    r = api_as(operator_user).get(f"/api/jobs/jobs/?node_id={node.pk}")
    assert [j["job_id"] for j in r.data["results"]] == [2]


def test_researcher_cancels_own_job_but_not_others(sim_cluster, researcher_user, make_user, api_as) -> None:
    bob = make_user("bob", "researcher")
    _jobs(sim_cluster, researcher_user, bob)
    mine, theirs = Job.objects.get(job_id=1), Job.objects.get(job_id=3)
    r = api_as(researcher_user).post(f"/api/jobs/jobs/{mine.pk}/cancel/")
    assert (r.status_code, r.data["kind"], r.data["params"]) == (
        202,
        "cancel",
        {"target": "1", "as_user": "alice"},
    )
    # bob's job does not exist for alice, through either endpoint
    assert api_as(researcher_user).post(f"/api/jobs/jobs/{theirs.pk}/cancel/").status_code == 404
    r = api_as(researcher_user).post(
        "/api/jobs/actions/", {"kind": "cancel", "job": theirs.pk}, format="json"
    )
    assert r.status_code == 400 and list(r.data) == ["job"]
    assert Action.objects.count() == 1


def test_a_repeated_cancel_answers_200_with_the_action_in_progress(
    sim_cluster, researcher_user, make_user, api_as
) -> None:
    _jobs(sim_cluster, researcher_user, make_user("bob", "researcher"))
    mine = Job.objects.get(job_id=1)
    first = api_as(researcher_user).post(f"/api/jobs/jobs/{mine.pk}/cancel/")
    # when alice cancels again through either endpoint
    again = api_as(researcher_user).post(f"/api/jobs/jobs/{mine.pk}/cancel/")
    by_create = api_as(researcher_user).post(
        "/api/jobs/actions/", {"kind": "cancel", "job": mine.pk}, format="json"
    )
    # then the answer is the first action (200: nothing new was recorded)
    assert (first.status_code, again.status_code, by_create.status_code) == (202, 200, 200)
    assert again.data["id"] == by_create.data["id"] == first.data["id"]
    assert Action.objects.filter(kind="cancel").count() == 1


def test_actions_are_scoped_to_the_requester(
    sim_cluster, researcher_user, make_user, operator_user, api_as
) -> None:
    bob = make_user("bob", "researcher")
    _jobs(sim_cluster, researcher_user, bob)
    api_as(researcher_user).post(f"/api/jobs/jobs/{Job.objects.get(job_id=1).pk}/cancel/")
    api_as(bob).post(f"/api/jobs/jobs/{Job.objects.get(job_id=3).pk}/cancel/")
    assert api_as(researcher_user).get("/api/jobs/actions/").data["count"] == 1
    assert api_as(operator_user).get("/api/jobs/actions/").data["count"] == 2


def test_job_transitions_endpoint(sim_cluster, operator_user, api_as) -> None:
    job = Job.objects.create(cluster=sim_cluster, job_id=1, state="RUNNING")
    job.transitions.create(from_state="PENDING", to_state="RUNNING", at="2026-01-01T00:00:00Z")
    r = api_as(operator_user).get(f"/api/jobs/jobs/{job.pk}/transitions/")
    assert [(t["from_state"], t["to_state"]) for t in r.data] == [("PENDING", "RUNNING")]


def test_list_query_counts_do_not_grow(sim_cluster, operator_user, api_as) -> None:
    client = api_as(operator_user)

    def count(n: int) -> tuple[int, int]:
        Job.objects.all().delete()
        Action.objects.all().delete()
        for i in range(n):
            Job.objects.create(cluster=sim_cluster, job_id=i + 1, state="RUNNING", owner=operator_user)
            Action.objects.create(
                kind="cancel",
                cluster=sim_cluster,
                requested_by=operator_user,
                params={"target": str(i)},
                job=Job.objects.get(job_id=i + 1),
            )
        out = []
        for path in ("/api/jobs/jobs/", "/api/jobs/actions/"):
            with CaptureQueriesContext(connection) as ctx:
                assert client.get(path).status_code == 200
            out.append(len(ctx.captured_queries))
        return out[0], out[1]

    count(1)  # warm the permission cache
    assert count(2) == count(50)


def test_api_root_lists_jobs(api) -> None:
    r = api.get("/api/")
    assert r.data["jobs"].endswith("/api/jobs/")
    r = api.get("/api/jobs/")
    assert sorted(r.data) == [
        "actions", "burnin-runs", "cluster-accounts", "jobs", "node-states", "partitions", "runbook-runs",
        "runbooks", "templates",
    ]  # fmt: skip
