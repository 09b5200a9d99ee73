"""Live push benchmark: ingest commit -> overview fragment at N websocket clients, against a bare
channel-layer fan-out measured in the same run.

    .venv/bin/python benchmarks/live_push.py [--clients 200] [--nodes 1000] [--rounds 6] [--interval 10]

Starts uvicorn (portal.asgi, PORTAL_LIVE_BENCH=1) on a free port against the database
``rackpilot_live_bench`` and Redis ``BENCH_REDIS_URL`` (default DB 7), seeds one cluster of N nodes
with 4 cards each, opens the clients on /ws/live/overview/ with a session cookie, and a child
process ingests telemetry for every node (temperature, power, utilisation of each card: one
batch per round, every ``--interval`` s) the way a Celery worker would: its on-commit signal feeds
the coalescer, whose flush sends the group events. Each frame carries the commit time (the
``data-ts`` of #live-status: when the batch's latest values, written behind its samples, were
committed; each round prints how long after the ingest call returned that was); a client's delay
is its receipt time minus that. The bare fan-out
is ``group_send`` of a small message to the same number of plain clients (/ws/live/bench/).
Prints, per round, when the worker's flush had published the overview event and the other
groups; then p50/p95/p99 of both and the server's CPU for each phase, raw and above the
server's idle CPU (measured for 3 s before the worker starts). The first round (cold templates,
query plans and pools) is not counted in the delays. The server uses the psycopg pool (DB_POOL=1).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DB = os.environ.get("TEST_DATABASE_NAME") or "rackpilot_live_bench"
REDIS = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/7")
TS = re.compile(r'data-ts="([0-9.]+)"')
SEQ = re.compile(r'data-seq="([^"]*)"')


def _env() -> dict[str, str]:
    base = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432")
    return {
        **os.environ,
        "DATABASE_URL": f"{base.rstrip('/')}/{DB}",
        "REDIS_URL": REDIS,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "PORTAL_LIVE_BENCH": "1",
        "PORTAL_LIVE_AUTOFLUSH": "1",
        "PORTAL_CHANNEL_PREFIX": f"rp-bench-{os.getppid() if '--ingest-worker' in sys.argv else os.getpid()}",
        "PORTAL_LIVE_OVERVIEW_REFRESH_S": "3600",
        "DB_POOL": os.environ.get("DB_POOL", "1"),  # psycopg pool (PERFORMANCE.md: ASGI + CONN_MAX_AGE)
        "PYTHONPATH": str(ROOT),
    }


def _setup(nodes: int) -> str:
    """Create/migrate the database, seed the cluster, return a session cookie of an admin."""
    os.environ.update(_env())
    from benchmarks.common import setup_django

    setup_django(DB)
    from django.contrib.auth.models import User
    from django.contrib.sessions.backends.db import SessionStore

    from inventory.models import Card, CardModel, Cluster, Node
    from portal.roles import roles_sync, user_set_role

    cluster, _ = Cluster.objects.get_or_create(name="bench")
    if Node.objects.filter(cluster=cluster).count() != nodes:
        Card.objects.filter(node__cluster=cluster).delete()
        Node.objects.filter(cluster=cluster).delete()
        model, _ = CardModel.objects.get_or_create(vendor="NVIDIA", name="bench-gpu", defaults={"tdp_w": 450})
        Node.objects.bulk_create(
            [Node(hostname=f"bn{i:04d}", cluster=cluster, slurm_state="idle") for i in range(nodes)]
        )
        Card.objects.bulk_create(
            [
                Card(
                    node=n, card_model=model, slot=str(s), gpu_uuid=f"GPU-{n.pk:08x}-0000-0000-0000-{s:012x}"
                )
                for n in Node.objects.filter(cluster=cluster)
                for s in range(4)
            ]
        )
    from django.db import connection

    with connection.cursor() as cursor:  # fresh rows: give the planner statistics, as autovacuum would
        cursor.execute(
            "VACUUM ANALYZE inventory_node, inventory_card, monitoring_series, monitoring_latestvalue"
        )
    roles_sync()
    user, created = User.objects.get_or_create(username="bench-admin")
    if created:
        user_set_role(user, "admin")
    session = SessionStore()
    session["_auth_user_id"] = str(user.pk)
    session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
    session["_auth_user_hash"] = user.get_session_auth_hash()
    session.create()
    return str(session.session_key)


def ingest_worker(rounds: int, interval: float, nodes: int) -> None:
    """Child process: one ingest batch per round (all nodes), then a bare group_send series."""
    import django

    os.environ.update(_env())
    django.setup()
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    from inventory.models import Node
    from monitoring import storage
    from monitoring.services import telemetry_ingest_samples
    from portal.live import groups, push

    real_send, real_route, real_frames = push.coalescer.send, push.route_overview, push.with_overview_frames
    spent: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        def run(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] = 1000 * (time.perf_counter() - t0)

        return run

    def timed_send(messages: dict[str, Any]) -> None:
        if not messages:  # every group of the flush without sockets (the per-node groups here)
            return
        t0 = time.perf_counter()
        real_send(messages)
        ts = next(iter(messages.values()))["ts"]
        parts = "" if groups.OVERVIEW not in messages or len(messages) > 1 else (
            f" (route {spent.get('route', 0):.1f}, render {spent.get('render', 0):.1f}, "
            f"publish {1000 * (time.perf_counter() - t0):.1f} ms)"
        )  # fmt: skip
        print(f"FLUSHED after {1000 * (time.time() - ts):.1f} ms: {len(messages)} groups{parts}", flush=True)

    push.coalescer.send = timed_send  # type: ignore[method-assign]
    push.route_overview = timed("route", real_route)
    push.with_overview_frames = timed("render", real_frames)
    hosts = list(Node.objects.filter(cluster__name="bench").values_list("pk", "hostname"))[:nodes]
    time.sleep(1.0)
    for r in range(rounds):
        t0 = time.time()
        samples = [
            {"node": h, "card": f"GPU-{pk:08x}-0000-0000-0000-{s:012x}", "metric": m, "value": v + (r % 7)}
            for pk, h in hosts
            for s in range(4)
            for m, v in (("temperature_c", 55.0 + s), ("power_w", 300.0), ("utilization_pct", 90.0))
        ]
        telemetry_ingest_samples(samples)
        returned = time.time()
        storage.latest_flush()  # the frames' clock starts here: the latest values' commit
        print(
            f"ROUND {r} samples={len(samples)} commit_s={returned - t0:.3f} "
            f"latest_values_committed_after_s={time.time() - returned:.3f}",
            flush=True,
        )
        if r == 0:  # the warm-up round filled the latest values: statistics, as autovacuum would
            from django.db import connection

            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE monitoring_latestvalue, monitoring_series")
        time.sleep(max(0.0, interval - (time.time() - t0)))
    time.sleep(1.0)
    print("BARE", flush=True)
    layer = get_channel_layer()
    for _ in range(rounds * 5):
        async_to_sync(layer.group_send)("bench.bare", {"type": "bench.ping", "ts": time.time()})
        time.sleep(0.5)
    push.coalescer.flush()
    print("DONE", flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))] if values else float("nan")


async def _client(
    url: str, cookie: str, sink: list[float], ready: asyncio.Event, stop: asyncio.Event
) -> None:
    import websockets

    async with websockets.connect(
        url, additional_headers={"Cookie": f"sessionid={cookie}", "Origin": "http://127.0.0.1"}, max_size=None
    ) as ws:
        ready.set()
        while not stop.is_set():
            try:
                frame = await asyncio.wait_for(ws.recv(), timeout=0.5)
            except TimeoutError:
                continue
            now = time.time()
            text = frame if isinstance(frame, str) else frame.decode()
            m, seq = TS.search(text), SEQ.search(text)
            # not the snapshot; the warm-up round (the worker's first flush: cold templates, plans)
            # is delivered (its frames count for CPU) but its delays are left out (NaN)
            if m and not (seq and seq.group(1) == "snapshot"):
                warm_up = seq is not None and seq.group(1).endswith("-1")
                sink.append(float("nan") if warm_up else (now - float(m.group(1))) * 1000)


ROUND_CPU: list[float] = []  # the server's CPU above idle after each counted round's commit


async def _round_cpu(proc: Any, idle_rate: float, counted: bool, window: float = 2.0) -> None:
    """The server's CPU in the ``window`` seconds after a round's commit, above idle."""
    start = sum(proc.cpu_times()[:2])
    await asyncio.sleep(window)
    used = sum(proc.cpu_times()[:2]) - start
    if counted:
        ROUND_CPU.append(used - idle_rate * window)
    print(f"    server CPU {1000 * used:.0f} ms in the {window:.0f} s after commit "
          f"({1000 * (used - idle_rate * window):.0f} ms above idle)", flush=True)  # fmt: skip


async def _run(args: argparse.Namespace, cookie: str) -> None:
    import psutil

    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "portal.asgi:application", "--host", "127.0.0.1", "--port", str(port),
         "--log-level", "warning", "--ws", "websockets",
         "--ws-per-message-deflate", "true" if args.deflate else "false",
         "--ws-ping-interval", str(args.ws_ping_interval)],
        cwd=ROOT, env=_env(),
    )  # fmt: skip
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                await asyncio.sleep(0.1)
        proc = psutil.Process(server.pid)
        stop = asyncio.Event()
        live: list[float] = []
        bare: list[float] = []
        tasks = []
        for path, sink in (("/ws/live/overview/", live), ("/ws/live/bench/", bare)):
            for _ in range(args.clients):
                ready = asyncio.Event()
                tasks.append(
                    asyncio.create_task(_client(f"ws://127.0.0.1:{port}{path}", cookie, sink, ready, stop))
                )
                await ready.wait()
        print(f"{len(tasks)} clients connected ({args.clients} overview + {args.clients} bare)", flush=True)
        await asyncio.sleep(1.0)
        idle_cpu, idle_wall = sum(proc.cpu_times()[:2]), time.time()
        await asyncio.sleep(3.0)  # the server's idle CPU (pings, watchdog), subtracted below
        idle_rate = (sum(proc.cpu_times()[:2]) - idle_cpu) / (time.time() - idle_wall)
        worker = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--ingest-worker", "--rounds", str(args.rounds),
            "--interval", str(args.interval), "--nodes", str(args.nodes),
            cwd=ROOT, env=_env(), stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        cpu = {"live": 0.0, "bare": 0.0}
        phase, t_cpu, t_wall = "live", sum(proc.cpu_times()[:2]), time.time()
        walls = {}
        assert worker.stdout is not None
        while True:
            line = (await worker.stdout.readline()).decode().strip()
            if not line:
                break
            if line.startswith("FLUSHED"):
                print("    " + line, flush=True)
            if line.startswith("ROUND"):
                print("  " + line, flush=True)
                asyncio.create_task(_round_cpu(proc, idle_rate, counted=not line.startswith("ROUND 0 ")))
            if line in ("BARE", "DONE"):
                await asyncio.sleep(1.0)
                now_cpu = sum(proc.cpu_times()[:2])
                cpu[phase], walls[phase] = now_cpu - t_cpu, time.time() - t_wall
                phase, t_cpu, t_wall = "bare", sum(proc.cpu_times()[:2]), time.time()
        await worker.wait()
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        print()
        print(f"server: uvicorn (permessage-deflate {'on' if args.deflate else 'off'}, "
              f"keepalive pings every {args.ws_ping_interval:g} s), "
              f"layer {os.environ.get('BENCH_LAYER', 'RedisPubSubChannelLayer')}, "
              f"{args.clients} clients, {args.nodes} nodes x 4 cards x 3 metrics per round")  # fmt: skip
        for name, sink, frames in (
            ("ingest commit -> overview", live, len(live)),
            ("bare group_send", bare, len(bare)),
        ):
            sink = [d for d in sink if d == d]  # without the warm-up round's NaN
            key = "live" if name.startswith("ingest") else "bare"
            net = cpu.get(key, 0) - idle_rate * walls.get(key, 0)
            print(
                f"{name:<28} frames {frames:6d}  p50 {_pct(sink, 50):7.1f} ms  p95 {_pct(sink, 95):7.1f} ms  "
                f"p99 {_pct(sink, 99):7.1f} ms  mean {statistics.fmean(sink) if sink else float('nan'):7.1f} ms  "
                f"server CPU {cpu.get(key, 0):6.2f} s over {walls.get(key, 0):5.1f} s "
                f"({1e6 * cpu.get(key, 0) / max(frames, 1):.0f} us/frame; "
                f"{1e6 * net / max(frames, 1):.0f} us/frame above idle)"
            )
        live, bare = [d for d in live if d == d], [d for d in bare if d == d]
        if ROUND_CPU and live:
            print(f"push path: {1e6 * sum(ROUND_CPU) / len(live):.0f} us server CPU per delivered overview "
                  f"frame (the 2 s after each counted commit, above idle)")  # fmt: skip
        if live and bare:
            print(f"ratio p50 {_pct(live, 50) / _pct(bare, 50):.2f}x  p95 {_pct(live, 95) / _pct(bare, 95):.2f}x  "
                  f"p99 {_pct(live, 99) / _pct(bare, 99):.2f}x (live / bare)")  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"database: {DB} (TEST_DATABASE_NAME overrides rackpilot_live_bench)",
    )
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--ingest-worker", action="store_true")
    parser.add_argument(
        "--deflate", action=argparse.BooleanOptionalAction, default=True,
        help="permessage-deflate on the server's websockets (uvicorn's default: on)",
    )  # fmt: skip
    parser.add_argument(
        "--ws-ping-interval", type=float, default=600.0,
        help="uvicorn's keepalive ping interval (its default 20 s: every client of the benchmark, connected "
        "at once, is pinged at once, a burst that lands in some rounds; real clients spread out)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.ingest_worker:
        ingest_worker(args.rounds, args.interval, args.nodes)
        return
    cookie = _setup(args.nodes)
    asyncio.run(_run(args, cookie))


if __name__ == "__main__":
    main()
