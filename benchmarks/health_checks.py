"""Health check evaluation speed: every check kind for 1,000 nodes / 8,000 cards (issue 15, < 1 s).

Builds, in the database `rackpilot_bench_health` (or TEST_DATABASE_NAME; rebuilt each run), one
cluster of 750 nodes with 8 H100 each and 250 nodes with 8 p150a each, ingests their telemetry
through the ingest service (temperature, thermal limit, PCIe gen/width and their maxima, ECC, link
state; for the p150a cards DRAM status and two heartbeat readings), stores the check commands'
output of every node (ps, df, findmnt), and creates one check of every kind. Then times:
- baseline: reading the stored facts alone (the bulk queries, no judging),
- the first evaluation (creates a standing row per check and node),
- steady evaluations (nothing changes: no writes),
- an evaluation where 10 nodes turn unhealthy (transitions, audit entries, no drains).

Run: .venv/bin/python benchmarks/health_checks.py
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import bench_args, bench_db_name, measure, row, setup_django  # noqa: E402

NODES_NV, NODES_TT, CARDS_PER_NODE = 750, 250, 8

PS = "systemd\nsshd\nslurmd\nmunged\nbash\n"
DF = "Filesystem     1024-blocks     Used Available Capacity Mounted on\n/dev/nvme0n1p2 959863856 411870664 547993192 43% /\n"
FINDMNT = '{"filesystems": [{"target": "/shared", "source": "nas01:/export", "fstype": "nfs4", "options": "rw,relatime"}]}'


def build(now: dt.datetime) -> list[str]:
    from inventory.models import Card, CardModel, ChassisModel, Cluster, Node
    from monitoring import services
    from monitoring.health.services import health_probes_store
    from monitoring.models import HealthCheck

    cluster = Cluster.objects.create(name="bench", backend="simulator")
    chassis = ChassisModel.objects.create(manufacturer="Bench", name="8-slot", base_power_w=800)
    h100 = CardModel.objects.create(vendor="NVIDIA", name="H100", tdp_w=700)
    p150 = CardModel.objects.create(vendor="Tenstorrent", name="p150a", tdp_w=300)
    hosts = [f"n{i:04d}" for i in range(NODES_NV + NODES_TT)]
    nodes = Node.objects.bulk_create(Node(hostname=h, cluster=cluster, chassis=chassis) for h in hosts)
    bus = [f"0000:{0x10 + k:02x}:00.0" for k in range(CARDS_PER_NODE)]
    Card.objects.bulk_create(
        Card(node=n, card_model=h100 if i < NODES_NV else p150, slot=str(k), pci_bus_id=bus[k])
        for i, n in enumerate(nodes)
        for k in range(CARDS_PER_NODE)
    )
    for kind, params in [
        ("cards_enumerated", {}),
        ("pcie_link", {}),
        ("ecc", {}),
        ("xid", {}),
        ("temperature_headroom", {"headroom_c": 5}),
        ("tt_heartbeat", {}),
        ("link_up", {}),
        ("daemons", {}),
        ("disk_free", {"path": "/"}),
        ("shared_fs", {"path": "/shared"}),
    ]:
        check = HealthCheck(name=kind, kind=kind, params=params, consecutive=2)
        check.full_clean()
        check.save()
    samples = []
    for i, host in enumerate(hosts):
        tt = i >= NODES_NV
        for k in range(CARDS_PER_NODE):
            card = bus[k]
            values = {"temperature_c": 55.0, "thermal_limit_c": 90.0, "pcie_link_gen": 5, "pcie_link_gen_max": 5,
                      "pcie_link_width": 16, "pcie_link_width_max": 16, "ecc_uncorrected_total": 0}  # fmt: skip
            if tt:
                values |= {"dram_ok": 1, "heartbeat": 1000 + k}
            for metric, value in values.items():
                samples.append(
                    {"ts": now.isoformat(), "node": host, "card": card, "metric": metric, "value": value}
                )
            samples.append({"ts": now.isoformat(), "node": host, "card": card, "metric": "link_up", "value": 1,
                            "labels": {"port": "0"}})  # fmt: skip
            if tt:
                samples.append({"ts": (now - dt.timedelta(seconds=30)).isoformat(), "node": host, "card": card,
                                "metric": "heartbeat", "value": 900 + k})  # fmt: skip
    t0 = time.perf_counter()
    for start in range(0, len(samples), 10_000):
        report = services.telemetry_ingest_samples(samples[start : start + 10_000])
        assert not report.problems, report.problems[:3]
    print(f"ingested {len(samples):,} samples in {time.perf_counter() - t0:.1f} s", flush=True)
    for n in nodes:
        health_probes_store(n, [
            {"key": "ps", "exit_code": 0, "stdout": PS},
            {"key": "df:/", "exit_code": 0, "stdout": DF},
            {"key": "findmnt:/shared", "exit_code": 0, "stdout": FINDMNT},
        ], now=now)  # fmt: skip
    return hosts


def main() -> None:
    bench_args(__doc__, "rackpilot_bench_health")
    setup_django(bench_db_name("rackpilot_bench_health"))
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from monitoring.health.rules import params_clean
    from monitoring.health.services import _read_facts, _targets, health_evaluate
    from monitoring.models import HealthCheck, LatestValue, NodeHealth

    call_command("flush", interactive=False, verbosity=0)
    with connection.cursor() as cur:
        cur.execute("TRUNCATE monitoring_sample")
    now = timezone.now().replace(microsecond=0)
    hosts = build(now)
    cards = CARDS_PER_NODE * len(hosts)
    print(f"built {len(hosts):,} nodes, {cards:,} cards, {HealthCheck.objects.count()} checks, "
          f"{LatestValue.objects.count():,} latest values", flush=True)  # fmt: skip

    checks = list(HealthCheck.objects.all())
    for c in checks:
        c.params = params_clean(c.kind, c.params)

    def facts_only() -> None:
        _read_facts(_targets(None), checks, now)

    row("baseline: read the stored facts only", measure(facts_only, runs=5, warmup=1))
    t0 = time.perf_counter()
    first = health_evaluate(now=now)
    print(f"{'first evaluation (creates the standings)':<48} {1000 * (time.perf_counter() - t0):8.1f} ms   "
          f"{first.evaluated:,} results, {NodeHealth.objects.count():,} rows", flush=True)  # fmt: skip
    with CaptureQueriesContext(connection) as ctx:
        steady = health_evaluate(now=now)
    assert not steady.transitions, steady.transitions[:3]
    row("steady evaluation, all checks, all nodes", measure(lambda: health_evaluate(now=now), runs=5, warmup=1),
        f"{steady.evaluated:,} results, {len(ctx.captured_queries)} queries")  # fmt: skip

    # 10 nodes run hot: two results in a row make them unhealthy
    from monitoring import services

    hot = [{"ts": (now + dt.timedelta(seconds=1)).isoformat(), "node": h, "card": "0000:10:00.0",
            "metric": "temperature_c", "value": 88} for h in hosts[:10]]  # fmt: skip
    services.telemetry_ingest_samples(hot)
    health_evaluate(now=now + dt.timedelta(seconds=1))
    t0 = time.perf_counter()
    flips = health_evaluate(now=now + dt.timedelta(seconds=2))
    print(f"{'evaluation with 10 nodes turning unhealthy':<48} {1000 * (time.perf_counter() - t0):8.1f} ms   "
          f"{len(flips.transitions)} transitions", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
