"""Derived rates on ingest: node_exporter counters -> net_util_pct and disk_iops."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from monitoring.models import LatestValue, Sample
from monitoring.services import telemetry_ingest_samples, telemetry_ingest_text
from tests.monitoring.conftest import fixture_text

pytestmark = pytest.mark.django_db


def _page(rx: float, tx: float, reads: float, writes: float, speed: float | None = 2.5e10) -> str:
    """A node_exporter page for ib0 and nvme0n1 (Go float formatting)."""
    lines = [
        "# HELP node_disk_reads_completed_total The total number of reads completed successfully.",
        "# TYPE node_disk_reads_completed_total counter",
        f'node_disk_reads_completed_total{{device="nvme0n1"}} {reads:e}',
        "# HELP node_disk_writes_completed_total The total number of writes completed successfully.",
        "# TYPE node_disk_writes_completed_total counter",
        f'node_disk_writes_completed_total{{device="nvme0n1"}} {writes:e}',
        "# TYPE node_network_receive_bytes_total counter",
        f'node_network_receive_bytes_total{{device="ib0"}} {rx:e}',
        "# TYPE node_network_transmit_bytes_total counter",
        f'node_network_transmit_bytes_total{{device="ib0"}} {tx:e}',
    ]
    if speed is not None:
        lines += [
            "# TYPE node_network_speed_bytes gauge",
            f'node_network_speed_bytes{{device="ib0"}} {speed:e}',
        ]
    return "\n".join(lines) + "\n"


def _derived(metric: str) -> list[tuple[dt.datetime, float]]:
    return list(
        Sample.objects.filter(series__metric=metric, series__labels__startswith="device=")
        .order_by("ts")
        .values_list("ts", "value")
    )


def _t0() -> dt.datetime:
    return timezone.now().replace(microsecond=0) - dt.timedelta(minutes=30)


def test_rates_are_derived_from_the_previous_latest_value(inv: Any) -> None:
    # given a node whose first node_exporter page was stored a minute ago
    inv.node("gpu01")
    t0 = _t0()
    t1 = t0 + dt.timedelta(seconds=60)
    first = telemetry_ingest_text("node-exporter", _page(1e9, 5e8, 1e6, 2e5), node_hostname="gpu01", ts=t0)
    # when the next page arrives: rx +22.5 GB/s, tx +10 GB/s on a 25 GB/s link, 500 reads + 100 writes /s
    second = telemetry_ingest_text(
        "node-exporter",
        _page(1e9 + 60 * 2.25e10, 5e8 + 60 * 1e10, 1e6 + 60 * 500, 2e5 + 60 * 100),
        node_hostname="gpu01",
        ts=t1,
    )
    # then the first page derives nothing (no previous value), the second one rate per device
    assert first.stored == 5
    assert second.stored == 7
    assert [(ts, pytest.approx(v)) for ts, v in _derived("net_util_pct")] == [(t1, 90.0)]
    assert [(ts, pytest.approx(v)) for ts, v in _derived("disk_iops")] == [(t1, 600.0)]
    util = LatestValue.objects.get(series__metric="net_util_pct")
    assert (util.series.labels, util.series.card_ref, util.ts) == ("device=ib0", "", t1)
    assert LatestValue.objects.get(series__metric="disk_iops").series.labels == "device=nvme0n1"


def test_a_counter_reset_skips_that_point_and_rates_resume_after(inv: Any) -> None:
    # given two pages stored a minute apart
    inv.node("gpu01")
    t0 = _t0()
    ts = [t0 + dt.timedelta(seconds=60 * i) for i in range(4)]
    telemetry_ingest_text("node-exporter", _page(1e9, 1e9, 1e6, 1e6), node_hostname="gpu01", ts=ts[0])
    telemetry_ingest_text("node-exporter", _page(2e9, 1e9, 1.06e6, 1e6), node_hostname="gpu01", ts=ts[1])
    # when the node reboots (counters start again from small values), then keeps counting
    telemetry_ingest_text("node-exporter", _page(3e6, 1e6, 600, 10), node_hostname="gpu01", ts=ts[2])
    telemetry_ingest_text(
        "node-exporter", _page(3e6 + 60 * 5e9, 1e6, 600 + 60 * 50, 10), node_hostname="gpu01", ts=ts[3]
    )
    # then the reset point has no rate (neither the net nor the disk one), the next one does
    assert [(t, pytest.approx(v)) for t, v in _derived("net_util_pct")] == [
        (ts[1], 1e9 / 60 / 2.5e10 * 100),
        (ts[3], 20.0),
    ]
    assert [(t, pytest.approx(v)) for t, v in _derived("disk_iops")] == [(ts[1], 1000.0), (ts[3], 50.0)]


def test_link_speed_comes_from_its_latest_value_and_unknown_speed_gives_no_utilisation(inv: Any) -> None:
    # given pages where only the first reports ib0's link speed, and a second node without any
    inv.node("gpu01")
    inv.node("gpu02")
    t0 = _t0()
    t1 = t0 + dt.timedelta(seconds=100)
    telemetry_ingest_text("node-exporter", _page(0, 0, 0, 0), node_hostname="gpu01", ts=t0)
    telemetry_ingest_text("node-exporter", _page(0, 0, 0, 0, speed=None), node_hostname="gpu02", ts=t0)
    # when the next pages arrive without a speed line
    for host in ("gpu01", "gpu02"):
        telemetry_ingest_text(
            "node-exporter", _page(2.5e11, 1e11, 1e5, 0, speed=None), node_hostname=host, ts=t1
        )
    # then gpu01 uses its stored speed; gpu02 gets IOPS but no utilisation
    util = LatestValue.objects.filter(series__metric="net_util_pct").values_list(
        "series__node__hostname", "value"
    )
    assert [(h, pytest.approx(v)) for h, v in util] == [("gpu01", 10.0)]
    iops = LatestValue.objects.filter(series__metric="disk_iops").order_by("series__node__hostname")
    assert [(lv.series.node.hostname, pytest.approx(lv.value)) for lv in iops] == [
        ("gpu01", 1000.0),
        ("gpu02", 1000.0),
    ]


def test_no_rate_across_a_long_gap_or_from_an_older_sample(inv: Any) -> None:
    inv.node("gpu01")
    t0 = _t0()
    telemetry_ingest_text("node-exporter", _page(0, 0, 0, 0), node_hostname="gpu01", ts=t0)
    # when the next page comes 20 minutes later (the agent was down), then a late, older one
    telemetry_ingest_text(
        "node-exporter", _page(1e12, 0, 1e6, 0), node_hostname="gpu01", ts=t0 + dt.timedelta(minutes=20)
    )
    telemetry_ingest_text(
        "node-exporter", _page(5e11, 0, 5e5, 0), node_hostname="gpu01", ts=t0 + dt.timedelta(minutes=10)
    )
    # then nothing is derived
    assert _derived("net_util_pct") == []
    assert _derived("disk_iops") == []


def test_json_samples_in_one_batch_derive_rates_between_their_points(inv: Any) -> None:
    # given JSON samples carrying two scrapes of one disk's counters
    inv.node("gpu01")
    t0 = _t0()
    t1 = t0 + dt.timedelta(seconds=10)
    samples = [
        {"ts": t.isoformat(), "node": "gpu01", "metric": m, "value": v, "labels": {"device": "sda"}}
        for t, m, v in [
            (t0, "disk_reads_total", 100),
            (t0, "disk_writes_total", 100),
            (t1, "disk_reads_total", 1100),
            (t1, "disk_writes_total", 200),
        ]
    ]
    # when they are ingested in one batch
    report = telemetry_ingest_samples(samples)
    # then the later point has a rate, and the latest values moved
    assert report.stored == 5
    assert _derived("disk_iops") == [(t1, 110.0)]


def test_the_fixture_page_ingests(inv: Any) -> None:
    inv.node("gpu01")
    report = telemetry_ingest_text("node-exporter", fixture_text("node_exporter.prom"), node_hostname="gpu01")
    assert (report.stored, report.series_created) == (12, 12)
