"""A slurmctld outage on the real loopback lab changes nothing (issue 20).

Stops ONLY slurmctld of the lab (slurmd, munged and sshd keep running, jobs keep running on their
nodes), syncs through a real Celery worker, checks nothing changed and the cluster shows the
outage, reads scontrol/squeue/sacct against the down controller through the real SSH backend, then
starts slurmctld again (from its saved state: no ``-c``) and checks the running job is still the same
running job with no extra transitions. slurmctld is restarted whatever happens, so the lab is left
as found.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from inventory.models import Cluster, Node
from jobs.backends import cluster_backend
from jobs.cluster import JobSpec, RetryableError, TerminalError
from jobs.models import Job, JobTransition, NodeState
from jobs.sync import expand_hostlist
from tests.clusters import lab_cluster_create, make_nodes
from tests.lab import wait_nodes_responding

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]


def _wait(predicate: Callable[[], Any], seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _alive(pid: int) -> bool:
    try:
        state = next(
            ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("State:")
        )
    except (OSError, StopIteration):
        return False
    return state.split()[1] != "Z"


def _ctld_pid(lab: dict[str, str]) -> int | None:
    pidfile = Path(lab["SLURM_LAB_DIR"]) / "run" / "slurmctld.pid"
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) else None


def _ctld_up(lab: dict[str, str]) -> bool:
    proc = subprocess.run(
        ["scontrol", "ping"],
        capture_output=True,
        text=True,
        timeout=20,
        env={**os.environ, "SLURM_CONF": lab["SLURM_CONF"]},
    )
    return "is UP" in proc.stdout


def _start_ctld(lab: dict[str, str]) -> None:
    """slurmctld from its saved state (daemonizes; writes the lab's pid file)."""
    env = {**os.environ, "SLURM_CONF": lab["SLURM_CONF"]}
    subprocess.run(["slurmctld", "-f", lab["SLURM_CONF"]], check=True, timeout=30, env=env)
    _wait(lambda: _ctld_up(lab), 30, "slurmctld to answer again")
    wait_nodes_responding(lab)  # the lab as the next test expects it: every node registered


@pytest.fixture
def ctld(slurm_lab: dict[str, str]) -> Iterator[Callable[[], None]]:
    """stop() stops the lab's slurmctld (only it); it is started again at teardown if still down."""
    if os.geteuid() != 0:
        pytest.skip("stopping the lab's slurmctld needs root (the lab runs as root)")

    def stop() -> None:
        pid = _ctld_pid(slurm_lab)
        assert pid is not None, "the lab's slurmctld is not running"
        os.kill(pid, signal.SIGTERM)
        _wait(lambda: not _alive(pid), 30, "slurmctld to stop")

    yield stop
    if _ctld_pid(slurm_lab) is None:
        _start_ctld(slurm_lab)


def _worker(tmp_path: Path) -> subprocess.Popen[bytes]:
    """A real Celery worker on the sync queue, on this test's database."""
    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "PYTHONPATH": str(REPO),
    }
    log = open(tmp_path / "worker.log", "w")  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "worker", "-Q", "polls", "-c", "1", "-P", "solo",
         "-n", f"outage-{uuid.uuid4().hex[:8]}@%h", "--without-heartbeat", "--without-mingle",
         "--without-gossip", "-l", "INFO"],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip


def _sync_through_worker(cluster: Cluster, tmp_path: Path) -> Cluster:
    """Queue cluster_sync_task and wait until the worker has recorded a new sync."""
    from jobs.tasks import cluster_sync_task

    before = Cluster.objects.get(pk=cluster.pk).last_sync_at
    cluster_sync_task.apply_async(args=[cluster.pk])

    def done() -> Cluster | None:
        row = Cluster.objects.get(pk=cluster.pk)
        return row if row.last_sync_at is not None and row.last_sync_at != before else None

    try:
        return _wait(done, 90, "the worker's sync")
    except AssertionError:
        raise AssertionError((tmp_path / "worker.log").read_text()[-3000:]) from None


def _snapshot(cluster: Cluster) -> dict[str, Any]:
    return {
        "jobs": sorted(Job.objects.filter(cluster=cluster).values_list()),
        "transitions": sorted(JobTransition.objects.filter(job__cluster=cluster).values_list()),
        "nodes": sorted(
            Node.objects.filter(cluster=cluster).values_list(
                "pk", "slurm_state", "slurm_reason", "slurm_state_since"
            )
        ),
        "node_states": sorted(NodeState.objects.filter(node__cluster=cluster).values_list()),
    }


def test_a_controller_outage_changes_nothing_and_the_running_job_carries_on(
    slurm_lab: dict[str, str], ctld: Callable[[], None], tmp_path: Path
) -> None:
    from portal.celery import app

    names = expand_hostlist(slurm_lab["SLURM_LAB_NODES"])
    cluster = lab_cluster_create(slurm_lab)
    make_nodes(cluster, names, gpus=0)
    tag = uuid.uuid4().hex[:12]
    spec = JobSpec(name="outage", script="#!/bin/bash\nsleep 600\n", partition="debug", tag=tag)
    app.conf.task_always_eager = False
    app.control.purge()
    worker = _worker(tmp_path)
    job_id = None
    try:
        with cluster_backend(cluster) as backend:
            job_id = backend.submit_job(spec, as_user="alice")
            _wait(lambda: getattr(backend.get_job(job_id), "state", None) == "RUNNING", 60, "the job to run")
        # given the portal synced the running job (through the real worker)
        synced = _sync_through_worker(cluster, tmp_path)
        assert (synced.last_sync_error, synced.sync_failing_since) == ("", None)
        row = Job.objects.get(cluster=cluster, job_id=job_id)
        assert row.state == "RUNNING" and row.start_time is not None
        ok_at = synced.last_sync_ok_at
        before = _snapshot(cluster)
        assert {state for _pk, state, _r, _s in before["nodes"]} <= {"idle", "mixed", "allocated"}

        # when only slurmctld stops and the worker syncs
        ctld()
        down = _sync_through_worker(cluster, tmp_path)
        # then nothing changed, and the cluster shows the outage from this sync on
        assert _snapshot(cluster) == before
        assert down.last_sync_error == "sinfo: Slurm reported: Unspecified error"
        assert (down.sync_failing_since, down.last_sync_ok_at) == (down.last_sync_at, ok_at)

        # and the other reads against the down controller are retryable errors, never empty lists
        with cluster_backend(cluster) as backend:
            with pytest.raises(
                RetryableError, match=r"^squeue: Slurm reported: Failed while looking for jobs"
            ):
                backend.list_jobs()
            with pytest.raises(
                RetryableError,
                match=r"^scontrol show partition: slurm_load_partitions error: Unable to contact slurm controller",
            ):
                backend.list_partitions()
            with pytest.raises(
                RetryableError,
                match=r"^scontrol show config: slurm_load_ctl_conf error: Unable to contact slurm controller",
            ):
                backend.list_finished_jobs([job_id])
            # sacct does not ask slurmctld: without slurmdbd (the lab) it says so, a terminal error
            with pytest.raises(TerminalError) as sacct:
                backend._sacct_finished([job_id])  # type: ignore[attr-defined]
            assert (type(sacct.value), sacct.value.slurm_message) == (
                TerminalError,
                "Slurm accounting storage is disabled",
            )

        # when slurmctld is back (from its saved state) and its nodes answer again
        _start_ctld(slurm_lab)
        with cluster_backend(cluster) as backend:
            _wait(
                lambda: (
                    {n.name: n.display_state in ("idle", "mixed", "allocated") for n in backend.list_nodes()}
                    == dict.fromkeys(names, True)
                ),
                90,
                "the nodes to answer slurmctld again",
            )
        back = _sync_through_worker(cluster, tmp_path)
        # then the sync carries on: the same running job, with no extra transitions
        assert (back.last_sync_error, back.sync_failing_since) == ("", None)
        assert back.last_sync_ok_at == back.last_sync_at > down.last_sync_at
        after = Job.objects.get(cluster=cluster, job_id=job_id)
        assert (after.pk, after.state, after.start_time, after.end_time) == (
            row.pk,
            "RUNNING",
            row.start_time,
            None,
        )
        assert _snapshot(cluster)["transitions"] == before["transitions"]
        assert not Node.objects.filter(cluster=cluster, slurm_state__in=("missing", "")).exists()
    finally:
        if job_id is not None and _ctld_pid(slurm_lab) is not None:
            with cluster_backend(cluster) as backend:
                backend.cancel_job(job_id, as_user="alice")
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(20)
        app.conf.task_always_eager = True
