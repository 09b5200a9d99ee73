"""Leases on running actions (jobs.leases): renewed while a worker runs the action; an expired one
is enqueued again (the next attempt recognises what the lost one did) or failed with a clear message.
The real thing, a SIGKILLed worker with the broker's hour-long visibility timeout, is in
test_worker_killed.py."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from inventory.choices import BMCKind
from jobs import leases, services
from jobs.models import Action, ActionStatus

pytestmark = pytest.mark.django_db


def _lose_worker(action: Action, *, attempts: int = 1, age_s: float = 31) -> None:
    """As a worker that claimed ``action`` and died: running, last heartbeat ``age_s`` ago."""
    beat = timezone.now() - timedelta(seconds=age_s)
    Action.objects.filter(pk=action.pk).update(
        status="running", attempts=attempts, started=beat, heartbeat=beat
    )


def test_an_expired_drain_is_enqueued_again_and_recognised_from_slurms_state(
    sim_cluster, sim, operator_user, django_capture_on_commit_callbacks
) -> None:
    # given a drain whose worker ran scontrol and died before recording it (lease 30 s, 31 s old)
    node = sim_cluster.nodes.get(slurm_name="node2")
    action = services.node_drain_request(node, user=operator_user, reason="fan noise")
    _lose_worker(action)
    sim.drain_node("node2", "fan noise")
    # when beat looks for expired leases (eager Celery runs the new attempt on commit)
    with django_capture_on_commit_callbacks(execute=True):
        result = leases.action_leases_recover()
    # then it was enqueued again, and the second attempt found the node drained instead of draining
    action.refresh_from_db()
    assert result == {"requeued": [str(action.pk)], "failed": []}
    assert (action.status, action.attempts, action.error, action.heartbeat) == ("succeeded", 2, "", None)
    lines = action.output.splitlines()
    assert len(lines) == 2 and lines[0].startswith("attempt 1: the worker stopped renewing its lease at ")
    assert lines[1] == "Drained node2: fan noise (Slurm shows the drain of an earlier attempt)"


def test_an_expired_drain_that_never_reached_slurm_is_run(
    sim_cluster, sim, operator_user, django_capture_on_commit_callbacks
) -> None:
    node = sim_cluster.nodes.get(slurm_name="node3")
    action = services.node_drain_request(node, user=operator_user, reason="psu")
    _lose_worker(action)
    with django_capture_on_commit_callbacks(execute=True):
        leases.action_leases_recover()
    action.refresh_from_db()
    assert (action.status, action.attempts, action.output.splitlines()[1]) == (
        "succeeded",
        2,
        "Drained node3: psu",
    )
    info = next(n for n in sim.list_nodes() if n.name == "node3")
    assert (info.display_state, info.reason) == ("drained", "psu")


def test_a_live_lease_is_left_alone_and_a_duplicate_delivery_does_nothing(sim_cluster, operator_user) -> None:
    # given a drain claimed by a worker that renewed its lease 29 s ago (lease 30 s)
    node = sim_cluster.nodes.get(slurm_name="node2")
    action = services.node_drain_request(node, user=operator_user, reason="r")
    _lose_worker(action, age_s=29)
    # when beat runs and the broker delivers the task a second time
    assert leases.action_leases_recover() == {"requeued": [], "failed": []}
    again = services.action_execute(str(action.pk))
    # then nothing ran a second time
    assert (again.status, again.attempts) == ("running", 1)
    assert Action.objects.get(pk=action.pk).attempts == 1


def test_an_expired_power_cycle_is_failed_not_sent_twice(
    sim_cluster, operator_user, django_capture_on_commit_callbacks
) -> None:
    node = sim_cluster.nodes.get(slurm_name="node1")
    node.bmc_kind, node.bmc_address, node.bmc_username = BMCKind.IPMI, "10.0.0.9", "admin"
    node.save()
    action = services.node_power_cycle_request(node, user=operator_user)
    _lose_worker(action)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        result = leases.action_leases_recover()
    action.refresh_from_db()
    assert result == {"requeued": [], "failed": [str(action.pk)]}
    assert (action.status, action.attempts) == ("failed", 1)
    assert action.error == (
        "The worker sending this power cycle was lost; whether the BMC received it is unknown, so it "
        "is not sent again. Check the node and request a new one if needed."
    )
    assert action.finished is not None and len(callbacks) == 1  # the live push only, no new task


def test_an_action_lost_on_its_last_attempt_fails_with_the_reason(sim_cluster, operator_user) -> None:
    # given PORTAL_ACTION_MAX_ATTEMPTS = 2 (tests) and a resume lost on its second attempt
    node = sim_cluster.nodes.get(slurm_name="node2")
    action = services.node_resume_request(node, user=operator_user)
    _lose_worker(action, attempts=2)
    assert leases.action_leases_recover() == {"requeued": [], "failed": [str(action.pk)]}
    action.refresh_from_db()
    assert (action.status, action.error) == (
        "failed",
        "Gave up after 2 attempts: the worker running it was lost.",
    )
    # and the node can be operated again (the one-active-action rule no longer holds it)
    assert services.node_resume_request(node, user=operator_user).status == "pending"


def test_a_worker_whose_lease_was_taken_over_cannot_overwrite_the_next_attempt(
    sim_cluster, operator_user
) -> None:
    node = sim_cluster.nodes.get(slurm_name="node2")
    action = services.node_drain_request(node, user=operator_user, reason="r")
    _lose_worker(action, attempts=2)  # attempt 2 runs now; attempt 1's worker comes back late
    stale = Action.objects.get(pk=action.pk)
    stale.attempts = 1
    services._finish(stale, ActionStatus.FAILED, error="late")
    assert Action.objects.values_list("status", "attempts", "error").get(pk=action.pk) == ("running", 2, "")


@pytest.mark.django_db(transaction=True)
def test_the_lease_is_renewed_while_the_action_runs(settings: Any, sim_cluster, operator_user) -> None:
    # given a heartbeat every 0.1 s and an action claimed 40 s ago
    settings.PORTAL_ACTION_HEARTBEAT_S = 0.1
    node = sim_cluster.nodes.get(slurm_name="node2")
    action = services.node_drain_request(node, user=operator_user, reason="r")
    _lose_worker(action, age_s=40)
    action.refresh_from_db()
    before = action.heartbeat
    # when the worker holds the lease for a while
    with leases.action_lease(action):
        time.sleep(0.5)
    # then the row carries a fresh heartbeat and beat leaves it alone
    renewed = Action.objects.get(pk=action.pk).heartbeat
    assert before is not None and renewed is not None and renewed > before + timedelta(seconds=39)
    assert leases.action_leases_recover() == {"requeued": [], "failed": []}
