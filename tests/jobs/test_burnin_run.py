"""A burn-in run end to end on the simulator AND the real Slurm lab over SSH: the submit action runs as the
operator's own cluster account, the job is pinned to the node and holds its cards (all its GPUs), the run
follows the job and ends with a verdict per card. Also the refusals, which write nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from inventory.choices import CardStatus
from inventory.models import Card
from jobs.burnin.services import burnin_advance, burnin_start
from jobs.models import Action, BurnInResult, BurnInRun, BurnInStatus, ClusterAccount, Job, NodeState

from .conftest import Env

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def otto(env: Env, operator_user: Any) -> Any:
    # the lab's Unix accounts are alice and bob: the operator submits as bob
    ClusterAccount.objects.create(user=operator_user, cluster=env.cluster, username="bob")
    return operator_user


def test_burn_in_job_holds_the_cards_and_ends_with_verdicts(
    env: Env, otto: Any, django_capture_on_commit_callbacks: Any
) -> None:
    node = env.nodes["node1"]
    cards = list(node.cards.order_by("slot"))
    with django_capture_on_commit_callbacks(execute=True):
        run = burnin_start(
            user=otto, node=node, card_ids=[cards[0].pk], duration_minutes=1, program="sleep 8"
        )
    run.refresh_from_db()
    action = Action.objects.get(pk=run.action_id)
    assert action.status == "succeeded", action.output
    assert action.params["cluster_user"] == "bob" and action.requested_by == otto
    assert action.params["spec"]["nodelist"] == ["node1"] and action.params["spec"]["gpus"] == len(cards)
    assert "export BURNIN_CARDS=" in action.params["script"] and "sleep 8" in action.params["script"]
    assert Card.objects.get(pk=cards[0].pk).status == CardStatus.BURN_IN
    assert Card.objects.get(pk=cards[1].pk).status == CardStatus.IN_SERVICE  # held, not burnt in

    def holding() -> Job | None:
        job = Job.objects.filter(pk=action.job_id, state="RUNNING").first()
        state = NodeState.objects.filter(node=node).first()
        return job if job is not None and state is not None and state.gpus_alloc == len(cards) else None

    job = env.wait_until(holding, "the burn-in job to run on node1 holding its GPUs")
    assert (job.gpus, job.user, job.node_names) == (len(cards), "bob", ",node1,")
    assert burnin_advance(run.pk).status == BurnInStatus.RUNNING  # type: ignore[union-attr]
    env.wait_until(lambda: not Job.objects.get(pk=job.pk).is_active, "the burn-in job to end")
    run = burnin_advance(run.pk)  # type: ignore[assignment]
    assert run.status == BurnInStatus.FAILED and run.started is not None and run.finished is not None
    result = BurnInResult.objects.get(run=run)
    crit = {x["key"]: x["status"] for x in result.criteria}
    # the job completed, but no telemetry was recorded: a card without evidence is not accepted
    assert crit["stress_job"] == "pass" and crit["power_band"] == "unmeasured"
    assert Card.objects.get(pk=cards[0].pk).status == CardStatus.REJECTED


def test_refusals_write_nothing(env: Env, otto: Any, researcher_user: Any, admin_user: Any) -> None:
    node = env.nodes["node2"]
    with pytest.raises(PermissionDenied):
        burnin_start(user=researcher_user, node=node)
    with pytest.raises(ValidationError) as exc:
        burnin_start(user=otto, node=node, duration_minutes=0)
    assert "duration_minutes" in exc.value.message_dict
    other = env.nodes["node3"].cards.first()
    with pytest.raises(ValidationError) as exc:
        burnin_start(user=otto, node=node, card_ids=[other.pk])
    assert "cards" in exc.value.message_dict
    with pytest.raises(ValidationError) as exc:  # the admin has no account on this cluster
        burnin_start(user=admin_user, node=node, duration_minutes=5)
    assert "cluster" in exc.value.message_dict
    assert not BurnInRun.objects.exists() and not Action.objects.exists()
    assert set(node.cards.values_list("status", flat=True)) == {CardStatus.IN_SERVICE}


def test_one_burn_in_per_node(env: Env, otto: Any, django_capture_on_commit_callbacks: Any) -> None:
    node = env.nodes["node4"]
    with django_capture_on_commit_callbacks(execute=True):
        first = burnin_start(user=otto, node=node, duration_minutes=1, program="sleep 1")
    with pytest.raises(ValidationError) as exc:
        burnin_start(user=otto, node=node, duration_minutes=1, program="sleep 1")
    assert "node" in exc.value.message_dict
    assert list(BurnInRun.objects.values_list("pk", flat=True)) == [first.pk]
    job = Job.objects.get(pk=Action.objects.get(pk=first.action_id).job_id)
    env.wait_until(lambda: not Job.objects.get(pk=job.pk).is_active, "the job to end")


def test_api_starts_a_burn_in_and_refuses_the_same_way(
    sim_cluster: Any,
    operator_user: Any,
    researcher_user: Any,
    api_as: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    otto = operator_user
    ClusterAccount.objects.create(user=otto, cluster=sim_cluster, username="ops")
    node = sim_cluster.nodes.get(slurm_name="node2")
    denied = api_as(researcher_user).post("/api/jobs/burnin-runs/", {"node": node.pk}, format="json")
    assert denied.status_code == 403 and not BurnInRun.objects.exists()
    assert api_as(researcher_user).get("/api/jobs/burnin-runs/").status_code == 403
    bad = api_as(otto).post("/api/jobs/burnin-runs/", {"node": node.pk, "duration_minutes": 0}, format="json")
    assert bad.status_code == 400 and "duration_minutes" in bad.json() and not BurnInRun.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        res = api_as(otto).post(
            "/api/jobs/burnin-runs/",
            {"node": node.pk, "duration_minutes": 5, "program": "sleep 1"},
            format="json",
        )
    assert res.status_code == 201, res.json()
    body = res.json()
    assert (body["status"], body["node"]["id"], body["requested_by"]) == ("pending", node.pk, "otto")
    assert sorted(r["verdict"] for r in body["results"]) == ["pending"] * node.cards.count()
    again = api_as(otto).post("/api/jobs/burnin-runs/", {"node": node.pk}, format="json")
    assert again.status_code == 400 and "node" in again.json()
    listed = api_as(otto).get("/api/jobs/burnin-runs/").json()
    assert [r["id"] for r in listed["results"]] == [body["id"]]
