from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import connection

from monitoring import storage
from monitoring.models import Rollup1h, Rollup1m, Sample, Series
from monitoring.services import telemetry_partitions_ensure, telemetry_retention, telemetry_rollup

pytestmark = [pytest.mark.django_db, pytest.mark.skipif("connection.vendor != 'postgresql'")]
NOW = dt.datetime(2026, 12, 20, 12, 0, tzinfo=dt.UTC)


def _series(inv: Any) -> Series:
    return Series.objects.create(node=inv.node(), card_ref="0000:01:00.0", metric="power_w")


def test_partitions_are_created_ahead(inv: Any, settings: Any) -> None:
    settings.PORTAL_TELEMETRY_PARTITIONS_AHEAD_DAYS = 2
    created = telemetry_partitions_ensure(now=NOW)
    assert created == [
        "monitoring_sample_p20261220",
        "monitoring_sample_p20261221",
        "monitoring_sample_p20261222",
    ]
    assert telemetry_partitions_ensure(now=NOW) == []


def test_retention_drops_expired_partitions_and_rollups(inv: Any) -> None:
    # given raw samples 9 days and 1 day old, and 1-minute rollups 100 and 10 days old
    s = _series(inv)
    old, recent = NOW - dt.timedelta(days=9), NOW - dt.timedelta(days=1)
    storage.partitions_ensure([old.date(), recent.date()])
    storage.samples_write([(old, s.pk, 1.0), (recent, s.pk, 2.0)])
    for days in (100, 10):
        Rollup1m.objects.create(series=s, bucket=NOW - dt.timedelta(days=days), min=1, avg=1, max=1, count=1)
    Rollup1h.objects.create(series=s, bucket=NOW - dt.timedelta(days=3000), min=1, avg=1, max=1, count=1)
    # when retention runs (raw 7 days, 1 minute 90 days, 1 hour forever)
    report = telemetry_retention(now=NOW)
    # then the old partition is gone with its rows, and only expired rollups were deleted
    assert report.raw == 1
    assert list(Sample.objects.values_list("value", flat=True)) == [2.0]
    assert storage.partition_name(old.date()) not in {n for n, _d in storage.partitions_list()}
    assert report.rollup_1m == 1
    assert Rollup1m.objects.count() == 1
    assert Rollup1h.objects.count() == 1


def test_rollups_are_idempotent_and_hourly_from_minutes(inv: Any) -> None:
    s = _series(inv)
    start = NOW - dt.timedelta(hours=2)
    storage.partitions_ensure([start.date()])
    storage.samples_write([(start + dt.timedelta(seconds=10 * i), s.pk, float(i % 6)) for i in range(720)])
    first = telemetry_rollup(start=start, end=NOW)
    again = telemetry_rollup(start=start, end=NOW)
    assert first == again == {"1m": 120, "1h": 2}
    assert Rollup1m.objects.count() == 120
    hour = Rollup1h.objects.order_by("bucket").first()
    assert (hour.min, hour.avg, hour.max, hour.count) == (0.0, 2.5, 5.0, 360)
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM monitoring_rollup_1m WHERE series_id = %s", [s.pk])
        assert cur.fetchone()[0] == 120
