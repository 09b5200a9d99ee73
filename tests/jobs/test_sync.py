"""Reconciling Slurm listings (recorded 22.05 output and newer shapes) into the database."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from inventory.models import Cluster, Node
from jobs.cluster import JobInfo, NodeInfo, RetryableError
from jobs.cluster.slurm_parsers import parse_sinfo_json, parse_squeue_json
from jobs.models import ClusterAccount, Job, JobTransition, NodeState
from jobs.sync import cluster_sync, cluster_synced, expand_hostlist, reconcile
from tests.clusters import make_nodes

FIXTURES = Path(__file__).resolve().parents[1] / "cluster" / "fixtures"
pytestmark = pytest.mark.django_db


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.fixture
def lab_like(db) -> Cluster:
    cluster = Cluster.objects.create(name="lab-like")
    make_nodes(cluster, ["node1", "node2", "node3", "node4"], gpus=0)
    return cluster


def test_hostlists_expand() -> None:
    assert expand_hostlist("gpu[01-03,07],tt01,a[1-2]b[8-9]") == [
        "gpu01",
        "gpu02",
        "gpu03",
        "gpu07",
        "tt01",
        "a1b8",
        "a1b9",
        "a2b8",
        "a2b9",
    ]
    assert expand_hostlist("") == []
    assert expand_hostlist(None) == []


def test_recorded_22_05_listing_is_reconciled(lab_like, researcher_user) -> None:
    # given the recorded squeue/sinfo output of the real lab (Slurm 22.05, v0.0.38) and alice mapped
    ClusterAccount.objects.create(user=researcher_user, cluster=lab_like, username="alice")
    nodes = parse_sinfo_json(_fixture("sinfo_v0.0.38.json"))
    jobs = parse_squeue_json(_fixture("squeue_v0.0.38.json"))
    # when reconciled
    result = reconcile(lab_like, nodes=nodes, jobs=jobs)
    # then every node's Slurm state and reason is on the inventory node and in NodeState
    states = dict(Node.objects.filter(cluster=lab_like).values_list("slurm_name", "slurm_state"))
    assert states == {"node1": "mixed", "node2": "draining", "node3": "drained", "node4": "reboot"}
    n3 = NodeState.objects.get(node__slurm_name="node3", node__cluster=lab_like)
    assert (n3.state, n3.flags) == ("idle", ["DRAIN"])
    assert Node.objects.get(cluster=lab_like, slurm_name="node3").slurm_reason == n3.reason != ""
    assert sorted(result.node_ids) == sorted(
        Node.objects.filter(cluster=lab_like).values_list("pk", flat=True)
    )
    # and every job is there with its state, owner (alice mapped, bob not) and exit code
    rows = {j.job_id: j for j in Job.objects.filter(cluster=lab_like)}
    assert sorted(rows) == list(range(1, 11))
    assert (rows[1].state, rows[1].exit_code, rows[1].owner, rows[1].tag) == (
        "FAILED",
        3,
        researcher_user,
        "abc",
    )
    assert (rows[2].state, rows[2].state_reason, rows[2].owner) == ("PENDING", "PartitionNodeLimit", None)
    assert rows[4].node_names == ",node1," and rows[4].state == "RUNNING"
    assert result.created_jobs == 10 and result.transitions == 10
    assert Job.objects.filter(cluster=lab_like, node_names__contains=",node1,").count() == 3


def test_newer_shapes_are_reconciled(db) -> None:
    # given a cluster with gpu01-03 and tt01, and v0.0.40/v0.0.41 output (state lists, {set,infinite,number})
    cluster = Cluster.objects.create(name="newer")
    make_nodes(cluster, ["gpu01", "gpu02", "gpu03", "tt01"], gpus=0)
    nodes = parse_sinfo_json(_fixture("sinfo_nodes_v0.0.41.json"))
    jobs = parse_squeue_json(_fixture("squeue_v0.0.40.json"))
    reconcile(cluster, nodes=nodes, jobs=jobs)
    states = dict(Node.objects.filter(cluster=cluster).values_list("slurm_name", "slurm_state"))
    assert states == {"gpu01": "drained", "gpu02": "draining", "gpu03": "reboot", "tt01": "alloc"}
    rows = {j.job_id: j for j in Job.objects.filter(cluster=cluster)}
    assert {k: r.state for k, r in rows.items()} == {
        812: "PENDING",
        813: "FAILED",
        814: "CANCELLED",
        815: "PENDING",
    }
    assert rows[813].node_names == ",gpu01,gpu02,"
    assert rows[812].time_limit == 60


def _job(job_id: int, state: str = "RUNNING", **kw) -> JobInfo:
    return JobInfo(
        job_id=job_id, name=f"j{job_id}", user="alice", state=state, partition="gpu", nodes="node1", **kw
    )


def _node(name: str, state: str = "idle", **kw) -> NodeInfo:
    return NodeInfo(name=name, state=state, **kw)


def test_only_changes_are_written_and_transitions_recorded(lab_like) -> None:
    nodes = [_node(f"node{i}") for i in range(1, 5)]
    jobs = [_job(i, "PENDING", state_reason="Priority") for i in range(1, 6)]
    reconcile(lab_like, nodes=nodes, jobs=jobs)
    # when nothing changed: no rows are written, nothing is reported
    with CaptureQueriesContext(connection) as unchanged:
        result = reconcile(lab_like, nodes=nodes, jobs=jobs)
    assert (result.node_ids, result.job_ids, result.transitions) == ([], [], 0)
    writes = [q["sql"] for q in unchanged.captured_queries if q["sql"].startswith(("UPDATE", "INSERT"))]
    assert len(writes) == 1 and 'UPDATE "inventory_cluster"' in writes[0]
    # when job 2 starts and node3 drains
    jobs[1] = replace(jobs[1], state="RUNNING", state_reason=None)
    nodes[2] = replace(nodes[2], flags=frozenset({"DRAIN"}), reason="bad fan")
    with CaptureQueriesContext(connection) as changed:
        result = reconcile(lab_like, nodes=nodes, jobs=jobs)
    # then exactly those rows changed, with one transition, in a fixed number of queries
    job2 = Job.objects.get(cluster=lab_like, job_id=2)
    node3 = Node.objects.get(cluster=lab_like, slurm_name="node3")
    assert (result.job_ids, result.node_ids, result.transitions) == ([job2.pk], [node3.pk], 1)
    assert (job2.state, job2.state_reason) == ("RUNNING", "")
    assert (node3.slurm_state, node3.slurm_reason) == ("drained", "bad fan")
    assert list(JobTransition.objects.filter(job=job2).values_list("from_state", "to_state")) == [
        ("", "PENDING"),
        ("PENDING", "RUNNING"),
    ]
    assert len(changed.captured_queries) <= 12


def test_query_count_does_not_grow_with_rows(lab_like) -> None:
    def run(n: int) -> int:
        jobs = [_job(i) for i in range(1, n + 1)]
        reconcile(lab_like, nodes=[], jobs=jobs)
        changed = [replace(j, state="COMPLETED", exit_code=0) for j in jobs]
        with CaptureQueriesContext(connection) as ctx:
            reconcile(lab_like, nodes=[], jobs=changed)
        Job.objects.all().delete()
        return len(ctx.captured_queries)

    assert run(2) == run(50)


def test_a_vanished_active_job_is_not_left_running(lab_like) -> None:
    reconcile(lab_like, nodes=[], jobs=[_job(1), _job(2, "COMPLETED")])
    reconcile(lab_like, nodes=[], jobs=[])
    rows = dict(Job.objects.values_list("job_id", "state"))
    assert rows == {1: "UNKNOWN", 2: "COMPLETED"}
    assert JobTransition.objects.filter(job__job_id=1).last().reason == "no longer reported by Slurm"


def test_unknown_and_missing_nodes(lab_like) -> None:
    result = reconcile(
        lab_like,
        nodes=[_node("node1"), _node("node2"), _node("node3"), _node("node4"), _node("ghost")],
        jobs=[],
    )
    assert result.unknown_nodes == ["ghost"]
    reconcile(lab_like, nodes=[_node("node1"), _node("node2"), _node("node3")], jobs=[])
    node4 = Node.objects.get(cluster=lab_like, slurm_name="node4")
    assert (node4.slurm_state, node4.slurm_reason) == ("missing", "node4 not reported by Slurm")


def test_unreachable_cluster_is_marked_stale(sim_cluster, sim) -> None:
    assert cluster_sync(sim_cluster).ok
    sim.inject("controller_unreachable", count=1)
    result = cluster_sync(sim_cluster)
    sim_cluster.refresh_from_db()
    assert (result.ok, result.error) == (False, "Unable to contact slurm controller (connect failure)")
    assert sim_cluster.last_sync_error == result.error
    assert sim_cluster.last_sync_ok_at < sim_cluster.last_sync_at


def test_sync_signal_carries_changed_ids(sim_cluster, django_capture_on_commit_callbacks) -> None:
    received = []

    def listener(sender, cluster, node_ids, job_ids, **kw):
        received.append((cluster.pk, sorted(node_ids), job_ids))

    cluster_synced.connect(listener)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            cluster_sync(sim_cluster)
    finally:
        cluster_synced.disconnect(listener)
    all_nodes = sorted(sim_cluster.nodes.values_list("pk", flat=True))
    assert received == [(sim_cluster.pk, all_nodes, [])]


def test_sync_errors_raised_by_a_backend_are_typed(sim_cluster) -> None:
    class Down:
        def list_nodes(self):
            raise RetryableError("ssh: connect to 127.0.0.1 port 1: Connection refused")

    result = cluster_sync(sim_cluster, backend=Down())  # type: ignore[arg-type]
    assert (result.ok, result.error) == (False, "ssh: connect to 127.0.0.1 port 1: Connection refused")
