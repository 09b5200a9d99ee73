"""The sync's bulk writes (COPY / one UPDATE on PostgreSQL, Django bulk operations elsewhere) and
the fingerprint memo: rows changed by another writer still converge."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from inventory.models import Cluster, Node
from jobs import sync, sync_storage
from jobs.cluster import JobInfo, NodeInfo
from jobs.models import ClusterAccount, Job, JobTransition, NodeState
from jobs.sync import reconcile
from tests.clusters import make_nodes

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
T0 = dt.datetime(2026, 11, 29, 8, 0, tzinfo=dt.UTC)


@pytest.fixture
def cluster(db) -> Cluster:
    cluster = Cluster.objects.create(name="storage")
    make_nodes(cluster, ["node1", "node2"], gpus=0)
    return cluster


#: the tests that exercise the generic (bulk_create / bulk_update) path when run on SQLite. The
#: constant query counts are PostgreSQL's (one statement per table): SQLite's bulk_update splits
#: rows into batches by its parameter limit, so its count grows with the rows (the demo's scale).
GENERIC = "round_trip or converges"


def test_the_generic_path_runs_on_sqlite_the_demos_database(tmp_path) -> None:
    """The generic tests again, in a pytest whose database is SQLite (as the demo's), not a
    PostgreSQL connection told it is SQLite."""
    env = {k: v for k, v in os.environ.items() if k != "TEST_DATABASE_NAME"}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'demo.sqlite3'}"
    env["RP_EXPECT_DB_VENDOR"] = "sqlite"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", __file__, "-k", GENERIC, "-q", "-p", "no:cacheprovider", "-o", "addopts=", "--nomigrations",
         "--import-mode=importlib", "-W", "ignore::pytest.PytestAssertRewriteWarning"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert re.search(r"^2 passed, \d+ deselected", proc.stdout, re.M), proc.stdout[-1000:]


def _job(job_id: int, state: str = "RUNNING", **kw) -> JobInfo:
    return JobInfo(job_id=job_id, name=f"j{job_id}", user="alice", state=state, nodes="node1", **kw)


def test_insert_and_update_rows_round_trip(cluster) -> None:
    # the path this run takes: COPY on PostgreSQL, bulk_create/bulk_update in the SQLite run
    assert connection.vendor == os.environ.get("RP_EXPECT_DB_VENDOR", "postgresql")
    # given two NodeState rows (JSON, datetime and null values) and two Job rows inserted in bulk
    n1, n2 = Node.objects.filter(cluster=cluster).order_by("slurm_name")
    sync_storage.insert_rows(
        NodeState,
        ("node_id", "state", "flags", "partitions", "boot_time", "cpus"),
        [(n1.pk, "idle", ["DRAIN"], ["gpu"], T0, 8), (n2.pk, "mixed", [], [], None, None)],
    )
    ids = sync_storage.insert_rows(
        Job,
        ("cluster_id", "job_id", "state", "name", "first_seen", "submit_time"),
        [(cluster.pk, 7, "PENDING", 'it\'s "quoted"\ttab', T0, T0), (cluster.pk, 8, "RUNNING", "", T0, None)],
        ids=True,
    )
    # when some columns of them are updated
    sync_storage.update_rows(NodeState, ("flags", "boot_time", "cpus"), [(n1.pk, [], None, 16)])
    sync_storage.update_rows(Job, ("state", "exit_code", "end_time"), [(ids[1], "FAILED", 3, T0)])
    # then the returned ids are the rows' in order, and each row holds exactly what was written
    assert list(Job.objects.filter(pk__in=ids).order_by("job_id").values_list("pk", flat=True)) == ids
    assert list(
        Job.objects.order_by("job_id").values_list("job_id", "state", "name", "exit_code", "end_time")
    ) == [
        (7, "PENDING", 'it\'s "quoted"\ttab', None, None),
        (8, "FAILED", "", 3, T0),
    ]
    assert Job.objects.get(job_id=7).script == ""
    assert list(
        NodeState.objects.order_by("node__slurm_name").values_list("flags", "partitions", "boot_time", "cpus")
    ) == [
        ([], ["gpu"], None, 16),
        ([], [], None, None),
    ]


def test_fingerprint_is_unchanged_from_the_stored_one() -> None:
    # given the job values of a listing; the fingerprints already in databases were computed as
    # blake2b-8 of repr() of the values with datetimes as epoch seconds, and must stay so
    values = sync._job_values(_job(1, submit_time=T0, exit_code=0), {"alice": 3}, {})
    plain = [v.timestamp() if isinstance(v, dt.datetime) else v for v in values]
    old = int.from_bytes(hashlib.blake2b(repr(plain).encode(), digest_size=8).digest(), "big", signed=True)
    assert sync._fingerprint(values) == old


def test_a_row_changed_by_another_writer_converges_although_the_listing_is_unchanged(cluster) -> None:
    # given a synced listing (the fingerprint memo now holds it)
    jobs = [_job(1), _job(2, "PENDING")]
    reconcile(cluster, nodes=[], jobs=jobs)
    # when another writer creates job 3 and rewrites job 1 (as a submit does: fingerprint 0)
    Job.objects.create(cluster=cluster, job_id=3, state="PENDING", name="submitted")
    Job.objects.filter(job_id=1).update(state="PENDING", name="other", sync_hash=0)
    result = reconcile(cluster, nodes=[], jobs=[*jobs, _job(3, "RUNNING")])
    # then both rows hold what Slurm lists again, with their transitions, and only they changed
    rows = {j.job_id: j for j in Job.objects.all()}
    assert {k: (r.state, r.name) for k, r in rows.items()} == {
        1: ("RUNNING", "j1"),
        2: ("PENDING", "j2"),
        3: ("RUNNING", "j3"),
    }
    assert sorted(result.job_ids) == sorted([rows[1].pk, rows[3].pk])
    assert result.created_jobs == 0 and result.transitions == 2
    assert list(JobTransition.objects.filter(job=rows[3]).values_list("from_state", "to_state")) == [
        ("PENDING", "RUNNING")
    ]
    # and a second pass writes nothing
    again = reconcile(cluster, nodes=[], jobs=[*jobs, _job(3, "RUNNING")])
    assert (again.job_ids, again.transitions) == ([], 0)


def test_node_and_job_changes_take_the_same_number_of_queries_for_2_and_40_rows(db) -> None:
    def run(n: int) -> int:
        cluster = Cluster.objects.create(name=f"q{n}")
        make_nodes(cluster, [f"q{n}n{i}" for i in range(n)], gpus=0)
        nodes = [NodeInfo(name=f"q{n}n{i}", state="idle") for i in range(n)]
        jobs = [_job(i) for i in range(1, n + 1)]
        reconcile(cluster, nodes=nodes, jobs=jobs)
        nodes = [replace(x, flags=frozenset({"DRAIN"}), reason="r") for x in nodes]
        jobs = [replace(j, state="COMPLETED", exit_code=0) for j in jobs[1:]]  # job 1 vanishes
        with CaptureQueriesContext(connection) as ctx:
            result = reconcile(cluster, nodes=nodes, jobs=jobs)
        assert (len(result.node_ids), len(result.job_ids), result.transitions) == (n, n, n)
        return len(ctx.captured_queries)

    assert run(2) == run(40)


def test_cold_sync_writes_rows_and_transitions_in_a_fixed_number_of_queries(cluster) -> None:
    # given 300 new jobs and both nodes
    nodes = [NodeInfo(name="node1", state="idle"), NodeInfo(name="node2", state="mixed")]
    with CaptureQueriesContext(connection) as ctx:
        result = reconcile(cluster, nodes=nodes, jobs=[_job(i) for i in range(1, 301)])
    # then every row is there with its first transition
    assert (result.created_jobs, result.transitions, len(result.node_ids)) == (300, 300, 2)
    assert sorted(result.job_ids) == sorted(Job.objects.values_list("pk", flat=True))
    assert JobTransition.objects.filter(from_state="", to_state="RUNNING").count() == 300
    assert NodeState.objects.count() == 2
    # savepoint, 6 reads and id range, 4 COPY/UPDATE, node history, cluster, release
    assert len(ctx.captured_queries) == 13


def test_an_account_mapped_between_two_syncs_of_the_same_parsed_jobs_gives_them_their_owner(
    cluster, researcher_user
) -> None:
    # given a synced listing whose user has no portal account yet (the memo holds these JobInfo)
    jobs = [_job(1), _job(2, "PENDING")]
    reconcile(cluster, nodes=[], jobs=jobs)
    assert set(Job.objects.values_list("owner_id", flat=True)) == {None}
    # when alice is mapped to a portal user and the very same parsed jobs are synced again
    ClusterAccount.objects.create(cluster=cluster, user=researcher_user, username="alice")
    result = reconcile(cluster, nodes=[], jobs=jobs)
    # then both rows now belong to her, and nothing else changed
    assert set(Job.objects.values_list("owner_id", flat=True)) == {researcher_user.pk}
    assert (len(result.job_ids), result.transitions) == (2, 0)
    # and a third pass writes nothing
    again = reconcile(cluster, nodes=[], jobs=jobs)
    assert (again.job_ids, again.transitions) == ([], 0)
