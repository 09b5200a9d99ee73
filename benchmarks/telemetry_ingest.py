"""Telemetry ingest and series-query benchmark (prints figures; not a test).

    TEST_DATABASE_NAME=rp_bench_ingest .venv/bin/python benchmarks/telemetry_ingest.py \
        [--samples 192000] [--grow-rows 10500000] [--query-rows 10000000] [--profile FILE]

Creates (and drops at the end) the database TEST_DATABASE_NAME (default ``rackpilot_bench``) on
the PostgreSQL of BENCH_DATABASE_URL (or DATABASE_URL), migrates it, builds an inventory of
--nodes nodes x 8 cards and measures, in the same run and on the same table, with samples of one
UTC day (yesterday, so that the day's partition can be grown before the clock moves on):
  raw COPY      binary COPY of (ts, series_id, value) rows straight into monitoring_sample, in
                10,000-row and in --batch-row transactions (the service's batch size)
  service       telemetry_ingest_samples() with --batch samples per call (validation, bounds,
                deduplication, series resolution, COPY, latest values, alert evaluation,
                events), warm series cache; the latest values are written behind the batches
                (monitoring.storage), and every measured path or turn ends by waiting for them
  endpoint      POST /api/monitoring/ingest/ (JSON, 1,000 samples per request) through Django's
                test client (in-process: no network, no server threads)
then grows that day's partition past --grow-rows rows (generated in SQL for the same series,
time-major like real ingest) and measures raw COPY, service and endpoint again;
  series query  /api/monitoring/series/ selector for one card-metric over 24 h at 10 s, with
                --query-rows raw rows stored (generated in SQL; 0 skips it)
The line to read is "vs raw COPY in <batch>-row batches, interleaved": after each round, raw COPY,
service and endpoint again, taking turns of --turn batches over the same ticks, so that each sees
the same load of a shared machine (the separate figures before it compare paths measured minutes
apart, which a busy neighbour can skew either way). --profile FILE writes a cProfile of
the service phase (pstats) and prints its top functions; --without-latest adds an interleaved round
with the latest-value write left out (a diagnostic: what that write costs the service).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_DB = os.environ.get("TEST_DATABASE_NAME") or "rackpilot_bench"
# metric -> a plausible value (the service refuses implausible ones); i varies it a little
METRICS: dict[str, float] = {
    "temperature_c": 40.0,
    "power_w": 350.0,
    "utilization_pct": 50.0,
    "memory_used_bytes": 40e9,
    "sm_clock_mhz": 1755.0,
    "fan_pct": 40.0,
    "memory_utilization_pct": 30.0,
    "mem_clock_mhz": 2619.0,
    "pcie_link_gen": 5.0,
    "pcie_link_width": 16.0,
    "energy_j": 1e6,
    "ecc_corrected_total": 0.0,
}
VARIES = frozenset({"temperature_c", "power_w", "utilization_pct", "fan_pct", "memory_utilization_pct"})


def _server_url() -> str:
    url = os.environ.get("BENCH_DATABASE_URL") or os.environ.get(
        "DATABASE_URL", "postgres://postgres@127.0.0.1:5432/rackpilot"
    )
    return url.rstrip("/") if os.environ.get("BENCH_DATABASE_URL") else url.rsplit("/", 1)[0]


def setup_django() -> None:
    import psycopg

    server = _server_url()
    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}"')
        conn.execute(f'CREATE DATABASE "{BENCH_DB}"')
    os.environ["DATABASE_URL"] = f"{server}/{BENCH_DB}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
    import django

    django.setup()
    from django.conf import settings

    settings.ALLOWED_HOSTS = ["*"]
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def drop_db() -> None:
    import psycopg
    from django.db import connections

    connections.close_all()
    with psycopg.connect(_server_url() + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')


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
        {"ts": iso, "node": host, "card": uuid, "metric": m, "value": v + (i % 30 if m in VARIES else 0)}
        for i, (host, uuid) in enumerate(targets)
        for m, v in METRICS.items()
    ]


@contextlib.contextmanager
def inputs_frozen() -> Iterator[None]:
    """The inputs built before the clock starts (up to 576 batches of sample dicts and bodies)
    are moved out of the garbage collector's sight while a path is measured: a full collection
    would otherwise walk them all and charge the path for the benchmark's own heap."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


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
            # packed exactly as the ingest service packs its batches (one struct call): the baseline
            # is the fastest COPY of these rows, not a slower one the service is compared against
            copy.write(storage._copy_binary(rows[i : i + batch]))
    return len(rows) / (time.perf_counter() - t)


def _service_worker(
    batches: list[list[dict[str, object]]], ready: Any, go: Any, done: Any
) -> None:  # pragma: no cover - runs in a child process
    from monitoring import services, storage

    ready.release()
    go.wait()
    n = 0
    for batch in batches:
        n += services.telemetry_ingest_samples(batch).stored
    storage.latest_flush()  # the latest values written behind count too
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
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"database: {BENCH_DB} (TEST_DATABASE_NAME overrides rackpilot_bench; dropped at the end)",
    )
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=192_000, help="samples per measured path")
    ap.add_argument("--batch", type=int, default=1000, help="samples per service call")
    ap.add_argument("--workers", type=int, default=2, help="processes for the parallel service figure")
    ap.add_argument(
        "--grow-rows",
        type=int,
        default=10_500_000,
        help="rows in the day's partition for the second round (0: none)",
    )
    ap.add_argument(
        "--query-rows", type=int, default=10_000_000, help="rows for the series query (0: skip it)"
    )
    ap.add_argument(
        "--turn",
        type=int,
        default=8,
        help="batches per turn in the interleaved measurement of the three paths",
    )
    ap.add_argument("--profile", metavar="FILE", help="cProfile the first service round into FILE (pstats)")
    ap.add_argument(
        "--without-latest",
        action="store_true",
        help="after the first interleaved round, one more with the latest-value write left out "
        "(a diagnostic of what that write costs the service; not a path the product runs)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = ap.parse_args()
    setup_django()
    try:
        run(args)
    finally:
        if not args.keep:
            drop_db()


class Bench:
    """The inventory, the series and the paths measured, for one round at a time."""

    def __init__(self, args: argparse.Namespace) -> None:
        from django.contrib.auth.models import User
        from django.test import Client

        from monitoring import services
        from monitoring.models import Series

        self.args = args
        self.cpu: dict[str, list[float]] = {}
        t = time.perf_counter()
        self.targets = build_inventory(args.nodes)
        print(f"inventory: {args.nodes} nodes x 8 cards in {time.perf_counter() - t:.1f}s")
        per_tick = len(self.targets) * len(METRICS)
        self.ticks = max(1, args.samples // per_tick)
        # every sample of the run falls in one UTC day: yesterday, from 12:00
        today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        self.day = today - dt.timedelta(days=1)
        self.base = self.day + dt.timedelta(hours=12)
        # warm-up: create every series once (the first sight of a card costs a bulk get_or_create)
        t = time.perf_counter()
        first = samples_for(self.targets, self.base - dt.timedelta(hours=1))
        for i in range(0, len(first), 10_000):
            services.telemetry_ingest_samples(first[i : i + 10_000])
        print(
            f"first sight of {Series.objects.count()} series: "
            f"{len(first) / (time.perf_counter() - t):,.0f} samples/s"
        )
        self.sids = list(Series.objects.order_by("id").values_list("id", flat=True))
        admin = User.objects.create_superuser("bench", password="x")  # noqa: S106
        self.client = Client()
        self.client.force_login(admin)
        # warm-up of the HTTP path, as the service's was above: a process's first requests (lazy
        # imports, URL resolver, DRF's settings, the session) are not its steady state
        warm = samples_for(self.targets, self.base - dt.timedelta(minutes=55))[:8_000]  # a time no path uses
        for i in range(0, len(warm), 1000):
            body = json.dumps(warm[i : i + 1000])
            resp = self.client.post("/api/monitoring/ingest/", data=body, content_type="application/json")
            assert resp.status_code == 202, resp.content[:300]

    def at(self, minutes: float, k: int) -> dt.datetime:
        return self.base + dt.timedelta(minutes=minutes, seconds=10 * k)

    def raw_copy(self, minutes: float, batch: int) -> float:
        rows = [(self.at(minutes, k), sid, 41.0) for k in range(self.ticks) for sid in self.sids]
        with inputs_frozen():
            return bench_raw_copy(rows, batch=batch)

    def service(self, minutes: float) -> float:
        from monitoring import services, storage

        batches = []
        for k in range(self.ticks):
            tick = samples_for(self.targets, self.at(minutes, k))
            batches += [tick[i : i + self.args.batch] for i in range(0, len(tick), self.args.batch)]
        profiler = None
        if self.args.profile and minutes < 0:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        with inputs_frozen():
            t = time.perf_counter()
            n = sum(services.telemetry_ingest_samples(b).stored for b in batches)
            storage.latest_flush()  # the latest values written behind count too
            elapsed = time.perf_counter() - t
        if profiler is not None:
            import pstats

            profiler.disable()
            profiler.dump_stats(self.args.profile)
            pstats.Stats(self.args.profile).sort_stats("cumulative").print_stats(40)
        return n / elapsed

    def endpoint(self, minutes: float) -> float:
        from monitoring import storage

        bodies = []
        for k in range(self.ticks):
            tick = samples_for(self.targets, self.at(minutes, k))
            bodies += [json.dumps(tick[i : i + 1000]) for i in range(0, len(tick), 1000)]
        with inputs_frozen():
            t = time.perf_counter()
            n = 0
            for body in bodies:
                resp = self.client.post("/api/monitoring/ingest/", data=body, content_type="application/json")
                assert resp.status_code == 202, resp.content[:300]
                n += resp.json()["stored"]
            storage.latest_flush()
            return n / (time.perf_counter() - t)

    def interleaved(self, minutes: float, turn: int) -> dict[str, float]:
        """Samples/s of raw COPY (--batch-row transactions), the service and the endpoint, the
        three taking turns of ``turn`` batches each (in a rotating order) over the same ticks:
        each path sees the same machine load, so their ratios hold on a shared, noisy machine."""
        from monitoring import services, storage

        batch = self.args.batch
        raw: list[list[tuple[dt.datetime, int, float]]] = []
        service: list[list[dict[str, object]]] = []
        bodies: list[str] = []
        for k in range(self.ticks):
            raw += _chunks([(self.at(minutes, k), sid, 41.0) for sid in self.sids], batch)
            service += _chunks(samples_for(self.targets, self.at(minutes + 1, k)), batch)
            bodies += [
                json.dumps(c) for c in _chunks(samples_for(self.targets, self.at(minutes + 2, k)), 1000)
            ]

        def run_raw(chunk: list[list[tuple[dt.datetime, int, float]]]) -> int:
            rows = [r for b in chunk for r in b]
            bench_raw_copy(rows, batch=batch)
            return len(rows)

        # a turn ends when its latest values are written too: the writer's work is the turn's,
        # not the next path's
        def run_service(chunk: list[list[dict[str, object]]]) -> int:
            n = sum(services.telemetry_ingest_samples(b).stored for b in chunk)
            storage.latest_flush()
            return n

        def run_endpoint(chunk: list[str]) -> int:
            n = 0
            for body in chunk:
                resp = self.client.post("/api/monitoring/ingest/", data=body, content_type="application/json")
                assert resp.status_code == 202, resp.content[:300]
                n += resp.json()["stored"]
            storage.latest_flush()
            return n

        paths: list[tuple[str, list[Any], Callable[[Any], int]]] = [
            ("raw_small", _chunks(raw, turn), run_raw),
            ("service", _chunks(service, turn), run_service),
            ("endpoint", _chunks(bodies, turn * batch // 1000 or 1), run_endpoint),
        ]
        spent = {name: 0.0 for name, _c, _r in paths}
        stored = {name: 0 for name, _c, _r in paths}
        cpu = {name: [0.0, 0.0, 0.0] for name, _c, _r in paths}
        with inputs_frozen():
            for i in range(max(len(chunks) for _n, chunks, _r in paths)):
                for name, chunks, run in paths[i % 3 :] + paths[: i % 3]:
                    if i < len(chunks):
                        before = _cpu_now()
                        t = time.perf_counter()
                        stored[name] += run(chunks[i])
                        spent[name] += time.perf_counter() - t
                        cpu[name] = [a + b - c for a, b, c in zip(cpu[name], _cpu_now(), before, strict=True)]
        self.cpu = {name: [c / stored[name] * batch for c in cpu[name]] for name in cpu}
        return {name: stored[name] / spent[name] for name in spent}

    def partition_rows(self) -> int:
        from django.db import connection

        from monitoring import storage

        with connection.cursor() as cur:
            cur.execute(f'SELECT count(*) FROM "{storage.partition_name(self.day.date())}"')
            return int(cur.fetchone()[0])

    def grow(self, rows: int) -> None:
        """Fill the day's partition with rows of the measured series before the measured times,
        tick after tick (all series at one time, then the next), as ingest does."""
        from django.db import connection

        per_tick = len(self.sids)
        ticks = -(-rows // per_tick)
        step = 10 if ticks * 10 < 10 * 3600 else max(1, (10 * 3600) // ticks)
        t = time.perf_counter()
        lo, hi = self.sids[0], self.sids[-1]
        with connection.cursor() as cur:
            for k0 in range(0, ticks, 20):
                cur.execute(
                    "INSERT INTO monitoring_sample (ts, series_id, value) "
                    "SELECT %s::timestamptz + (k * %s * interval '1 second'), s, 40 + random() * 30 "
                    "FROM generate_series(%s, %s) k CROSS JOIN generate_series(%s, %s) s ORDER BY k, s",
                    [self.day, step, k0, min(ticks, k0 + 20) - 1, lo, hi],
                )
            cur.execute("ANALYZE monitoring_sample")
        print(
            f"\ngrew the day's partition to {self.partition_rows():,} rows "
            f"({ticks} ticks of {per_tick:,} series) in {time.perf_counter() - t:.0f}s"
        )


@contextlib.contextmanager
def latest_left_out() -> Iterator[None]:
    """The ingest service without its latest-value write (--without-latest): what it would reach
    if that write cost nothing. Samples, alerts and events are written as always."""
    from monitoring import storage

    later, upsert = storage.latest_later, storage.latest_upsert

    def not_written(*columns: Any, then: Any = None) -> None:
        if then is not None:
            then()

    def reads_only(rows: Any, *, reads: Any = ()) -> list[list[tuple[Any, ...]]]:
        return upsert([], reads=reads)

    storage.latest_later, storage.latest_upsert = not_written, reads_only  # type: ignore[assignment]
    try:
        yield
    finally:
        storage.latest_later, storage.latest_upsert = later, upsert


def _cpu_now() -> tuple[float, float, float]:
    """CPU seconds so far of this process (its threads: the caller's and the latest-value writer's),
    of Django's connection's server process and of the latest-value writer's (its UPDATE): read
    from /proc when the server runs on this machine, else zeros for the servers."""
    from django.db import connection

    from monitoring import storage

    connection.ensure_connection()
    writer = next((c for c in storage._writer._conns.values() if not c.closed), None)
    pids = [connection.connection.info.backend_pid, writer.info.backend_pid if writer is not None else 0]
    return (time.process_time(), *(_proc_cpu(pid) for pid in pids))  # type: ignore[return-value]


def _proc_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _chunks(items: list[Any], size: int) -> list[Any]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def report(label: str, args: argparse.Namespace, figures: dict[str, float], n: int, series: int) -> None:
    raw, raw_small = figures.get("raw"), figures["raw_small"]
    service, endpoint = figures["service"], figures["endpoint"]
    print(f"\ningest, {label} ({n:,} samples per path, {series:,} series)")
    if raw:
        print(f"  raw COPY (10k-row batches)        {raw:>12,.0f} samples/s")
    print(f"  raw COPY ({args.batch}-row batches)        {raw_small:>12,.0f} samples/s")
    big = raw or raw_small
    print(
        f"  service ({args.batch}-sample batches)     {service:>12,.0f} samples/s  ({service / big:.0%} of COPY)"
    )
    if "parallel" in figures:
        parallel = figures["parallel"]
        print(
            f"  service, {args.workers} worker processes       {parallel:>12,.0f} samples/s  "
            f"({parallel / big:.0%} of COPY)"
        )
    print(
        f"  HTTP endpoint (1,000 per request)  {endpoint:>12,.0f} samples/s  ({endpoint / big:.0%} of COPY)"
    )
    print(
        f"  vs raw COPY in {args.batch}-row batches: service {service / raw_small:.0%}, "
        f"endpoint {endpoint / raw_small:.0%}"
    )
    print(
        f"  target 1,000 nodes x 8,000 cards @10 s ~ 100,000 samples/s: service {service / 100_000:.2f}x, "
        f"endpoint {endpoint / 100_000:.2f}x"
    )


def run(args: argparse.Namespace) -> None:
    from django.db import connection

    print(f"PostgreSQL {connection.cursor().connection.info.server_version}, {os.cpu_count()} CPUs")
    bench = Bench(args)
    n = bench.ticks * len(bench.sids)
    # round 1: the day's partition holds the warm-up tick only
    figures = {
        "raw": bench.raw_copy(-50, 10_000),
        "raw_small": bench.raw_copy(-40, args.batch),
        "service": bench.service(-30),
    }
    # the same service path in --workers processes at once (how a deployment scales it: the
    # database works for one worker while another runs Python); each worker its own nodes
    figures["parallel"] = bench_service_parallel(bench.targets, bench.at(-20, 0), bench.ticks, args)
    figures["endpoint"] = bench.endpoint(-10)
    report(f"day's partition {bench.partition_rows():,} rows", args, figures, n, len(bench.sids))
    interleaved(bench, -8, args, n)
    if args.without_latest:
        with latest_left_out():
            print("  without the latest-value write (diagnostic):")
            interleaved(bench, -5, args, n)
    # round 2: the day's partition past --grow-rows (a raw COPY baseline again, minutes before)
    if args.grow_rows:
        bench.grow(args.grow_rows)
        grown = {
            "raw_small": bench.raw_copy(10, args.batch),
            "service": bench.service(20),
            "endpoint": bench.endpoint(30),
        }
        grown["raw_small_after"] = bench.raw_copy(40, args.batch)
        report(f"day's partition grown to {bench.partition_rows():,} rows", args, grown, n, len(bench.sids))
        print(
            f"  (raw COPY in {args.batch}-row batches after the round: {grown['raw_small_after']:,.0f} samples/s)"
        )
        interleaved(bench, 50, args, n)
    if args.query_rows:
        series_query(bench, args.query_rows)


def interleaved(bench: Bench, minutes: float, args: argparse.Namespace, n: int) -> None:
    f = bench.interleaved(minutes, args.turn)
    print(
        f"  interleaved in turns of {args.turn} batches ({n:,} samples per path, day's partition "
        f"{bench.partition_rows():,} rows): raw COPY ({args.batch}-row batches) {f['raw_small']:,.0f}/s, "
        f"service {f['service']:,.0f}/s, endpoint {f['endpoint']:,.0f}/s"
    )
    print(
        f"  vs raw COPY in {args.batch}-row batches, interleaved: service {f['service'] / f['raw_small']:.0%}, "
        f"endpoint {f['endpoint'] / f['raw_small']:.0%}"
    )
    # where each path's time goes: on two cores the three processes of a service batch share them
    parts = ", ".join(
        f"{label} {py * 1e3:.2f} + {main * 1e3:.2f} + {side * 1e3:.2f} ms"
        for label, (py, main, side) in (
            ("raw COPY", bench.cpu["raw_small"]),
            ("service", bench.cpu["service"]),
            ("endpoint", bench.cpu["endpoint"]),
        )
    )
    print(
        f"  CPU per {args.batch} samples (this process + its server process + the latest-value writer's): {parts}"
    )


def series_query(bench: Bench, rows_wanted: int) -> None:
    """Series query with many rows stored: generated in SQL, 10 s apart, one day (the day before)."""
    from django.db import connection, transaction

    from inventory.models import Node
    from monitoring import selectors, storage
    from monitoring.models import Series

    per_series = 8640
    n_series = max(1, rows_wanted // per_series)
    day_start = bench.day - dt.timedelta(days=1)
    with transaction.atomic():
        storage.partitions_ensure([day_start.date()])
    node_id = Node.objects.get(hostname=bench.targets[0][0]).pk
    extra = Series.objects.bulk_create(
        [
            Series(node_id=node_id, card_ref=f"0000:{i // 256:02x}:{i % 256:02x}.0", metric="power_w")
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
