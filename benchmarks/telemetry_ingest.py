"""Telemetry ingest and series-query benchmark (prints figures; not a test).

    .venv/bin/python benchmarks/telemetry_ingest.py [--samples 200000] [--query-rows 10000000]

Creates (and drops at the end) the database ``rackpilot_bench`` on the PostgreSQL of
DATABASE_URL, migrates it, builds an inventory of --nodes nodes x 8 cards and measures, in the
same run and on the same table:
  raw COPY      binary COPY of (ts, series_id, value) rows straight into monitoring_sample, in
                10,000-row and in --batch-row transactions (the service's batch size)
  service       telemetry_ingest_samples() with --batch samples per call (validation, series
                resolution, COPY, latest-value upsert, alert evaluation, events), warm series cache
  endpoint      POST /api/monitoring/ingest/ (JSON, 1,000 samples per request) through Django's
                test client (in-process: no network, no server threads)
  series query  /api/monitoring/series/ selector for one card-metric over 24 h at 10 s, with
                --query-rows raw rows stored (generated in SQL)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_DB = "rackpilot_bench"
METRICS = [
    "temperature_c",
    "power_w",
    "utilization_pct",
    "memory_used_bytes",
    "sm_clock_mhz",
    "fan_pct",
    "memory_utilization_pct",
    "mem_clock_mhz",
    "pcie_link_gen",
    "pcie_link_width",
    "energy_j",
    "ecc_corrected_total",
]


def setup_django(base_url: str) -> None:
    import psycopg

    admin_url = base_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB}")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")
    os.environ["DATABASE_URL"] = base_url.rsplit("/", 1)[0] + "/" + BENCH_DB
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
    import django

    django.setup()
    from django.conf import settings

    settings.ALLOWED_HOSTS = ["*"]
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def drop_db(base_url: str) -> None:
    import psycopg
    from django.db import connections

    connections.close_all()
    with psycopg.connect(base_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")


def build_inventory(nodes: int) -> list[tuple[str, str]]:
    from inventory.models import Card, CardModel, Node

    model = CardModel.objects.create(vendor="NVIDIA", name="H100", tdp_w=700)
    Node.objects.bulk_create([Node(hostname=f"gpu{i:04d}") for i in range(nodes)], batch_size=2000)
    node_ids = dict(Node.objects.values_list("hostname", "id"))
    cards, targets = [], []
    for host, nid in node_ids.items():
        for c in range(8):
            uuid = f"GPU-{nid:08x}-{c:04x}-0000-0000-000000000000"
            cards.append(Card(node_id=nid, card_model=model, slot=str(c), gpu_uuid=uuid))
            targets.append((host, uuid))
    Card.objects.bulk_create(cards, batch_size=5000)
    return targets


def samples_for(targets: list[tuple[str, str]], ts: dt.datetime) -> list[dict[str, object]]:
    iso = ts.isoformat()
    return [
        {"ts": iso, "node": host, "card": uuid, "metric": m, "value": 40.0 + (i % 30)}
        for i, (host, uuid) in enumerate(targets)
        for m in METRICS
    ]


def bench_raw_copy(rows: list[tuple[dt.datetime, int, float]], batch: int = 10_000) -> float:
    from django.db import connection, transaction

    from monitoring import storage

    with transaction.atomic():
        storage.partitions_ensure({r[0].date() for r in rows[:1]})
    t = time.perf_counter()
    for i in range(0, len(rows), batch):
        with (
            transaction.atomic(),
            connection.cursor() as cur,
            cur.cursor.copy(
                "COPY monitoring_sample (ts, series_id, value) FROM STDIN (FORMAT BINARY)"
            ) as copy,
        ):
            copy.set_types(["timestamptz", "int4", "float8"])
            for row in rows[i : i + batch]:
                copy.write_row(row)
    return len(rows) / (time.perf_counter() - t)


def _service_worker(
    batches: list[list[dict[str, object]]], ready: Any, go: Any, done: Any
) -> None:  # pragma: no cover - runs in a child process
    from monitoring import services

    ready.release()
    go.wait()
    n = 0
    for batch in batches:
        n += services.telemetry_ingest_samples(batch).stored
    done.put(n)


def bench_service_parallel(
    targets: list[tuple[str, str]], start: dt.datetime, ticks: int, args: argparse.Namespace
) -> float:
    """Samples/s of --workers forked processes ingesting disjoint nodes' batches at the same time."""
    import multiprocessing

    from django.db import connections

    ctx = multiprocessing.get_context("fork")
    share = -(-len(targets) // args.workers)
    jobs = []
    for w in range(args.workers):
        mine = targets[w * share : (w + 1) * share]
        batches = []
        for k in range(ticks):
            tick = samples_for(mine, start - dt.timedelta(seconds=10 * k))
            batches += [tick[i : i + args.batch] for i in range(0, len(tick), args.batch)]
        jobs.append(batches)
    connections.close_all()  # each child opens its own connection
    ready, go, done = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_service_worker, args=(b, ready, go, done)) for b in jobs]
    for p in procs:
        p.start()
    for _p in procs:
        ready.acquire()
    t = time.perf_counter()
    go.set()
    n = sum(done.get() for _p in procs)
    elapsed = time.perf_counter() - t
    for p in procs:
        p.join()
    return n / elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=192_000, help="samples per measured path")
    ap.add_argument("--batch", type=int, default=1000, help="samples per service call")
    ap.add_argument("--workers", type=int, default=2, help="processes for the parallel service figure")
    ap.add_argument("--query-rows", type=int, default=10_000_000)
    ap.add_argument("--keep", action="store_true", help="keep the rackpilot_bench database")
    args = ap.parse_args()
    base_url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/rackpilot")
    setup_django(base_url)
    try:
        run(args)
    finally:
        if not args.keep:
            drop_db(base_url)


def run(args: argparse.Namespace) -> None:
    from django.db import connection
    from django.test import Client

    from monitoring import selectors, services
    from monitoring.models import Series
    from monitoring.services import node_token_create

    print(f"PostgreSQL {connection.cursor().connection.info.server_version}, {os.cpu_count()} CPUs")
    t = time.perf_counter()
    targets = build_inventory(args.nodes)
    print(f"inventory: {args.nodes} nodes x 8 cards in {time.perf_counter() - t:.1f}s")
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    per_tick = len(targets) * len(METRICS)
    ticks = max(1, args.samples // per_tick)

    # warm-up: create every series once (the first sight of a card costs a bulk get_or_create)
    t = time.perf_counter()
    first = samples_for(targets, now - dt.timedelta(minutes=30))
    for i in range(0, len(first), 10_000):
        services.telemetry_ingest_samples(first[i : i + 10_000])
    print(
        f"first sight of {Series.objects.count()} series: {len(first) / (time.perf_counter() - t):,.0f} samples/s"
    )

    # (0) raw COPY of the same shape of rows
    sids = list(Series.objects.values_list("id", flat=True))
    rows = [(now - dt.timedelta(minutes=20, seconds=10 * k), sid, 41.0) for k in range(ticks) for sid in sids]
    raw = bench_raw_copy(rows)
    rows = [(ts - dt.timedelta(seconds=5), sid, v) for ts, sid, v in rows]
    raw_small = bench_raw_copy(rows, batch=args.batch)

    # (a) the service, --batch samples per call
    t = time.perf_counter()
    n = 0
    for k in range(ticks):
        batch = samples_for(targets, now - dt.timedelta(minutes=10, seconds=10 * k))
        for i in range(0, len(batch), args.batch):
            n += services.telemetry_ingest_samples(batch[i : i + args.batch]).stored
    service = n / (time.perf_counter() - t)

    # (a2) the same service path in --workers processes at once (how a deployment scales it: the
    # database works for one worker while another runs Python); each worker its own nodes
    parallel = bench_service_parallel(targets, now - dt.timedelta(minutes=8), ticks, args)

    # (b) the HTTP endpoint, 1,000 samples per request (JSON encoding done before timing)
    from inventory.models import Node

    _tok, _key = node_token_create(node=Node.objects.get(hostname=targets[0][0]), user=None)
    from django.contrib.auth.models import User

    admin = User.objects.create_superuser("bench", password="x")  # noqa: S106
    client = Client()
    client.force_login(admin)
    bodies = []
    for k in range(ticks):
        batch = samples_for(targets, now - dt.timedelta(minutes=5, seconds=10 * k))
        bodies += [json.dumps(batch[i : i + 1000]) for i in range(0, len(batch), 1000)]
    t = time.perf_counter()
    n = 0
    for body in bodies:
        resp = client.post("/api/monitoring/ingest/", data=body, content_type="application/json")
        assert resp.status_code == 202, resp.content[:300]
        n += resp.json()["stored"]
    endpoint = n / (time.perf_counter() - t)

    print(f"\ningest ({n:,} samples per path, {len(sids):,} series)")
    print(f"  raw COPY (10k-row batches)        {raw:>12,.0f} samples/s")
    print(f"  raw COPY ({args.batch}-row batches)        {raw_small:>12,.0f} samples/s")
    print(
        f"  service ({args.batch}-sample batches)     {service:>12,.0f} samples/s  ({service / raw:.0%} of COPY)"
    )
    print(
        f"  service, {args.workers} worker processes       {parallel:>12,.0f} samples/s  ({parallel / raw:.0%} of COPY)"
    )
    print(
        f"  HTTP endpoint (1,000 per request)  {endpoint:>12,.0f} samples/s  ({endpoint / raw:.0%} of COPY)"
    )
    print(
        f"  vs raw COPY in {args.batch}-row batches: service {service / raw_small:.0%}, "
        f"endpoint {endpoint / raw_small:.0%}"
    )
    print(
        f"  target 1,000 nodes x 8,000 cards @10 s ~ 100,000 samples/s: service {service / 100_000:.2f}x, "
        f"{args.workers} workers {parallel / 100_000:.2f}x, endpoint {endpoint / 100_000:.2f}x"
    )

    # series query with many rows stored: generated in SQL, 10 s apart, one day
    rows_wanted = args.query_rows
    per_series = 8640
    n_series = max(1, rows_wanted // per_series)
    day_start = (now - dt.timedelta(days=1)).replace(hour=0, minute=0, second=0)
    from django.db import transaction

    from monitoring import storage

    with transaction.atomic():
        storage.partitions_ensure([day_start.date(), (day_start + dt.timedelta(days=1)).date()])
    extra = Series.objects.bulk_create(
        [
            Series(
                node_id=Node.objects.get(hostname=targets[0][0]).pk,
                card_ref=f"0000:{i // 256:02x}:{i % 256:02x}.0",
                metric="power_w",
            )
            for i in range(n_series)
        ],
        batch_size=5000,
    )
    lo, hi = extra[0].pk, extra[-1].pk
    t = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO monitoring_sample (ts, series_id, value) "
            # series-major order: each series' (series_id, ts) index entries arrive in order
            "SELECT %s::timestamptz + (k * interval '10 seconds'), s, random() * 700 "
            "FROM generate_series(%s, %s) s CROSS JOIN LATERAL generate_series(0, %s) k",
            [day_start, lo, hi, per_series - 1],
        )
        cur.execute("ANALYZE monitoring_sample")
        cur.execute("SELECT count(*) FROM monitoring_sample")
        total = cur.fetchone()[0]
    print(f"\nseries query: {total:,} rows stored (generated in {time.perf_counter() - t:.0f}s)")
    target = Series.objects.get(pk=(lo + hi) // 2)
    times = []
    for _ in range(7):
        t = time.perf_counter()
        result = selectors.series_query(
            metric="power_w",
            card=target.card_ref,
            node=str(target.node_id),
            start=day_start,
            end=day_start + dt.timedelta(days=1),
            step=10,
        )
        times.append(time.perf_counter() - t)
    points = len(result.series[0]["points"])
    print(
        f"  one card-metric, 24 h at 10 s ({points} points, {result.as_dict()['resolution']}): "
        f"median {statistics.median(times) * 1000:.1f} ms, min {min(times) * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()
