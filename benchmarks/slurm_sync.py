"""Benchmark: reconcile a squeue listing of 10,000 jobs and a sinfo listing of 1,000 nodes.

    TEST_DATABASE_NAME=bench_rp_jobs .venv/bin/python benchmarks/slurm_sync.py [--jobs 10000 --nodes 1000 --runs 5]

Generates v0.0.38 (Slurm 22.05) JSON, parses it with jobs.cluster.slurm_parsers and reconciles it
into a scratch PostgreSQL database (created and dropped by the script): cold (empty tables),
unchanged, unchanged in a new worker process (no memo of earlier listings: every record parsed,
every fingerprint computed), and with 1% of jobs and nodes changed. The parse keeps a ListingMemo
between listings as the Slurm backend of a cluster does (jobs.backends). Each run parses the JSON
text and reconciles it; prints the median and p95 of the parse, the reconcile and the two
together, and query counts (COPY statements included).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
os.environ.setdefault("TEST_DATABASE_NAME", "bench_rp_jobs")

import django  # noqa: E402

django.setup()
# the live push (a background thread started by the sync's on-commit signal) is measured by
# benchmarks/live_push.py; here it would only compete for the GIL with the next measurement
django.conf.settings.PORTAL_LIVE_AUTOFLUSH = False

from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext, get_runner  # noqa: E402

T0 = 1_796_000_000
STATES = ["RUNNING", "PENDING", "COMPLETED", "FAILED"]


def squeue_doc(n_jobs: int, n_nodes: int, changed: set[int] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
    jobs = []
    for i in range(1, n_jobs + 1):
        state = STATES[i % 4]
        if i in changed:
            state = "COMPLETED" if state != "COMPLETED" else "FAILED"
        jobs.append({
            "job_id": i, "name": f"train-{i}", "user_name": f"user{i % 50}", "account": "ml",
            "partition": "gpu", "job_state": state, "state_reason": "Priority" if state == "PENDING" else "None",
            "nodes": f"gpu{i % n_nodes:04d}" if state != "PENDING" else "", "node_count": 1,
            "tres_per_node": "gres:gpu:2", "tres_req_str": "cpu=8,mem=32G,node=1,billing=8,gres/gpu=2",
            "minimum_cpus_per_node": 8, "cpus_per_task": None, "submit_time": T0 + i,
            "start_time": T0 + i + 10 if state != "PENDING" else 0,
            "end_time": T0 + i + 100 if state in ("COMPLETED", "FAILED") else 0,
            "time_limit": 60, "exit_code": 256 if state == "FAILED" else 0,
            "standard_output": f"/home/user{i % 50}/slurm-%j.out", "current_working_directory": f"/home/user{i % 50}",
            "comment": "",
        })  # fmt: skip
    return {"meta": {"plugin": {"type": "openapi/v0.0.38"}, "Slurm": {"version": {"major": 22, "minor": 5, "micro": 8}}},
            "errors": [], "jobs": jobs}  # fmt: skip


def sinfo_doc(n_nodes: int, changed: set[int] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
    nodes = []
    for i in range(n_nodes):
        drained = i in changed
        nodes.append({
            "name": f"gpu{i:04d}", "hostname": f"gpu{i:04d}", "state": "mixed" if i % 3 else "idle",
            "state_flags": ["DRAIN"] if drained else [], "reason": "bench" if drained else "",
            "reason_set_by_user": "root" if drained else "", "reason_changed_at": T0 if drained else 0,
            "cpus": 64, "alloc_cpus": 8 if i % 3 else 0, "real_memory": 512000, "gres": "gpu:h100:8",
            "gres_used": "gpu:h100:2(IDX:0-1)" if i % 3 else "gpu:h100:0(IDX:N/A)", "partitions": ["gpu"],
            "boot_time": T0 - 86400,
        })  # fmt: skip
    return {"meta": {"plugin": {"type": "openapi/v0.0.38"}}, "errors": [], "nodes": nodes}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"database: {os.environ['TEST_DATABASE_NAME']} (TEST_DATABASE_NAME overrides bench_rp_jobs; "
        "created and dropped by the run)",
    )
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--nodes", type=int, default=1_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()

    runner = get_runner(django.conf.settings)(verbosity=0, interactive=False)
    old = runner.setup_databases()
    if os.environ.get("BENCH_GC_FREEZE", "1") == "1":
        from portal.gc import tune_gc

        tune_gc()  # as the Celery worker that runs the sync does after start-up (portal/celery.py)
    try:
        run(args.jobs, args.nodes, args.runs)
    finally:
        runner.teardown_databases(old)


def run(n_jobs: int, n_nodes: int, runs: int) -> None:
    from inventory.models import Cluster, Node
    from jobs import sync as jobs_sync
    from jobs.cluster.slurm_parsers import ListingMemo, parse_sinfo_json, parse_squeue_json
    from jobs.models import Job, JobTransition, NodeState
    from jobs.sync import reconcile

    cluster = Cluster.objects.create(name="bench")
    Node.objects.bulk_create([Node(hostname=f"gpu{i:04d}", cluster=cluster) for i in range(n_nodes)])
    changed_jobs = set(range(1, n_jobs + 1, 100))
    changed_nodes = set(range(0, n_nodes, 100))
    base_text = (json.dumps(squeue_doc(n_jobs, n_nodes)), json.dumps(sinfo_doc(n_nodes)))
    changed_text = (
        json.dumps(squeue_doc(n_jobs, n_nodes, changed_jobs)),
        json.dumps(sinfo_doc(n_nodes, changed_nodes)),
    )

    memo = ListingMemo()

    def new_process() -> None:
        nonlocal memo
        memo = ListingMemo()
        jobs_sync._fingerprints.clear()

    def clear() -> None:
        JobTransition.objects.all().delete()
        Job.objects.all().delete()
        NodeState.objects.all().delete()
        Node.objects.update(slurm_state="", slurm_reason="", slurm_state_since=None)
        new_process()

    figures: dict[str, dict[str, list[float]]] = {
        case: {"parse": [], "reconcile": [], "queries": []}
        for case in ("cold", "unchanged", "fresh", "changed")
    }

    def sync(case: str, texts: tuple[str, str]) -> Any:
        t = time.perf_counter()
        jobs = parse_squeue_json(texts[0], memo=memo.jobs)
        nodes = parse_sinfo_json(texts[1], memo=memo.nodes)
        parsed = time.perf_counter()
        with CaptureQueriesContext(connection) as ctx:
            r = reconcile(cluster, nodes=nodes, jobs=jobs)
        figures[case]["reconcile"].append(time.perf_counter() - parsed)
        figures[case]["parse"].append(parsed - t)
        figures[case]["queries"].append(len(ctx.captured_queries))
        return r

    for _ in range(runs):
        clear()
        r = sync("cold", base_text)
        assert r.created_jobs == n_jobs and len(r.node_ids) == n_nodes, (r.created_jobs, len(r.node_ids))
        r = sync("unchanged", base_text)
        assert not r.job_ids and not r.node_ids
        new_process()  # as in a worker process's first sync
        r = sync("fresh", base_text)
        assert not r.job_ids and not r.node_ids
        r = sync("changed", changed_text)
        assert len(r.job_ids) == len(changed_jobs) and len(r.node_ids) == len(changed_nodes), (
            len(r.job_ids),
            len(r.node_ids),
        )
        assert r.transitions == len(changed_jobs)
        reconcile(
            cluster,
            nodes=parse_sinfo_json(base_text[1], memo=memo.nodes),
            jobs=parse_squeue_json(base_text[0], memo=memo.jobs),
        )

    def ms(xs: list[float]) -> str:
        xs = sorted(xs)
        p95 = xs[min(len(xs) - 1, math.ceil(0.95 * len(xs)) - 1)]
        return f"{statistics.median(xs) * 1000:7.1f} {p95 * 1000:7.1f}"

    print(
        f"slurm sync benchmark: {n_jobs} jobs, {n_nodes} nodes, {runs} runs (PostgreSQL {connection.pg_version})"
    )
    print("  ms (median p95)          parse squeue+sinfo   reconcile     parse+reconcile  queries")
    labels = {
        "cold": "cold (all new)",
        "unchanged": "unchanged",
        "fresh": "unchanged, new process",
        "changed": f"1% changed ({len(changed_jobs)}j/{len(changed_nodes)}n)",
    }
    for case, f in figures.items():
        e2e = [a + b for a, b in zip(f["parse"], f["reconcile"], strict=True)]
        print(
            f"  {labels[case]:24s} {ms(f['parse'])}      {ms(f['reconcile'])}  {ms(e2e)}  "
            f"{statistics.median(f['queries']):5.0f}"
        )


if __name__ == "__main__":
    main()
