"""The default card-fault runbook on the real Slurm lab: the drain and the resume through scontrol,
waiting for a real running job, the card reset through a stand-in ``tt-smi`` installed where the
lab's node commands run (it can be made to fail), a real reboot (the lab's RebootProgram restarts
the node's slurmd), and a real Celery worker killed in the middle of a step.

The lab's nodes are slurmd processes on the login host: a node command runs there through
PORTAL_TELEMETRY_NODE_PREFIX (``env PATH=<tools>:... RACKPILOT_NODE=<host>``), as the service account
(PORTAL_CARD_RESET_SUDO off: the stand-in needs no root). The test plays the node's agent, posting
tt-smi snapshots whose heartbeat rises (the card is alive) or stands still."""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from inventory.models import Card, CardModel, Node
from jobs import runbooks
from jobs.backends import cluster_backend
from jobs.cluster import JobSpec
from jobs.models import Action, RunbookRun
from jobs.sync import cluster_sync
from monitoring.models import HealthCheck
from tests.clusters import lab_cluster_create, make_nodes
from tests.jobs.killed_worker import Processes, wait_for
from tests.jobs.runbook_agent import BUS, ESCALATED_TO_REBOOT, Agent, run_steps
from tests.lab import wait_nodes_responding

pytestmark = pytest.mark.slurm

STAND_IN = """#!/bin/sh
# stand-in for tt-smi -r: records the call; exits with the code in $TOOLS/tt-smi.exit (0 if none)
echo "$RACKPILOT_NODE $*" >> "$(dirname "$0")/tt-smi.calls"
code=$(cat "$(dirname "$0")/tt-smi.exit" 2>/dev/null || echo 0)
[ "$code" = 0 ] && echo "Resetting board at $2 ... done" || echo "Error: board $2 did not come back" >&2
exit "$code"
"""


@pytest.fixture
def tools(slurm_lab: dict[str, str], settings: Any) -> Path:
    """The stand-in tt-smi, in a directory of the lab readable by its service account."""
    path = Path(slurm_lab["SLURM_LAB_DIR"]) / "tools-runbook"
    path.mkdir(mode=0o777, exist_ok=True)
    path.chmod(0o777)
    for name in ("tt-smi.calls", "tt-smi.exit"):
        (path / name).unlink(missing_ok=True)
    tool = path / "tt-smi"
    tool.write_text(STAND_IN)
    tool.chmod(0o755)
    (path / "tt-smi.calls").touch(mode=0o666)
    (path / "tt-smi.calls").chmod(0o666)
    settings.PORTAL_TELEMETRY_NODE_PREFIX = ["env", f"PATH={path}:/usr/bin:/bin", "RACKPILOT_NODE={host}"]
    settings.PORTAL_CARD_RESET_SUDO = False
    return path


@pytest.fixture
def lab_rig(slurm_lab: dict[str, str], db: Any) -> Iterator[Node]:
    """node3 of the lab, as an inventory node with one p150a, under the heartbeat health check;
    resumed afterwards whatever the test left."""
    wait_nodes_responding(slurm_lab)  # a test before may have restarted slurmctld or a slurmd
    cluster = lab_cluster_create(slurm_lab)
    node = make_nodes(cluster, ["node3"], gpus=0)[0]
    model = CardModel.objects.create(vendor="Tenstorrent", name="p150a-lab", tdp_w=300)
    Card.objects.create(node=node, card_model=model, slot="1", pci_bus_id=BUS)
    HealthCheck.objects.create(name="heartbeat", kind="tt_heartbeat", params={"window_s": 600}, consecutive=1)
    assert cluster_sync(cluster).ok
    yield node
    with cluster_backend(cluster) as backend:
        backend.resume_node("node3")


def _drive(
    run: RunbookRun, agent: Agent, cb: Any, until: Callable[[RunbookRun], bool], seconds: float
) -> RunbookRun:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with cb(execute=True):
            assert cluster_sync(run.node.cluster).ok
            agent.post()
            runbooks.runbook_advance(run.pk)
        run.refresh_from_db()
        if until(run):
            return run
        time.sleep(0.5)
    raise AssertionError(f"run stuck at {run.step} ({run.status}):\n{run.summary}")


def _slurm_node(node: Node) -> Any:
    with cluster_backend(node.cluster) as backend:
        return next(n for n in backend.list_nodes() if n.name == node.slurm_name)


@pytest.mark.django_db
def test_lab_drain_waits_for_the_real_job_resets_verifies_and_resumes(
    lab_rig, tools, operator_user, django_capture_on_commit_callbacks, slurm_lab
) -> None:
    cb = django_capture_on_commit_callbacks
    # given a real job running on every node (node3 too) for a few seconds
    with cluster_backend(lab_rig.cluster) as backend:
        job_id = backend.submit_job(
            JobSpec(
                name="rb-train",
                script="#!/bin/sh\nsleep 8\n",
                tag=f"rb-{time.time_ns()}",
                partition="debug",
                nodes=4,
                time_limit_minutes=2,
            ),  # fmt: skip
            as_user="alice",
        )

    def running() -> bool:
        assert cluster_sync(lab_rig.cluster).ok
        return Node.objects.get(pk=lab_rig.pk).slurm_state in ("alloc", "mixed")

    wait_for(running, 30, "the job to run on node3")
    with cb(execute=True):
        run = runbooks.runbook_run_start(
            runbook=runbooks.runbook_ensure_default(), node=lab_rig, user=operator_user
        )
    run = _drive(run, Agent(lab_rig), cb, until=lambda r: not r.is_active, seconds=120)
    assert run.status == "succeeded", run.summary
    assert run_steps(run) == [("drain", "succeeded"), ("wait_idle", "succeeded"), ("reset", "succeeded"),
                           ("verify_reset", "succeeded"), ("resume", "succeeded")]  # fmt: skip
    # the stand-in was called once with the card's bus, after the job had ended
    assert (tools / "tt-smi.calls").read_text().splitlines() == [f"{lab_rig.hostname} -r {BUS}"]
    with cluster_backend(lab_rig.cluster) as backend:
        job = backend.get_job(job_id)
    assert job is None or job.finished
    waited = Action.objects.get(run=run, params__step="wait_idle")
    assert "Slurm: drained" in waited.output and waited.finished > waited.started + dt.timedelta(seconds=2)
    reset = Action.objects.get(run=run, params__step="reset")
    assert f"Resetting board at {BUS} ... done" in reset.output
    # the lab's four slurmd share two loaded cores with the tests: one may miss a ping and show
    # NOT_RESPONDING for a while (seen in CI); that is the lab, not the runbook: wait until it answers
    wait_nodes_responding(slurm_lab, 60)
    info = _slurm_node(lab_rig)
    assert not info.drained and info.display_state == "idle"


@pytest.mark.django_db
def test_lab_a_failed_reset_escalates_to_a_real_reboot(
    lab_rig, tools, operator_user, django_capture_on_commit_callbacks
) -> None:
    cb = django_capture_on_commit_callbacks
    (tools / "tt-smi.exit").write_text("3\n")
    boot_before = _slurm_node(lab_rig).boot_time
    with cb(execute=True):
        run = runbooks.runbook_run_start(
            runbook=runbooks.runbook_ensure_default(), node=lab_rig, user=operator_user
        )
    run = _drive(run, Agent(lab_rig), cb, until=lambda r: not r.is_active, seconds=180)
    assert run.status == "succeeded", run.summary
    assert [s for s, _st in run_steps(run)] == ESCALATED_TO_REBOOT
    reset = Action.objects.get(run=run, params__step="reset")
    assert reset.status == "failed" and "did not come back" in reset.output
    # the node booted again (the lab's slurmd restarted with -b) and is back in service
    assert "Reboot of node3 requested" in Action.objects.get(run=run, params__step="reboot").output
    info = wait_for(
        lambda: (n := _slurm_node(lab_rig)).boot_time and "NOT_RESPONDING" not in n.flags and n,
        30,
        "node3 back",
    )
    assert boot_before is not None and info.boot_time > boot_before, (run.summary, boot_before, info)
    assert not info.drained and info.display_state == "idle"


@pytest.mark.django_db(transaction=True)
def test_lab_a_worker_killed_mid_step_does_not_stop_the_run(
    lab_rig, tools, operator_user, tmp_path: Path
) -> None:
    from portal.celery import app

    app.conf.task_always_eager = False
    app.control.purge()
    procs = Processes(tmp_path, connection.settings_dict, settings.CELERY_BROKER_URL)
    agent = Agent(lab_rig)
    prefix = " ".join(settings.PORTAL_TELEMETRY_NODE_PREFIX)
    try:
        os.environ["SLOW_BEAT_TASKS"] = "jobs-action-leases,jobs-runbooks,jobs-cluster-sync"
        os.environ["PORTAL_TELEMETRY_NODE_PREFIX"] = prefix
        os.environ["PORTAL_CARD_RESET_SUDO"] = "false"
        procs.beat()
        first = procs.worker("first", slow=120)  # pauses after each cluster call, before recording it
        runbooks.runbook_run_start(
            runbook=runbooks.runbook_ensure_default(), node=lab_rig, user=operator_user
        )
        run = RunbookRun.objects.get(node=lab_rig)
        # when the worker dies after Slurm drained the node, before the drain was recorded
        wait_for(lambda: len(procs.marker_lines()) >= 1, 90, "the first worker to drain")
        procs.kill(first)
        procs.worker("second", slow=0)

        def finished() -> Any:
            agent.post()
            return RunbookRun.objects.filter(pk=run.pk).exclude(status__in=["running", "waiting"]).first()

        done = wait_for(finished, 240, "the run to finish after the worker was killed")
    finally:
        procs.stop_all()
        for key in ("SLOW_BEAT_TASKS", "PORTAL_TELEMETRY_NODE_PREFIX", "PORTAL_CARD_RESET_SUDO"):
            os.environ.pop(key, None)
        app.conf.task_always_eager = True
        app.control.purge()
    assert done.status == "succeeded", (done.summary, procs.log("second"))
    drain = Action.objects.get(run=done, params__step="drain")
    # the drain's second attempt saw what the lost one had done
    assert drain.attempts == 2 and "Slurm shows the drain of an earlier attempt" in drain.output, drain.output
    assert not _slurm_node(lab_rig).drained
    assert dt.timedelta(0) < done.finished - done.created
