"""Actions and sync end to end, against the simulator AND the real Slurm over real SSH (scripts/slurm-lab).

Each test requests actions through jobs.services (eager Celery, on commit), then syncs until the
database shows what Slurm did. Node actions use node2 only (the cluster-layer suite uses node3/node4).
"""

from __future__ import annotations

import socket

import asyncssh
import pytest

from inventory.models import Node
from jobs import services
from jobs.models import Action, ClusterAccount, Job, JobTransition, NodeState
from tests.clusters import lab_cluster_create

from .conftest import Env

pytestmark = pytest.mark.django_db(transaction=True)


def _run(capture, fn, *args, **kwargs) -> Action:
    with capture(execute=True):
        action = fn(*args, **kwargs)
    action.refresh_from_db()
    return action


@pytest.fixture
def alice(env: Env, researcher_user):
    ClusterAccount.objects.create(user=researcher_user, cluster=env.cluster, username="alice")
    return researcher_user


def test_submit_runs_and_finishes(env: Env, alice, django_capture_on_commit_callbacks) -> None:
    script = "#!/bin/bash\necho hello from rackpilot\nsleep 1\nexit 3\n"
    action = _run(
        django_capture_on_commit_callbacks,
        services.job_submit,
        user=alice,
        cluster=env.cluster,
        name="contract-exit3",
        script=script,
        partition="debug",
        time_limit_minutes=5,
    )
    assert action.status == "succeeded", action.output
    job = Job.objects.get(pk=action.job_id)
    assert (job.owner, job.user, job.tag, job.script) == (alice, "alice", str(action.pk), script)
    done = env.wait_until(lambda: Job.objects.filter(pk=job.pk, state="FAILED").first(), "job to finish")
    assert (done.exit_code, done.partition, done.name) == (3, "debug", "contract-exit3")
    # the submit created the row PENDING; the syncs saw it (maybe) run, then fail: one unbroken chain
    pairs = list(
        JobTransition.objects.filter(job=job).order_by("at", "pk").values_list("from_state", "to_state")
    )
    assert pairs[0][0] == "PENDING" and pairs[-1][1] == "FAILED", pairs
    assert all(a[1] == b[0] for a, b in zip(pairs, pairs[1:])), pairs
    seen = [to for _from, to in pairs if to not in ("CONFIGURING", "COMPLETING")]
    assert seen in (["RUNNING", "FAILED"], ["FAILED"]), pairs


def test_cancel(env: Env, alice, django_capture_on_commit_callbacks) -> None:
    action = _run(
        django_capture_on_commit_callbacks,
        services.job_submit,
        user=alice,
        cluster=env.cluster,
        name="contract-cancel",
        script="#!/bin/bash\nsleep 300\n",
        partition="debug",
    )
    job = Job.objects.get(pk=action.job_id)
    cancel = _run(django_capture_on_commit_callbacks, services.job_cancel_request, job, user=alice)
    assert (cancel.status, cancel.output) == ("succeeded", f"Cancelled job {job.job_id}")
    env.wait_until(lambda: Job.objects.filter(pk=job.pk, state="CANCELLED").exists(), "job to be cancelled")


def test_drain_and_resume(env: Env, operator_user, django_capture_on_commit_callbacks) -> None:
    node = env.nodes["node2"]
    drain = _run(
        django_capture_on_commit_callbacks,
        services.node_drain_request,
        node,
        user=operator_user,
        reason="rackpilot contract test",
    )
    assert drain.status == "succeeded", drain.output
    try:
        env.sync()
        node.refresh_from_db()
        assert node.slurm_state in ("drained", "draining") and node.slurm_reason == "rackpilot contract test"
        assert "DRAIN" in NodeState.objects.get(node=node).flags
    finally:
        resume = _run(
            django_capture_on_commit_callbacks, services.node_resume_request, node, user=operator_user
        )
    assert resume.status == "succeeded", resume.output
    # Slurm pings a resumed node first (NOT_RESPONDING for a moment): wait for it to settle
    env.wait_until(
        lambda: Node.objects.filter(
            pk=node.pk, slurm_state__in=("idle", "mixed", "alloc"), slurm_reason=""
        ).exists(),
        "node2 to resume",
    )


def test_reboot_comes_back(env: Env, operator_user, django_capture_on_commit_callbacks) -> None:
    node = env.nodes["node2"]
    env.sync()
    booted = NodeState.objects.get(node=node).boot_time
    action = _run(
        django_capture_on_commit_callbacks,
        services.node_reboot_request,
        node,
        user=operator_user,
        asap=True,
        next_state="resume",
        reason="contract reboot",
    )
    assert (action.status, action.output) == ("succeeded", "Reboot of node2 requested (ASAP)")

    def back() -> bool:
        state = NodeState.objects.get(node=node)
        return state.boot_time != booted and state.display_state in ("idle", "mixed")

    env.wait_until(back, "node2 to reboot and resume")


def test_bad_partition_message_reaches_the_output(
    env: Env, alice, django_capture_on_commit_callbacks
) -> None:
    # partitions never synced: the portal cannot check, Slurm refuses and says why
    action = _run(
        django_capture_on_commit_callbacks,
        services.job_submit,
        user=alice,
        cluster=env.cluster,
        name="contract-badpart",
        script="#!/bin/bash\ntrue\n",
        partition="nosuch",
    )
    assert (action.status, action.attempts) == ("failed", 1)
    assert action.output == "Invalid partition name specified"


def test_too_many_gpus_message_reaches_the_output(
    env: Env, alice, django_capture_on_commit_callbacks
) -> None:
    action = _run(
        django_capture_on_commit_callbacks,
        services.job_submit,
        user=alice,
        cluster=env.cluster,
        name="contract-gpus",
        script="#!/bin/bash\ntrue\n",
        partition="debug",
        gpus=5,
    )
    assert action.status == "failed"
    assert action.output == "Requested node configuration is not available"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_host_retries_then_fails_and_marks_the_cluster_stale(
    env: Env, operator_user, django_capture_on_commit_callbacks, settings
) -> None:
    if env.kind == "slurm":
        port = _free_port()
        env.cluster.ssh_port = port
        env.cluster.save()
        settings.PORTAL_SSH_CONNECT_TIMEOUT = 3
        error = f"SSH connection to 127.0.0.1:{port} failed: [Errno 111] Connect call failed ('127.0.0.1', {port})"
    else:
        error = "Unable to contact slurm controller (connect failure)"
        from jobs.backends import simulator_get

        simulator_get(env.cluster).inject("controller_unreachable", count=None)
    node = env.nodes["node2"]
    action = _run(django_capture_on_commit_callbacks, services.node_resume_request, node, user=operator_user)
    assert (action.status, action.attempts) == ("failed", 2)
    assert (action.error, action.output) == (error, f"attempt 2: {error}")
    from jobs.sync import cluster_sync

    assert not cluster_sync(env.cluster).ok
    env.cluster.refresh_from_db()
    assert env.cluster.last_sync_error == error
    assert env.cluster.last_sync_ok_at is None
    assert env.cluster.sync_failing_since == env.cluster.last_sync_at is not None


@pytest.mark.slurm
def test_wrong_host_key_is_refused(slurm_lab, operator_user, django_capture_on_commit_callbacks) -> None:
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    cluster = lab_cluster_create(slurm_lab, ssh_host_key=other)
    node = Node.objects.create(hostname=f"node2-{cluster.name}", slurm_name="node2", cluster=cluster)
    action = _run(django_capture_on_commit_callbacks, services.node_resume_request, node, user=operator_user)
    assert (action.status, action.attempts) == ("failed", 1)  # terminal: never retried
    assert "host key" in action.error.lower()


def test_a_command_runs_on_a_node_and_a_bad_host_is_refused(env: Env, settings) -> None:
    from jobs.backends import cluster_backend
    from jobs.cluster import ValidationError

    # the lab's nodes are slurmd processes on the login host: a node command runs there
    settings.PORTAL_TELEMETRY_NODE_PREFIX = ["env", "RACKPILOT_NODE={host}"]
    with cluster_backend(env.cluster) as backend:
        result = backend.run_on_node("node1", ["true"], timeout=30)
        assert (result.exit_code, result.argv[-1]) == (0, "true")
        with pytest.raises(ValidationError):
            backend.run_on_node("node1; reboot", ["true"], timeout=30)
