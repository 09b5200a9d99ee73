"""Remediation runbooks on the simulator: every path of the default card-fault runbook (reset heals;
reset fails -> reboot; reboot does not heal -> power cycle; nothing heals -> left drained with an
alert saying what was tried), waiting for a running job (deadline -> ask an operator), one run per
node, cancel, dry run, a human's drain never undone, the API, a health check starting a runbook."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from inventory.models import Card, CardModel, Node
from jobs import runbooks
from jobs.cluster import JobSpec
from jobs.models import Action, RunbookRun
from jobs.sync import cluster_sync
from monitoring.models import Alert, HealthCheck
from tests.jobs.runbook_agent import BUS, ESCALATED_TO_REBOOT, Agent, run_steps

pytestmark = pytest.mark.django_db


@pytest.fixture
def rig(sim_cluster: Any, sim: Any) -> Node:
    """node1 of the simulated cluster holds one p150a (bus 0000:01:00.0, the snapshot's first card)."""
    node = sim_cluster.nodes.get(slurm_name="node1")
    node.cards.all().delete()
    model = CardModel.objects.create(vendor="Tenstorrent", name="p150a", tdp_w=300)
    Card.objects.create(node=node, card_model=model, slot="1", pci_bus_id=BUS)
    HealthCheck.objects.create(name="heartbeat", kind="tt_heartbeat", params={"window_s": 600}, consecutive=1)
    assert cluster_sync(sim_cluster).ok
    return node


def _drive(
    run: RunbookRun, sim: Any, agent: Agent, cb: Any, *, until: Callable[[RunbookRun], bool], rounds: int = 40
) -> RunbookRun:
    """Let time pass as the workers and beat would: the simulator ticks, the cluster syncs, the
    agent posts telemetry, and the runbook is moved on; stops when ``until`` holds."""
    clock = timezone.now()
    for _i in range(rounds):
        clock += dt.timedelta(seconds=20)  # the simulator's, the agent's and the engine's time
        with cb(execute=True):
            sim.advance(20)
            assert cluster_sync(run.node.cluster).ok
            agent.post(clock)
            runbooks.runbook_advance(run.pk, now=clock)
        run.refresh_from_db()
        if until(run):
            return run
    raise AssertionError(f"run stuck at {run.step} ({run.status}):\n{run.summary}")


def _start(rig: Node, user: Any, cb: Any) -> RunbookRun:
    with cb(execute=True):
        return runbooks.runbook_run_start(
            runbook=runbooks.runbook_ensure_default(), node=rig, user=user, reason="Xid 79"
        )


def _done(run: RunbookRun) -> bool:
    return not run.is_active


def test_a_reset_that_heals_the_card_resumes_the_node(
    rig, sim, operator_user, django_capture_on_commit_callbacks
) -> None:
    cb = django_capture_on_commit_callbacks
    run = _start(rig, operator_user, cb)
    run = _drive(run, sim, Agent(rig), cb, until=_done)
    assert run.status == "succeeded", run.summary
    assert run_steps(run) == [("drain", "succeeded"), ("wait_idle", "succeeded"), ("reset", "succeeded"),
                           ("verify_reset", "succeeded"), ("resume", "succeeded")]  # fmt: skip
    # the reset ran on the node as root, as an argv list
    assert sim.node_commands == [(rig.hostname, ("tt-smi", "-r", BUS), True)]
    info = next(n for n in sim.list_nodes() if n.name == "node1")
    assert not info.drained


def test_wait_idle_waits_for_the_running_job(
    rig, sim, sim_cluster, operator_user, django_capture_on_commit_callbacks
) -> None:
    cb = django_capture_on_commit_callbacks
    # given a job running on node1 for two minutes
    job_id = sim.submit_job(JobSpec(name="train", script="#!/bin/sh\nsleep 120\n", tag="t1", nodes=4,
                                    time_limit_minutes=5), as_user="alice")  # fmt: skip
    sim.advance(1)
    assert sim.get_job(job_id).state == "RUNNING"
    run = _start(rig, operator_user, cb)
    run = _drive(run, sim, Agent(rig), cb, until=lambda r: r.step == "reset" or _done(r))
    # then the reset came only after the job had finished
    assert sim.get_job(job_id).state == "COMPLETED"
    wait = Action.objects.get(run=run, params__step="wait_idle")
    assert wait.finished >= Action.objects.get(run=run, params__step="drain").finished


def test_the_wait_deadline_asks_an_operator(
    rig, sim, operator_user, settings, django_capture_on_commit_callbacks
) -> None:
    cb = django_capture_on_commit_callbacks
    sim.submit_job(JobSpec(name="long", script="#!/bin/sh\nsleep 99999\n", tag="t2", nodes=4,
                           time_limit_minutes=600), as_user="alice")  # fmt: skip
    sim.advance(1)
    runbook = runbooks.runbook_ensure_default()
    runbook.steps = [dict(s, timeout_s=1) if s["id"] == "wait_idle" else s for s in runbook.steps]
    runbook.save()
    run = _start(rig, operator_user, cb)
    run = _drive(run, sim, Agent(rig), cb, until=lambda r: r.status == "waiting")
    assert "waiting for an operator" in run.summary
    # when the operator lets it go on, it resets without waiting for the job
    with cb(execute=True):
        runbooks.runbook_run_continue(run=run, user=operator_user)
    run.refresh_from_db()
    assert run.status == "running" and "continued by" in run.summary
    assert Action.objects.get(run=run, params__step="reset").status == "succeeded"
    assert Action.objects.get(run=run, params__step="wait_idle").status == "failed"


def test_a_failed_reset_escalates_to_a_reboot(
    rig, sim, operator_user, django_capture_on_commit_callbacks
) -> None:
    cb = django_capture_on_commit_callbacks
    sim.node_command_results["tt-smi"] = (1, "Error: card 0 did not come back after reset")
    run = _start(rig, operator_user, cb)
    run = _drive(run, sim, Agent(rig), cb, until=_done)
    assert run.status == "succeeded", run.summary
    assert [s for s, _st in run_steps(run)] == ESCALATED_TO_REBOOT
    reset = Action.objects.get(run=run, params__step="reset")
    assert reset.status == "failed" and "did not come back" in reset.output


def test_a_reset_that_exits_0_but_leaves_the_heartbeat_still_is_caught_by_verify(
    rig, sim, operator_user, django_capture_on_commit_callbacks
) -> None:
    cb = django_capture_on_commit_callbacks
    agent = Agent(rig)
    agent.alive = False  # tt-smi -r exits 0, but the firmware never beats again
    rig.bmc_kind, rig.bmc_address = "ipmi", "node1-bmc.example"
    rig.save()
    run = _start(rig, operator_user, cb)
    run = _drive(run, sim, agent, cb, until=_done, rounds=200)
    # then reset, reboot and power cycle were tried, the node stays drained and an alert says so
    assert run.status == "failed"
    assert [s for s, _st in run_steps(run)] == [
        "drain", "wait_idle", "reset", "verify_reset", "reboot", "verify_reboot", "power_cycle",
        "verify_power_cycle", "keep_drained", "give_up"]  # fmt: skip
    assert "heartbeat not rising" in Action.objects.get(run=run, params__step="verify_reset").output
    alert = Alert.objects.get(rule__event_kind="runbook_failed", node=rig)
    assert "could not heal" in alert.message and "verify_power_cycle: failed" in alert.message
    assert next(n for n in sim.list_nodes() if n.name == "node1").drained
    assert [b.address for b in sim.power_cycles] == ["node1-bmc.example"]


def test_without_a_bmc_the_power_cycle_is_skipped(
    rig, sim, operator_user, django_capture_on_commit_callbacks
) -> None:
    cb = django_capture_on_commit_callbacks
    agent = Agent(rig)
    agent.alive = False
    run = _start(rig, operator_user, cb)
    run = _drive(run, sim, agent, cb, until=_done, rounds=200)
    assert run.status == "failed" and "power_cycle: skipped (has_bmc does not hold)" in run.summary
    assert sim.power_cycles == []


def test_one_run_per_node_cancel_and_permissions(
    rig, operator_user, researcher_user, django_capture_on_commit_callbacks
) -> None:
    runbook = runbooks.runbook_ensure_default()
    with pytest.raises(PermissionDenied):
        runbooks.runbook_run_start(runbook=runbook, node=rig, user=researcher_user)
    assert not RunbookRun.objects.exists()
    run = runbooks.runbook_run_start(runbook=runbook, node=rig, user=operator_user)  # on-commit not run
    with pytest.raises(ValidationError) as exc:
        runbooks.runbook_run_start(runbook=runbook, node=rig, user=operator_user)
    assert exc.value.message_dict == {"node": ["A runbook is already running on this node."]}
    run = runbooks.runbook_run_cancel(run=run, user=operator_user)
    assert run.status == "cancelled"
    assert runbooks.runbook_advance(run.pk).status == "cancelled"  # a cancelled run never moves again
    assert not Action.objects.filter(run=run).exists()


def test_a_human_drain_during_the_run_is_never_undone(
    rig, sim, operator_user, django_capture_on_commit_callbacks
) -> None:
    cb = django_capture_on_commit_callbacks
    run = _start(rig, operator_user, cb)
    # while the reset is verified, a person drains the node for their own reason
    agent = Agent(rig)
    run = _drive(run, sim, agent, cb, until=lambda r: r.step == "verify_reset")
    sim.drain_node("node1", "PSU swap (bob)")
    run = _drive(run, sim, agent, cb, until=_done)
    assert run.status == "failed" and "drained by someone else" in run.summary
    assert next(n for n in sim.list_nodes() if n.name == "node1").reason == "PSU swap (bob)"


def test_dry_run_shows_the_steps_and_commands(rig) -> None:
    plan = runbooks.runbook_plan(runbooks.runbook_ensure_default(), rig)
    assert [p["id"] for p in plan][:5] == ["drain", "wait_idle", "reset", "verify_reset", "resume"]
    reset = next(p for p in plan if p["id"] == "reset")
    assert reset["commands"] == [["tt-smi", "-r", BUS]]
    cycle = next(p for p in plan if p["id"] == "power_cycle")
    assert cycle["runs"] is False and cycle["note"] == "skipped: the node has no BMC; goes to keep_drained"
    assert not RunbookRun.objects.exists() and not Action.objects.exists()


def test_steps_are_checked() -> None:
    with pytest.raises(ValidationError) as exc:
        runbooks.steps_clean(
            [{"id": "a", "do": "explode"}, {"id": "a", "do": "drain", "on_failure": "nowhere"}]
        )
    assert exc.value.message_dict["steps"] == [
        "Step 1: the id must be unique: lowercase letters, digits, '_'",
        "Step 1: 'do' must be one of drain, wait_idle, reset_cards, verify, resume, reboot, power_cycle, give_up",
        "Step 2: the id must be unique: lowercase letters, digits, '_'",
        "Step 2: on_failure must name a step or be fail",
    ]


def test_a_failing_health_check_starts_the_runbook_it_triggers(
    rig, sim, django_capture_on_commit_callbacks
) -> None:
    from monitoring.health.services import health_evaluate

    runbook = runbooks.runbook_ensure_default()
    runbook.trigger_check_kinds = ["tt_heartbeat"]
    runbook.save()
    agent = Agent(rig)
    agent.alive = False
    now = timezone.now()
    agent.post(now - dt.timedelta(seconds=30))
    agent.post(now)
    health_evaluate(now=now)
    run = RunbookRun.objects.get(node=rig)
    assert (run.requested_by, run.reason) == (None, "health check failing: heartbeat")


def test_the_api_starts_dry_runs_and_cancels(rig, api_as, operator_user, researcher_user) -> None:
    runbook = runbooks.runbook_ensure_default()
    api = api_as(operator_user)
    dry = api.post(
        "/api/jobs/runbook-runs/", {"runbook": runbook.pk, "node": rig.pk, "dry_run": True}, format="json"
    )
    assert dry.status_code == 200 and dry.json()["plan"][2]["commands"] == [["tt-smi", "-r", BUS]]
    assert not RunbookRun.objects.exists()
    denied = api_as(researcher_user).post(
        "/api/jobs/runbook-runs/", {"runbook": runbook.pk, "node": rig.pk}, format="json"
    )
    assert denied.status_code == 403 and not RunbookRun.objects.exists()
    made = api.post("/api/jobs/runbook-runs/", {"runbook": runbook.pk, "node": rig.pk}, format="json")
    assert made.status_code == 201, made.json()
    again = api.post("/api/jobs/runbook-runs/", {"runbook": runbook.pk, "node": rig.pk}, format="json")
    assert again.status_code == 400 and again.json() == {
        "node": ["A runbook is already running on this node."]
    }
    cancelled = api.post(f"/api/jobs/runbook-runs/{made.json()['id']}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"


def test_the_pages_dry_run_start_and_cancel(rig, client, operator_user, researcher_user, admin_user) -> None:
    from django.test import Client

    runbook = runbooks.runbook_ensure_default()
    client.force_login(operator_user)
    url = f"/jobs/nodes/{rig.pk}/runbook/"
    dry = client.post(url, {"runbook": runbook.pk, "dry_run": "1"})
    assert dry.status_code == 200 and b"tt-smi -r 0000:01:00.0" in dry.content
    assert not RunbookRun.objects.exists()
    started = client.post(url, {"runbook": runbook.pk, "reason": "Xid 79 on card 1"})
    run = RunbookRun.objects.get()
    assert started.status_code == 302 and started["Location"] == f"/jobs/runbook-runs/{run.pk}/"
    page = client.get(started["Location"])
    assert page.status_code == 200 and b"Xid 79 on card 1" in page.content
    again = client.post(url, {"runbook": runbook.pk})
    assert again.status_code == 400 and b"A runbook is already running on this node." in again.content
    cancelled = client.post(f"/jobs/runbook-runs/{run.pk}/cancel/", HTTP_HX_REQUEST="true")
    assert cancelled.status_code == 200
    run.refresh_from_db()
    assert run.status == "cancelled"
    # a researcher may not start one; the list and the runbook pages answer their readers
    other = Client()
    other.force_login(researcher_user)
    assert other.post(url, {"runbook": runbook.pk}).status_code == 403
    assert RunbookRun.objects.count() == 1
    admin = Client()
    admin.force_login(admin_user)
    for path in (
        "/jobs/runbook-runs/",
        "/jobs/runbooks/",
        f"/jobs/runbooks/{runbook.pk}/",
        f"/jobs/runbooks/{runbook.pk}/edit/",
    ):
        assert admin.get(path).status_code == 200, path


def test_bulk_node_operations_start_one_run_per_node(sim_cluster, rig, operator_user, client) -> None:
    runbook = runbooks.runbook_ensure_default()
    other = sim_cluster.nodes.get(slurm_name="node2")
    client.force_login(operator_user)
    res = client.post(
        "/jobs/nodes/", {"operation": "runbook", "runbook": runbook.pk, "nodes": [rig.pk, other.pk]}
    )
    # node2's cards have no bus id to reset them by: it is refused, node1 still starts
    assert res.status_code == 200
    assert list(RunbookRun.objects.values_list("node__slurm_name", flat=True)) == ["node1"]
    assert b"has no PCI bus id to reset it by" in res.content
    missing = client.post("/jobs/nodes/", {"operation": "runbook", "nodes": [rig.pk]})
    assert missing.status_code == 400 and b"Choose the runbook to run." in missing.content
