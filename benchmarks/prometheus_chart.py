"""A card's chart over 24 h: from a Prometheus source vs from the portal's own store, in one run.

    TEST_DATABASE_NAME=rp_bench_promchart .venv/bin/python benchmarks/prometheus_chart.py [--runs 30]

The same 24 h of one H100's power at 15 s (5,760 samples, the dcgm-exporter default interval) are
put into both: backfilled into a real Prometheus (Debian's `prometheus`, via `promtool tsdb
create-blocks-from openmetrics`, on loopback) and ingested into the portal's store (then rolled up
into 1-minute and 1-hour buckets as the periodic task does). Two clusters, one card each: one with a
Prometheus source, one without. Then GET /api/monitoring/series/?card=…&metric=power_w over 24 h,
through Django's test client, at the step the chart's 24 h range asks (900 s) and at 60 s:
  store       SQL over the 1-minute rollups (min/avg/max per step)
  prometheus  one query_range of min/avg/max_over_time over HTTP to the local Prometheus
Both answers are checked to hold the same points before the clocks run.
"""

from __future__ import annotations

import datetime as dt
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import bench_db_name, bench_parser, measure, row, setup_django  # noqa: E402

DEFAULT_DB = "rp_bench_promchart"
UUIDS = ("GPU-0b5e1f0c-77aa-4c1e-9d0b-1f2e3d4c5b6a", "GPU-1c2d3e4f-77aa-4c1e-9d0b-1f2e3d4c5b6a")


def history(end: dt.datetime) -> list[tuple[dt.datetime, float]]:
    start = end - dt.timedelta(hours=24)
    return [(start + dt.timedelta(seconds=15 * i), 300.0 + (i % 40) * 10) for i in range(24 * 240 + 1)]


def openmetrics(points: list[tuple[dt.datetime, float]]) -> str:
    labels = f'gpu="0",UUID="{UUIDS[1]}",Hostname="bench-prom"'
    lines = ["# TYPE DCGM_FI_DEV_POWER_USAGE gauge"]
    lines += [f"DCGM_FI_DEV_POWER_USAGE{{{labels}}} {v} {int(t.timestamp())}" for t, v in points]
    return "\n".join(lines) + "\n# EOF\n"


def main() -> None:
    parser = bench_parser(__doc__, DEFAULT_DB)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    setup_django(bench_db_name(DEFAULT_DB))
    from django.contrib.auth import get_user_model
    from django.test import Client

    from inventory.models import Card, CardModel, Cluster, Node
    from monitoring import services
    from monitoring.models import PrometheusSource
    from tests.monitoring.promlab import prom_lab

    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    end = now - dt.timedelta(seconds=now.timestamp() % 900) - dt.timedelta(minutes=30)  # rolled-up, closed
    points = history(end)
    model, _ = CardModel.objects.get_or_create(
        vendor="NVIDIA", name="H100 promchart", defaults={"tdp_w": 700}
    )
    cards = []
    for name, uuid in zip(("bench-store", "bench-prom"), UUIDS, strict=True):
        cluster, _ = Cluster.objects.get_or_create(name=name)
        node, _ = Node.objects.get_or_create(hostname=name, defaults={"cluster": cluster})
        card, _ = Card.objects.get_or_create(
            node=node, slot="s0", defaults={"card_model": model, "gpu_uuid": uuid}
        )
        cards.append(card)
    store_card, prom_card = cards
    batch = [
        {"ts": t.isoformat(), "node": "bench-store", "card": UUIDS[0], "metric": "power_w", "value": v}
        for t, v in points
    ]
    for i in range(0, len(batch), 1000):
        services.telemetry_ingest_samples(batch[i : i + 1000])
    services.telemetry_rollup(start=points[0][0] - dt.timedelta(hours=1), end=end + dt.timedelta(minutes=1))
    user, _ = get_user_model().objects.get_or_create(
        username="bench-promchart", defaults={"is_superuser": True}
    )
    client = Client()
    client.force_login(user)
    frm, to = (end - dt.timedelta(hours=24)).isoformat(), end.isoformat()

    with (
        tempfile.TemporaryDirectory() as tmp,
        prom_lab(Path(tmp), history=openmetrics(points), scrape=False) as lab,
    ):
        PrometheusSource.objects.update_or_create(
            cluster=prom_card.node.cluster, defaults={"base_url": lab.url}
        )
        print(f"24 h of one card's power at 15 s: {len(points):,} samples in each store")
        for step in (900, 60):

            def get(card: Card, step: int = step) -> dict:
                resp = client.get(
                    "/api/monitoring/series/",
                    {"card": card.pk, "metric": "power_w", "step": step, "from": frm, "to": to},
                )
                assert resp.status_code == 200, resp.content[:300]
                return resp.json()

            a, b = get(store_card), get(prom_card)
            assert (a["resolution"], b["resolution"]) == ("1m", "prometheus"), (
                a["resolution"],
                b["resolution"],
            )
            sa, sb = a["series"][0]["points"], b["series"][0]["points"]
            # the same buckets: the store's are labelled by their start, Prometheus's by their end
            common = {p[0] + step: p[1:] for p in sa}.keys() & {p[0]: p[1:] for p in sb}.keys()
            assert len(common) >= len(sa) - 2, (len(sa), len(sb), len(common))
            fa = measure(lambda: get(store_card), runs=args.runs)
            fb = measure(lambda: get(prom_card), runs=args.runs)
            row(f"store, 24 h at {step} s ({len(sa)} points)", fa)
            row(
                f"prometheus, 24 h at {step} s ({len(sb)} points)",
                fb,
                f"{fb['median_ms'] / fa['median_ms']:.2f}x the store",
            )


if __name__ == "__main__":
    main()
