"""Action requests and execution against the simulator: validation, permissions, idempotence, retries."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs import services
from jobs.models import Action, ActionKind, ActionStatus, Job, Partition
from jobs.sync import cluster_sync
from portal.models import AuditEntry

SCRIPT = "#!/bin/bash\necho hello\nsleep 5\n"

pytestmark = pytest.mark.django_db


def test_drain_request_runs_on_commit_and_drains_the_node(
    sim_cluster, sim, operator_user, django_capture_on_commit_callbacks
) -> None:
    # given an operator and a node of a simulated cluster
    node = sim_cluster.nodes.get(slurm_name="node2")
    # when they drain it
    with django_capture_on_commit_callbacks(execute=True):
        action = services.node_drain_request(node, user=operator_user, reason="fan noise")
    # then the action succeeded, the cluster has the node drained, and the request was audited
    action.refresh_from_db()
    assert (action.status, action.attempts, action.output) == ("succeeded", 1, "Drained node2: fan noise")
    assert action.requested_by == operator_user and action.started and action.finished
    info = next(n for n in sim.list_nodes() if n.name == "node2")
    assert (info.display_state, info.reason) == ("drained", "fan noise")
    assert (
        AuditEntry.objects.filter(action="action", object_id=str(action.pk), message="drain node2").count()
        == 1
    )


def test_a_node_action_that_succeeds_syncs_its_cluster_at_once(
    sim_cluster, sim, operator_user, django_capture_on_commit_callbacks
) -> None:
    # given a synced cluster whose node2 is idle in the portal
    assert cluster_sync(sim_cluster).ok
    node = sim_cluster.nodes.get(slurm_name="node2")
    assert node.slurm_state == "idle"
    # when an operator drains it and the action succeeds
    with django_capture_on_commit_callbacks(execute=True):
        services.node_drain_request(node, user=operator_user, reason="fan noise")
    # then the portal's row says drained without waiting for the periodic sync
    node.refresh_from_db()
    assert (node.slurm_state, node.slurm_reason) == ("drained", "fan noise")
    # and a resume the same way
    with django_capture_on_commit_callbacks(execute=True):
        services.node_resume_request(node, user=operator_user)
    node.refresh_from_db()
    assert node.slurm_state == "idle"


def test_researcher_may_not_drain_and_nothing_is_recorded(sim_cluster, researcher_user) -> None:
    node = sim_cluster.nodes.get(slurm_name="node2")
    with pytest.raises(PermissionDenied):
        services.node_drain_request(node, user=researcher_user, reason="x")
    assert Action.objects.count() == 0


@pytest.mark.parametrize("reason", ["", "   ", "two\nlines", "tab\there", "x" * 201, "nul\x00"])
def test_bad_reasons_are_refused_before_anything_runs(sim_cluster, operator_user, reason) -> None:
    node = sim_cluster.nodes.get(slurm_name="node2")
    with pytest.raises(ValidationError) as exc:
        services.node_drain_request(node, user=operator_user, reason=reason)
    assert list(exc.value.message_dict) == ["reason"]
    assert Action.objects.count() == 0


def test_one_active_action_per_node(sim_cluster, operator_user) -> None:
    # given a pending action on node2 (not executed: no on-commit callbacks run)
    node = sim_cluster.nodes.get(slurm_name="node2")
    services.node_drain_request(node, user=operator_user, reason="first")
    # when another is requested, then it is refused with a clear message
    with pytest.raises(ValidationError) as exc:
        services.node_resume_request(node, user=operator_user)
    assert exc.value.message_dict == {"node": ["This node already has an action in progress."]}
    # and the database itself holds the rule
    with pytest.raises(IntegrityError), transaction.atomic():
        Action.objects.create(kind="resume", cluster=sim_cluster, node=node, status="running")
    assert Action.objects.filter(node=node).count() == 1
    # another node is fine
    services.node_resume_request(sim_cluster.nodes.get(slurm_name="node3"), user=operator_user)


def test_execute_twice_is_harmless(sim_cluster, sim, operator_user) -> None:
    node = sim_cluster.nodes.get(slurm_name="node1")
    action = services.node_drain_request(node, user=operator_user, reason="maintenance")
    first = services.action_execute(str(action.pk))
    second = services.action_execute(str(action.pk))
    assert (first.status, second.status, second.attempts) == ("succeeded", "succeeded", 1)


def test_submit_runs_as_the_users_cluster_account_and_a_retry_finds_the_same_job(
    sim_cluster, sim, researcher_user, alice_account
) -> None:
    # given alice mapped to the cluster user alice
    alice_account(sim_cluster)
    action = services.job_submit(
        user=researcher_user, cluster=sim_cluster, name="train", script=SCRIPT, gpus=2
    )
    assert action.params["cluster_user"] == "alice"
    # when the task runs, its worker is lost before it recorded the outcome (still running, the
    # lease expired), and the task is delivered again
    done = services.action_execute(str(action.pk))
    Action.objects.filter(pk=action.pk).update(
        status="running", heartbeat=timezone.now() - timedelta(hours=1)
    )
    again = services.action_execute(str(action.pk))
    assert again.attempts == 2
    # then there is exactly one Slurm job, tagged with the action id and owned by alice
    jobs = sim.list_jobs()
    assert [(j.user, j.tag, j.gpus) for j in jobs] == [("alice", str(action.pk), 2)]
    assert done.output == again.output == f"Submitted batch job {jobs[0].job_id}"
    job = Job.objects.get()
    assert (job.job_id, job.owner, job.script, job.submitted_by_action_id, again.job_id) == (
        jobs[0].job_id,
        researcher_user,
        SCRIPT,
        action.pk,
        job.pk,
    )


def test_submit_needs_a_cluster_account(sim_cluster, researcher_user) -> None:
    with pytest.raises(ValidationError) as exc:
        services.job_submit(user=researcher_user, cluster=sim_cluster, name="x", script=SCRIPT)
    assert list(exc.value.message_dict) == ["cluster"]
    assert Action.objects.count() == 0


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": "bad name; rm -rf /"}, "name"),
        ({"name": "-oops"}, "name"),
        ({"script": "echo no shebang"}, "script"),
        ({"partition": "nosuch"}, "partition"),
        ({"gpus": 9}, "gpus"),
        ({"time_limit_minutes": 60, "partition": "debug"}, "time_limit_minutes"),
        ({"nodes": 5}, "nodes"),
        ({"environment": {"A": "x,y"}}, "params"),
        ({"bogus": 1}, "params"),
    ],
)
def test_submit_is_validated_against_the_synced_partitions(
    sim_cluster, researcher_user, alice_account, fields, field
) -> None:
    alice_account(sim_cluster)
    assert cluster_sync(sim_cluster).ok
    assert sorted(Partition.objects.values_list("name", "max_gpus_per_node", "max_time_minutes")) == [
        ("debug", 4, 30),
        ("gpu", 4, 1440),
    ]
    kwargs: dict[str, Any] = {"name": "job", "script": SCRIPT, **fields}
    with pytest.raises(ValidationError) as exc:
        services.job_submit(user=researcher_user, cluster=sim_cluster, **kwargs)
    assert list(exc.value.message_dict) == [field]
    assert Action.objects.count() == 0


def test_researcher_cancels_only_own_jobs(
    sim_cluster, sim, researcher_user, make_user, alice_account
) -> None:
    alice_account(sim_cluster)
    mine = Job.objects.create(
        cluster=sim_cluster, job_id=7, user="alice", owner=researcher_user, state="RUNNING"
    )
    bob = make_user("bob", "researcher")
    theirs = Job.objects.create(cluster=sim_cluster, job_id=8, user="bob", owner=bob, state="RUNNING")
    with pytest.raises(PermissionDenied):
        services.job_cancel_request(theirs, user=researcher_user)
    action = services.job_cancel_request(mine, user=researcher_user)
    assert action.params == {"target": "7", "as_user": "alice"}
    assert Action.objects.count() == 1


def test_operator_cancels_any_job_through_the_service_account(sim_cluster, operator_user, make_user) -> None:
    bob = make_user("bob", "researcher")
    job = Job.objects.create(cluster=sim_cluster, job_id=8, user="bob", owner=bob, state="PENDING")
    assert services.job_cancel_request(job, user=operator_user).params == {"target": "8", "as_user": None}
    job.state = "COMPLETED"
    with pytest.raises(ValidationError):
        services.job_cancel_request(job, user=operator_user)


def test_retryable_error_is_retried_then_fails_with_output(
    sim_cluster, sim, operator_user, django_capture_on_commit_callbacks
) -> None:
    # given a controller that does not answer
    sim.inject("controller_unreachable", count=None)
    node = sim_cluster.nodes.get(slurm_name="node2")
    # when an action is requested (eager Celery: retries run at once; at most 2 attempts in tests)
    with django_capture_on_commit_callbacks(execute=True):
        action = services.node_resume_request(node, user=operator_user)
    # then it failed after 2 attempts with the error in its output
    action.refresh_from_db()
    assert (action.status, action.attempts) == ("failed", 2)
    assert action.output == "attempt 2: Unable to contact slurm controller (connect failure)"
    assert action.error == "Unable to contact slurm controller (connect failure)"


def test_retryable_error_then_success(
    sim_cluster, sim, operator_user, django_capture_on_commit_callbacks
) -> None:
    sim.inject("controller_unreachable", count=1)
    node = sim_cluster.nodes.get(slurm_name="node2")
    with django_capture_on_commit_callbacks(execute=True):
        action = services.node_drain_request(node, user=operator_user, reason="r")
    action.refresh_from_db()
    assert (action.status, action.attempts, action.output) == ("succeeded", 2, "Drained node2: r")


def test_terminal_error_fails_with_slurms_message(
    sim_cluster, sim, researcher_user, alice_account, django_capture_on_commit_callbacks
) -> None:
    alice_account(sim_cluster)
    sim.inject("refuse_submit", message="Job violates accounting/QOS policy (job submit limit)")
    with django_capture_on_commit_callbacks(execute=True):
        action = services.job_submit(user=researcher_user, cluster=sim_cluster, name="j", script=SCRIPT)
    action.refresh_from_db()
    assert (action.status, action.attempts) == (ActionStatus.FAILED, 1)
    assert action.output == "Job violates accounting/QOS policy (job submit limit)"
    assert Job.objects.count() == 0


def test_power_cycle_needs_a_bmc(sim_cluster, operator_user) -> None:
    node = sim_cluster.nodes.get(slurm_name="node2")
    with pytest.raises(ValidationError) as exc:
        services.node_power_cycle_request(node, user=operator_user)
    assert list(exc.value.message_dict) == ["node"]


def test_power_cycle_goes_to_the_bmc(sim_cluster, sim, operator_user) -> None:
    node = sim_cluster.nodes.get(slurm_name="node2")
    node.bmc_kind, node.bmc_address, node.bmc_username, node.bmc_password = (
        "ipmi",
        "node2-bmc",
        "admin",
        "s3cret",
    )
    node.save()
    action = services.node_power_cycle_request(node, user=operator_user)
    done = services.action_execute(str(action.pk))
    assert (done.status, done.kind) == ("succeeded", ActionKind.POWER_CYCLE)
    assert [(b.kind, b.address, b.password) for b in sim.power_cycles] == [("ipmi", "node2-bmc", "s3cret")]
    assert "s3cret" not in str(action.params)


def test_repeated_cancels_are_answered_with_the_one_in_progress(
    sim_cluster, researcher_user, operator_user, alice_account
) -> None:
    # given alice's running job and her pending cancel of it
    alice_account(sim_cluster)
    job = Job.objects.create(
        cluster=sim_cluster, job_id=7, user="alice", owner=researcher_user, state="RUNNING"
    )
    first = services.job_cancel_request(job, user=researcher_user)
    # when she and an operator ask again, then both get the same action and nothing new is recorded
    again = services.job_cancel_request(job, user=researcher_user)
    by_operator = services.job_cancel_request(job, user=operator_user)
    assert (again.pk, again.reused, by_operator.pk, by_operator.reused, first.reused) == (
        first.pk,
        True,
        first.pk,
        True,
        False,
    )
    assert Action.objects.filter(kind="cancel").count() == 1
    assert AuditEntry.objects.filter(action="cancel").count() == 1
    # and the database itself holds the rule
    with pytest.raises(IntegrityError), transaction.atomic():
        Action.objects.create(kind="cancel", cluster=sim_cluster, job=job, status="running")


def test_a_finished_cancel_answers_until_the_sync_sees_the_job_again(
    sim_cluster, researcher_user, alice_account
) -> None:
    alice_account(sim_cluster)
    job = Job.objects.create(
        cluster=sim_cluster, job_id=7, user="alice", owner=researcher_user, state="RUNNING",
        last_seen=timezone.now() - timedelta(seconds=5),
    )  # fmt: skip
    first = services.job_cancel_request(job, user=researcher_user)
    Action.objects.filter(pk=first.pk).update(status="succeeded", finished=timezone.now())
    # the sync has not looked since the cancel succeeded: the job is still RUNNING in the portal
    assert services.job_cancel_request(job, user=researcher_user).pk == first.pk
    # once the sync saw it still running after the cancel, a new cancel may be sent
    Job.objects.filter(pk=job.pk).update(last_seen=timezone.now() + timedelta(seconds=1))
    job.refresh_from_db()
    second = services.job_cancel_request(job, user=researcher_user)
    assert (second.pk != first.pk, second.reused, second.status) == (True, False, "pending")
    # and after a failed cancel, too
    Action.objects.filter(pk=second.pk).update(status="failed", finished=timezone.now())
    assert services.job_cancel_request(job, user=researcher_user).pk not in (first.pk, second.pk)
    assert Action.objects.filter(kind="cancel").count() == 3
