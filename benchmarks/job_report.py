"""The job report of a 64-node, 512-card, 24 h job from stored telemetry (target: < 300 ms).

    .venv/bin/python benchmarks/job_report.py [--runs 20] [--raw-hours 0]

Uses its own database (rackpilot_bench_report or TEST_DATABASE_NAME, created and migrated if
missing) and fills it once: 64 nodes with 8 H100 each, 7 metrics per card and 3 per node, as the
rollup task stores telemetry sampled every 10 s (1 h and 1 min buckets of 360 and 6 samples), 2,000
telemetry events on the job's nodes (link flaps, Xids) and the job (FAILED, with an NCCL timeout in
its output). ``--raw-hours N`` also writes N hours of the raw 10 s samples (COPY) and recomputes their
rollups with the real rollup code first (slow: 1.2 M rows per hour).

Prints the median / p95 server time of ``job_report_get`` (what the page and the API compute) with
its query count, of the whole API request (``GET /api/jobs/jobs/{id}/report/``) and of the job page's
report fragment (``GET /jobs/{id}/report/``, 512 card rows) through the Django test client, and as an
in-run baseline one plain GROUP BY over the same series' rollups.
"""

from __future__ import annotations

import datetime as dt
import random

from common import bench_db_name, bench_parser, measure, row, setup_django

NODES, CARDS = 64, 8
CARD_METRICS = ("utilization_pct", "memory_used_bytes", "memory_total_bytes", "power_w", "temperature_c",
                "throttle_hw_thermal_slowdown", "throttle_sw_power_cap")  # fmt: skip
NODE_METRICS = ("disk_iops", "net_util_pct", "node_power_w")
HOURS = 24
NCCL = (
    "[rank3]:[E ProcessGroupNCCL.cpp:563] [Rank 3] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for "
    "600020 milliseconds before timing out.\n"
)


def _value(metric: str, rng: random.Random) -> float:
    return {
        "utilization_pct": rng.uniform(60, 100),
        "memory_used_bytes": rng.uniform(40, 78) * 2**30,
        "memory_total_bytes": 80 * 2**30,
        "power_w": rng.uniform(300, 690),
        "temperature_c": rng.uniform(50, 80),
        "disk_iops": rng.uniform(100, 3000),
        "net_util_pct": rng.uniform(5, 60),
        "node_power_w": rng.uniform(6000, 10000),
    }.get(metric, 0.0)


def fill(raw_hours: int) -> int:
    from django.contrib.auth.models import User
    from django.db import connection, transaction

    from inventory.models import Card, CardModel, Cluster, Node
    from jobs.models import Job
    from monitoring import storage
    from monitoring.models import Event, Series
    from portal.roles import roles_sync, user_set_role

    roles_sync()
    cluster, _ = Cluster.objects.get_or_create(name="bench-report", defaults={"backend": "simulator"})
    user, created = User.objects.get_or_create(username="bench-admin")
    if created:
        user_set_role(user, "admin")
    existing = Job.objects.filter(cluster=cluster, job_id=1).first()
    if existing is not None:
        return existing.pk
    end = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0) - dt.timedelta(hours=1)
    start = end - dt.timedelta(hours=HOURS)
    rng = random.Random(1)
    model, _ = CardModel.objects.get_or_create(vendor="NVIDIA", name="H100 SXM 80GB", defaults={"tdp_w": 700})
    with transaction.atomic():
        nodes = Node.objects.bulk_create(
            Node(hostname=f"bn{i:03d}", slurm_name=f"bn{i:03d}", cluster=cluster) for i in range(NODES)
        )
        cards = Card.objects.bulk_create(
            Card(node=n, card_model=model, slot=str(g), pci_bus_id=f"0000:{0x18 + g:02x}:00.0")
            for n in nodes
            for g in range(CARDS)
        )
        series = Series.objects.bulk_create(
            [Series(node_id=c.node_id, card=c, card_ref=c.pci_bus_id, metric=m) for c in cards for m in CARD_METRICS]
            + [Series(node=n, metric=m, labels="device=nvme0n1" if m == "disk_iops" else "")
               for n in nodes for m in NODE_METRICS]
        )  # fmt: skip
        hourly, minutely = [], []
        for s in series:
            for h in range(HOURS):
                bucket = start + dt.timedelta(hours=h)
                v = _value(s.metric, rng)
                hourly.append(
                    (s.pk, bucket, v * 0.8, v, v * 1.1 if s.metric != "memory_total_bytes" else v, 360)
                )
        with connection.cursor() as cur:
            with cur.connection.cursor().copy(
                "COPY monitoring_rollup_1h (series_id, bucket, min, avg, max, count) FROM STDIN"
            ) as copy:
                for r in hourly:
                    copy.write_row(r)
            # the first and the last hour at 1 min (what a window that does not fall on the hour reads)
            for edge in (start, end - dt.timedelta(hours=1)):
                for s in series:
                    for m in range(60):
                        v = _value(s.metric, rng)
                        minutely.append((s.pk, edge + dt.timedelta(minutes=m), v * 0.9, v, v, 6))
            with cur.connection.cursor().copy(
                "COPY monitoring_rollup_1m (series_id, bucket, min, avg, max, count) FROM STDIN"
            ) as copy:
                for r in minutely:
                    copy.write_row(r)
        kinds = ("link_down", "link_up", "xid", "pcie_aer")
        Event.objects.bulk_create(
            Event(ts=start + dt.timedelta(seconds=rng.uniform(0, HOURS * 3600)), node_id=c.node_id, card=c,
                  card_ref=c.pci_bus_id, kind=(k := kinds[i % 4]), severity="warning",
                  message=f"{k} on {c.pci_bus_id}", data={"xid": 13} if k == "xid" else {})
            for i, c in enumerate(rng.choices(cards, k=2000))
        )  # fmt: skip
        if raw_hours:
            storage.partitions_ensure({(start + dt.timedelta(hours=h)).date() for h in range(raw_hours + 1)})
            rows = [
                (start + dt.timedelta(seconds=t), s.pk, _value(s.metric, rng))
                for t in range(0, raw_hours * 3600, 10)
                for s in series
            ]
            storage.samples_write(rows)
            storage.rollup_compute(60, start, start + dt.timedelta(hours=raw_hours))
            storage.rollup_compute(3600, start, start + dt.timedelta(hours=raw_hours))
        names = ",".join(n.slurm_name for n in nodes)
        with connection.cursor() as cur:  # as autovacuum would after a day of ingest
            cur.execute(
                "ANALYZE monitoring_rollup_1h, monitoring_rollup_1m, monitoring_series, monitoring_event"
            )
        job = Job.objects.create(
            cluster=cluster, job_id=1, name="llm-pretrain", user="bench", owner=user, state="FAILED",
            exit_code=1, nodes=f"bn[000-{NODES - 1:03d}]", node_names=f",{names},", node_count=NODES,
            gpus=CARDS, start_time=start + dt.timedelta(minutes=17), end_time=end - dt.timedelta(minutes=23),
            time_limit=48 * 60,
        )  # fmt: skip
    return job.pk


def main() -> None:
    parser = bench_parser(__doc__, "rackpilot_bench_report")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--raw-hours", type=int, default=0)
    args = parser.parse_args()
    setup_django(bench_db_name("rackpilot_bench_report"))
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from jobs.models import Job
    from jobs.report.selectors import job_report_get
    from monitoring.models import Series
    from portal.celery import app

    app.conf.task_always_eager = True  # the page's output refresh runs in-process (once: the job ended)
    pk = fill(args.raw_hours)
    job = Job.objects.select_related("cluster").get(pk=pk)
    report = job_report_get(job, output=NCCL)
    cards = len(report.cards)
    print(f"job: {job.node_count} nodes, {cards} cards, {(job.end_time - job.start_time)} window, "
          f"resolution read {report.resolution} s, {len(report.events)} events, "
          f"top cause: {report.diagnosis[0].code if report.diagnosis else '-'}")  # fmt: skip
    with CaptureQueriesContext(connection) as q:
        job_report_get(job, output=NCCL)
    ids = list(Series.objects.filter(node__cluster=job.cluster).values_list("id", flat=True))

    def baseline() -> None:
        with connection.cursor() as cur:
            cur.execute(
                "SELECT series_id, AVG(avg) FROM monitoring_rollup_1h WHERE series_id = ANY(%s) "
                "AND bucket >= %s AND bucket < %s GROUP BY series_id",
                [ids, job.start_time, job.end_time],
            )
            cur.fetchall()

    row("baseline: one GROUP BY over the job's series", measure(baseline, runs=args.runs),
        f"{len(ids)} series")  # fmt: skip
    row("job_report_get (page and API)", measure(lambda: job_report_get(job, output=NCCL), runs=args.runs),
        f"{len(q.captured_queries)} queries")  # fmt: skip
    client = Client()
    client.force_login(User.objects.get(username="bench-admin"))
    url = f"/api/jobs/jobs/{pk}/report/"
    assert client.get(url).status_code == 200
    row("GET /api/jobs/jobs/{id}/report/ (whole request)", measure(lambda: client.get(url), runs=args.runs))
    page = f"/jobs/{pk}/report/"
    assert client.get(page).status_code == 200
    row("GET /jobs/{id}/report/ (the page's report, HTML)", measure(lambda: client.get(page), runs=args.runs))


if __name__ == "__main__":
    main()
