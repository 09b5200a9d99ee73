"""My-jobs page and `/api/jobs/jobs/?user=…` with 100,000 jobs in the database.

    .venv/bin/python benchmarks/jobs_list.py [--jobs 100000] [--runs 30]

Uses its own database (rackpilot_bench_jobs or TEST_DATABASE_NAME, created and migrated if missing), fills it once
with bulk_create (5,000-row batches; 20 users, 5% of the jobs active), then measures the page
and the API with the Django test client: median / p95 server time and the query count.
"""

from __future__ import annotations

import datetime as dt
import random

from common import bench_db_name, bench_parser, measure, row, setup_django


def fill(n_jobs: int) -> None:
    from django.contrib.auth.models import User

    from inventory.models import Cluster
    from jobs.models import ClusterAccount, Job
    from portal.roles import roles_sync, user_set_role

    roles_sync()
    cluster, _ = Cluster.objects.get_or_create(name="bench", defaults={"backend": "simulator"})
    users = []
    for i in range(20):
        user, created = User.objects.get_or_create(username=f"user{i:02d}")
        if created:
            user.set_password("pw")
            user.save()
            user_set_role(user, "researcher")
            ClusterAccount.objects.create(user=user, cluster=cluster, username=f"user{i:02d}")
        users.append(user)
    have = Job.objects.filter(cluster=cluster).count()
    if have >= n_jobs:
        return
    rng = random.Random(1)
    now = dt.datetime.now(dt.UTC)
    batch = []
    for job_id in range(have + 1, n_jobs + 1):
        user = users[job_id % len(users)]
        active = rng.random() < 0.05
        start = now - dt.timedelta(minutes=rng.randint(1, 100_000))
        state = (
            rng.choice(["PENDING", "RUNNING"]) if active else rng.choice(["COMPLETED", "FAILED", "CANCELLED"])
        )
        batch.append(
            Job(
                cluster=cluster, job_id=job_id, name=f"train-{job_id}", user=user.username, owner=user,
                partition=rng.choice(["gpu", "debug"]), state=state,
                state_reason="Resources" if state == "PENDING" else "", nodes="node[1-2]", node_count=2,
                gpus=4, submit_time=start, start_time=None if state == "PENDING" else start,
                end_time=None if active else start + dt.timedelta(minutes=30), time_limit=60,
            )
        )  # fmt: skip
        if len(batch) == 5000:
            Job.objects.bulk_create(batch)
            batch = []
    if batch:
        Job.objects.bulk_create(batch)


def main() -> None:
    parser = bench_parser(__doc__, "rackpilot_bench_jobs")
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    setup_django(bench_db_name("rackpilot_bench_jobs"))
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    fill(args.jobs)
    with connection.cursor() as cur:
        cur.execute("ANALYZE jobs_job")
    queries: list[str] = []

    def count(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        queries.append(sql)
        return execute(sql, params, many, context)

    user = User.objects.get(username="user07")
    client = Client()
    client.force_login(user)
    from jobs.models import Job

    print(f"{Job.objects.count()} jobs, {Job.objects.filter(owner=user).count()} of them user07's")
    for label, url in [
        ("My jobs page /jobs/", "/jobs/"),
        ("My jobs page, active only", "/jobs/?status=active"),
        ("API /api/jobs/jobs/?user=user07", "/api/jobs/jobs/?user=user07"),
    ]:
        status = client.get(url).status_code
        queries.clear()
        with connection.execute_wrapper(count):
            client.get(url)
        figures = measure(lambda url=url: client.get(url), runs=args.runs)
        row(label, figures, f"{len(queries)} queries  (HTTP {status})")


if __name__ == "__main__":
    main()
