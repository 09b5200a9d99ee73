"""Active jobs that Slurm purged before the portal saw them finish get their final state from
accounting (sacct or the jobcomp log) instead of becoming UNKNOWN."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from inventory.models import Cluster
from jobs.backends import cluster_backend
from jobs.cluster import JobInfo, JobSpec, RetryableError, SimulatedCluster, TerminalError
from jobs.models import Job, JobTransition
from jobs.sync import cluster_sync, reconcile
from tests.clusters import lab_cluster_create, make_nodes

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


class _Forgetful:
    """Delegates to a backend, but its queue view lacks ``hidden`` (as after MinJobAge), and it
    records the list_finished_jobs calls."""

    def __init__(
        self, inner: Any, hidden: set[int] = frozenset(), records: list[JobInfo] | None = None
    ) -> None:  # type: ignore[assignment]
        self.inner, self.hidden, self.records = inner, set(hidden), records
        self.asked: list[list[int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def list_jobs(self, *, user: str | None = None) -> list[JobInfo]:
        return [j for j in self.inner.list_jobs(user=user) if j.job_id not in self.hidden]

    def list_finished_jobs(self, job_ids: list[int]) -> list[JobInfo]:
        self.asked.append(list(job_ids))
        if self.records is not None:
            return [r for r in self.records if r.job_id in job_ids]
        return self.inner.list_finished_jobs(job_ids)


def _job(job_id: int, state: str = "RUNNING", **kw: Any) -> JobInfo:
    return JobInfo(job_id=job_id, name=f"j{job_id}", user="alice", state=state, nodes="node1", **kw)


def _rows(cluster: Cluster) -> dict[int, tuple[Any, ...]]:
    return {
        r[0]: r[1:]
        for r in Job.objects.filter(cluster=cluster).values_list("job_id", "state", "exit_code", "end_time")
    }


def test_a_purged_simulator_job_gets_its_final_state(sim_cluster: Cluster, sim: SimulatedCluster) -> None:
    # given a running job of alice that the portal saw running
    spec = JobSpec(name="short", script="#!/bin/bash\nsleep 30\nexit 3\n", tag=uuid.uuid4().hex[:12])
    job_id = sim.submit_job(spec, as_user="alice")
    sim.advance(2)
    assert cluster_sync(sim_cluster, backend=sim).ok
    assert _rows(sim_cluster)[job_id][0] == "RUNNING"
    # when it finishes and is purged from the queue while the portal is not syncing
    sim.advance(40)
    end = sim.get_job(job_id).end_time  # type: ignore[union-attr]
    sim.advance(sim.min_job_age + 5)
    assert sim.get_job(job_id) is None
    result = cluster_sync(sim_cluster, backend=sim)
    # then the row carries the final state, exit code and end time, with a normal transition
    assert result.ok and result.transitions == 1
    assert _rows(sim_cluster)[job_id] == ("FAILED", 3, end)
    assert list(
        JobTransition.objects.filter(job__job_id=job_id).values_list("from_state", "to_state", "reason")
    ) == [("", "RUNNING", ""), ("RUNNING", "FAILED", "NonZeroExitCode")]


def test_only_vanished_jobs_are_looked_up_and_the_rest_become_unknown(
    sim_cluster: Cluster, sim: SimulatedCluster
) -> None:
    # given three running rows; Slurm still lists 1, has a record for 2, knows nothing of 3
    reconcile(sim_cluster, nodes=[], jobs=[_job(1), _job(2, start_time=T0), _job(3)])
    record = _job(2, "COMPLETED", start_time=T0, end_time=T0.replace(hour=10), exit_code=0, gpus=0)
    backend = _Forgetful(sim, records=[record])
    backend.list_jobs = lambda **kw: [_job(1)]  # type: ignore[method-assign]
    # when synced
    cluster_sync(sim_cluster, backend=backend)  # type: ignore[arg-type]
    # then one call asked for exactly the vanished ids; 2 is final, 3 is UNKNOWN, 1 untouched
    assert backend.asked == [[2, 3]]
    rows = _rows(sim_cluster)
    assert rows == {
        1: ("RUNNING", None, None),
        2: ("COMPLETED", 0, T0.replace(hour=10)),
        3: ("UNKNOWN", None, None),
    }
    assert JobTransition.objects.filter(job__job_id=2).last().reason == "final state from Slurm accounting"  # type: ignore[union-attr]
    assert JobTransition.objects.filter(job__job_id=3).last().reason == "no longer reported by Slurm"  # type: ignore[union-attr]
    # when synced again with nothing vanished: no lookup at all
    cluster_sync(sim_cluster, backend=backend)  # type: ignore[arg-type]
    assert backend.asked == [[2, 3]]


def test_a_lookup_that_cannot_reach_slurm_leaves_the_job_until_it_can(
    sim_cluster: Cluster, sim: SimulatedCluster, caplog: Any
) -> None:
    # given a running job that the queue no longer lists, and accounting unreachable
    reconcile(sim_cluster, nodes=[], jobs=[_job(5)])
    backend = _Forgetful(sim)
    backend.list_jobs = lambda **kw: []  # type: ignore[method-assign]

    def down(job_ids: list[int]) -> list[JobInfo]:
        raise RetryableError("Unable to contact slurm controller")

    backend.list_finished_jobs = down  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="jobs.sync"):
        result = cluster_sync(sim_cluster, backend=backend)  # type: ignore[arg-type]
    # then the job is left as it was (no transition), and the sync says why
    assert (result.ok, result.transitions, result.job_ids) == (True, 0, [])
    assert _rows(sim_cluster)[5] == ("RUNNING", None, None)
    assert JobTransition.objects.filter(job__job_id=5).count() == 1  # its creation only
    assert "final state of 1 jobs not read yet" in caplog.text
    sim_cluster.refresh_from_db()
    assert sim_cluster.last_sync_warnings == (
        "final state of 1 jobs not read yet: Unable to contact slurm controller"
    )
    # and once accounting answers, the job is completed from it with one transition
    end = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)
    backend = _Forgetful(sim, records=[_job(5, "COMPLETED", exit_code=0, end_time=end)])
    backend.list_jobs = lambda **kw: []  # type: ignore[method-assign]
    result = cluster_sync(sim_cluster, backend=backend)  # type: ignore[arg-type]
    assert (result.ok, result.transitions) == (True, 1)
    assert _rows(sim_cluster)[5] == ("COMPLETED", 0, end)
    sim_cluster.refresh_from_db()
    assert sim_cluster.last_sync_warnings == ""


def test_a_terminal_lookup_failure_falls_back_to_unknown(
    sim_cluster: Cluster, sim: SimulatedCluster, caplog: Any
) -> None:
    reconcile(sim_cluster, nodes=[], jobs=[_job(5)])
    backend = _Forgetful(sim)
    backend.list_jobs = lambda **kw: []  # type: ignore[method-assign]

    def disabled(job_ids: list[int]) -> list[JobInfo]:
        raise TerminalError("sacct: Slurm accounting storage is disabled")

    backend.list_finished_jobs = disabled  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="jobs.sync"):
        result = cluster_sync(sim_cluster, backend=backend)  # type: ignore[arg-type]
    assert (result.ok, result.transitions) == (True, 1)
    assert _rows(sim_cluster)[5][0] == "UNKNOWN"
    assert "final state of 1 vanished jobs unavailable" in caplog.text


def test_finished_records_do_not_change_the_reconcile_query_count(sim_cluster: Cluster) -> None:
    def run(n: int, finished: bool) -> int:
        jobs = [_job(i) for i in range(1, n + 1)]
        reconcile(sim_cluster, nodes=[], jobs=jobs)
        records = [replace(j, state="COMPLETED", exit_code=0, end_time=T0) for j in jobs] if finished else []
        with CaptureQueriesContext(connection) as ctx:
            reconcile(sim_cluster, nodes=[], jobs=[], finished=records)
        Job.objects.all().delete()
        return len(ctx.captured_queries)

    assert run(2, True) == run(40, True) == run(40, False)


@pytest.mark.slurm
def test_a_lab_job_purged_from_squeue_gets_its_final_state(slurm_lab: dict[str, str]) -> None:
    # given a lab job of alice that exits 3, and the portal's row saying RUNNING
    cluster = lab_cluster_create(slurm_lab)
    make_nodes(cluster, ["node1", "node2", "node3", "node4"])
    spec = JobSpec(
        name="purged",
        script="#!/bin/bash\nsleep 1\nexit 3\n",
        tag=uuid.uuid4().hex[:12],
        time_limit_minutes=5,
    )
    with cluster_backend(cluster) as real:
        job_id = real.submit_job(spec, as_user="alice")
        done = None
        for _ in range(80):
            done = real.get_job(job_id)
            if done is not None and done.finished:
                break
            time.sleep(0.25)
        assert done is not None and done.finished
        reconcile(cluster, nodes=[], jobs=[replace(done, state="RUNNING", end_time=None, exit_code=None)])
        # when synced with a queue view that no longer lists it (MinJobAge cannot be shortened live)
        backend = _Forgetful(real, hidden={job_id})
        result = cluster_sync(cluster, backend=backend)  # type: ignore[arg-type]
    # then the lab's completion log supplied the final state, exit code and end time
    assert result.ok and backend.asked == [[job_id]]
    assert _rows(cluster)[job_id] == ("FAILED", 3, done.end_time)
    assert JobTransition.objects.filter(job__job_id=job_id, job__cluster=cluster).last().to_state == "FAILED"  # type: ignore[union-attr]
