"""Remote-write ingest throughput against the JSON ingest endpoint, in one run (prints figures).

    TEST_DATABASE_NAME=rp_bench_rw .venv/bin/python benchmarks/remote_write_ingest.py [--nodes 32] [--rounds 12]

Builds --nodes nodes x 8 H100 in one cluster, then posts the same telemetry, one "scrape" of every
node per request (8 cards x 6 dcgm-exporter fields each), alternately
  remote write  POST /api/monitoring/remote-write/: a snappy protobuf WriteRequest as Prometheus
                sends it (dcgm-exporter names and labels, a cluster push token); decoding, the
                mapping to nodes/cards/metrics and the scope check are in the figure
  JSON          POST /api/monitoring/ingest/: the same samples as the portal's JSON (a write token)
through Django's test client (in-process: no network). The snappy body is literal-only (no
compressor in the virtualenv): a real body is smaller and its decompression does a little more.
The line to read is the ratio of the two medians, measured interleaved in the same run.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import bench_db_name, bench_parser, measure, row, setup_django  # noqa: E402
from benchmarks.telemetry_formats import _field, _varint, snappy_literals  # noqa: E402

DEFAULT_DB = "rp_bench_remote_write"
# dcgm-exporter field -> (portal metric, value as exported, scale to the portal's unit)
FIELDS = {
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_c", 41.0, 1),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 612.3, 1),
    "DCGM_FI_DEV_GPU_UTIL": ("utilization_pct", 87.0, 1),
    "DCGM_FI_DEV_FB_USED": ("memory_used_bytes", 40000.0, 1024 * 1024),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1980.0, 1),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", 2619.0, 1),
}


def cards_of(nodes: int) -> list[tuple[str, int, str]]:
    return [
        (f"gpu{n:03d}", i, f"GPU-{n:04d}{i:04d}-77aa-4c1e-9d0b-1f2e3d4c5b6a")
        for n in range(nodes)
        for i in range(8)
    ]


def remote_write_body(cards: list[tuple[str, int, str]], ts_ms: int) -> bytes:
    body = bytearray()
    for host, index, uuid in cards:
        for name, (_metric, value, _scale) in FIELDS.items():
            labels = (("__name__", name), ("gpu", str(index)), ("UUID", uuid), ("device", f"nvidia{index}"),
                      ("modelName", "NVIDIA H100 80GB HBM3"), ("Hostname", host), ("instance", f"{host}:9400"),
                      ("job", "dcgm"))  # fmt: skip
            encoded = b"".join(_field(1, _field(1, k.encode()) + _field(2, v.encode())) for k, v in labels)
            sample = _varint(1 << 3 | 1) + struct.pack("<d", value) + _varint(2 << 3) + _varint(ts_ms)
            body += _field(1, encoded + _field(2, sample))
    return snappy_literals(bytes(body))


def json_body(cards: list[tuple[str, int, str]], ts: dt.datetime) -> bytes:
    when = ts.isoformat()
    return json.dumps(
        [
            {"ts": when, "node": host, "card": uuid, "metric": metric, "value": value * scale}
            for host, _index, uuid in cards
            for metric, value, scale in FIELDS.values()
        ]
    ).encode()


def main() -> None:
    parser = bench_parser(__doc__, DEFAULT_DB)
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    setup_django(bench_db_name(DEFAULT_DB))
    from django.contrib.auth import get_user_model
    from django.test import Client

    from inventory.models import Card, CardModel, Cluster, Node
    from monitoring import services
    from monitoring.models import Series
    from monitoring.parsers.remote_write import parse_write_request
    from portal.services import api_token_create

    cluster, _ = Cluster.objects.get_or_create(name="bench-rw")
    model, _ = CardModel.objects.get_or_create(vendor="NVIDIA", name="H100 bench", defaults={"tdp_w": 700})
    cards = cards_of(args.nodes)
    for host in sorted({c[0] for c in cards}):
        node, _ = Node.objects.get_or_create(hostname=host, defaults={"cluster": cluster})
        for _h, index, uuid in (c for c in cards if c[0] == host):
            Card.objects.get_or_create(
                node=node, slot=f"s{index}", defaults={"card_model": model, "gpu_uuid": uuid}
            )
    user, _ = get_user_model().objects.get_or_create(username="bench-rw", defaults={"is_superuser": True})
    _t, user_key = api_token_create(user=user, name="bench", write_enabled=True)
    _t, cluster_key = services.cluster_token_create(cluster=cluster, user=None)
    client = Client()
    start = dt.datetime.now(dt.UTC) - dt.timedelta(
        hours=1
    )  # microseconds kept: no run repeats another's times
    per_request = len(cards) * len(FIELDS)

    # bodies built before the clock runs: one per request, each at its own second
    seconds = [start + dt.timedelta(seconds=i) for i in range(2 * args.rounds + 2)]
    rw_bodies = iter([remote_write_body(cards, int(ts.timestamp() * 1000)) for ts in seconds[0::2]])
    json_bodies = iter([json_body(cards, ts) for ts in seconds[1::2]])

    def post_rw() -> None:
        resp = client.post("/api/monitoring/remote-write/", next(rw_bodies), content_type="application/x-protobuf",
                           HTTP_CONTENT_ENCODING="snappy", HTTP_AUTHORIZATION=f"Token {cluster_key}")  # fmt: skip
        assert resp.status_code == 202 and resp.json()["stored"] == per_request, resp.content[:300]

    def post_json() -> None:
        resp = client.post("/api/monitoring/ingest/", next(json_bodies), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Token {user_key}")  # fmt: skip
        assert resp.status_code == 202 and resp.json()["stored"] == per_request, resp.content[:300]

    post_rw()  # the series exist and this process knows them: both paths measured warm
    post_json()
    assert Series.objects.filter(node__cluster=cluster).count() == per_request
    # interleaved: one of each per round, so that drift hits both alike
    times: dict[str, list[float]] = {"rw": [], "json": []}
    for _ in range(args.rounds):
        for name, fn in (("rw", post_rw), ("json", post_json)):
            t0 = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0) * 1000)
    figures = {}
    for name, label in (("rw", "remote write"), ("json", "JSON ingest")):
        ms = sorted(times[name])
        figures[name] = {
            "median_ms": ms[len(ms) // 2],
            "p95_ms": ms[int(0.95 * (len(ms) - 1))],
            "min_ms": ms[0],
        }
        rate = per_request / (figures[name]["median_ms"] / 1000)
        row(f"{label} ({args.nodes} nodes x 8 cards x {len(FIELDS)} = {per_request:,} samples/request)",
            figures[name], f"{rate:,.0f} samples/s")  # fmt: skip
    print(
        f"remote write / JSON median time: {figures['rw']['median_ms'] / figures['json']['median_ms']:.2f}x"
    )
    sizes = len(remote_write_body(cards, 0)), len(json_body(cards, start))
    print(
        f"body size: remote write {sizes[0] // 1024} KiB (uncompressed literals), JSON {sizes[1] // 1024} KiB"
    )
    body = remote_write_body(cards, 0)
    decode = measure(lambda: parse_write_request(body), runs=10, warmup=1)
    row("  of which decoding the remote-write body", decode)


if __name__ == "__main__":
    main()
