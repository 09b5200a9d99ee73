"""Benchmark: how long a killed worker's action takes to complete once a worker is available again.

    REDIS_URL=redis://127.0.0.1:6379/5 .venv/bin/python benchmarks/action_recovery.py [--runs 3]

Each run is tests/jobs/test_worker_killed.py's scenario with the deployment's settings (broker
visibility timeout 3600 s, lease 30 s, heartbeat 10 s, lease check every 10 s): a real Celery
worker and beat, a submit to the loopback Slurm lab (scripts/slurm-lab/, over SSH), the worker
SIGKILLed after sbatch answered and before the outcome was recorded, a new worker started at once.
Prints the time from the kill to the action's completion per run, its median and maximum, and
checks that each run submitted exactly one job.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import bench_db_name, bench_parser, setup_django  # noqa: E402

DB = "bench_rp_action_recovery"


def main() -> None:
    parser = bench_parser(__doc__, DB)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    setup_django(bench_db_name(DB))

    from django.conf import settings
    from django.contrib.auth.models import User
    from django.db import connection

    from jobs.backends import cluster_backend
    from jobs.models import ClusterAccount
    from portal.celery import app
    from portal.roles import user_set_role
    from tests.clusters import lab_cluster_create
    from tests.jobs.killed_worker import Processes, submit_killed_and_recovered
    from tests.lab import read_lab_env

    lab = read_lab_env()
    user, created = User.objects.get_or_create(username="bench-recovery")
    if created:
        user_set_role(user, "researcher")
    cluster = lab_cluster_create(lab)
    ClusterAccount.objects.create(user=user, cluster=cluster, username="alice")
    print(
        f"visibility timeout {settings.CELERY_BROKER_TRANSPORT_OPTIONS['visibility_timeout']} s, "
        f"lease {settings.PORTAL_ACTION_LEASE_S} s, heartbeat {settings.PORTAL_ACTION_HEARTBEAT_S} s, "
        f"lease check every {settings.PORTAL_ACTION_LEASE_CHECK_S} s",
        flush=True,
    )
    figures = []
    try:
        for run in range(args.runs):
            app.control.purge()
            with tempfile.TemporaryDirectory() as tmp:
                procs = Processes(Path(tmp), connection.settings_dict, settings.CELERY_BROKER_URL)
                try:
                    out = submit_killed_and_recovered(procs, user=user, cluster=cluster, name=f"bench-{run}")
                finally:
                    procs.stop_all()
            with cluster_backend(cluster) as backend:
                tagged = [j for j in backend.list_jobs(user="alice") if j.tag == str(out.action.pk)]
            print(
                f"run {run + 1}: {out.action.status} after {out.action.attempts} attempts, "
                f"kill to completion {out.kill_to_done_s:5.1f} s, jobs with its tag: {len(tagged)}",
                flush=True,
            )
            figures.append(out.kill_to_done_s)
    finally:
        app.control.purge()
        cluster.delete()
    print(f"kill to completion: median {statistics.median(figures):.1f} s, max {max(figures):.1f} s")


if __name__ == "__main__":
    main()
