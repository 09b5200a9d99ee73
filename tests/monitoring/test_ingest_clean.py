"""Telemetry stays clean: one sample per (series, ts), plausible values only, bounded bodies,
declared content types honoured, and no 5xx from times beyond what a datetime holds."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from monitoring import services, storage
from monitoring.models import LatestValue, Sample, Series
from monitoring.parsers import FORMATS
from monitoring.services import IngestError, telemetry_ingest_samples, telemetry_ingest_text
from tests.monitoring.conftest import H100_UUIDS, fixture_text

pytestmark = pytest.mark.django_db
URL = "/api/monitoring/ingest/"


def _s(node: str, metric: str, value: Any, ts: Any, card: str = "") -> dict[str, Any]:
    return {
        "ts": ts.isoformat() if isinstance(ts, dt.datetime) else ts,
        "node": node,
        "card": card,
        "metric": metric,
        "value": value,
    }


def _values() -> list[tuple[str, float]]:
    return sorted(Sample.objects.values_list("series__metric", "value"))


# -- one sample per (series, ts) -----------------------------------------------------------------
def test_repeats_within_a_batch_are_stored_once_the_first_wins(inv: Any) -> None:
    # given a batch where one card metric repeats its time with another value
    inv.node("gpu01")
    now = timezone.now().replace(microsecond=0)
    batch = [
        _s("gpu01", "power_w", 300, now, H100_UUIDS[0]),
        _s("gpu01", "power_w", 999, now, H100_UUIDS[0]),
        _s("gpu01", "power_w", 310, now + dt.timedelta(seconds=10), H100_UUIDS[0]),
        _s("gpu01", "node_power_w", 900, now),
        _s("gpu01", "node_power_w", 900, now),
    ]
    # when it is ingested
    report = telemetry_ingest_samples(batch, now=now + dt.timedelta(seconds=10))
    # then each (series, ts) is stored once, with the first value, and the repeats are counted
    assert (report.stored, report.duplicates) == (3, 2)
    assert report.as_dict()["duplicates"] == 2
    assert _values() == [("node_power_w", 900.0), ("power_w", 300.0), ("power_w", 310.0)]
    assert LatestValue.objects.get(series__metric="power_w").value == 310.0


def test_repeats_within_a_batch_of_one_time_are_stored_once(inv: Any) -> None:
    # given a batch of one time (a tool's output) that names one series twice
    inv.node("gpu01")
    now = timezone.now().replace(microsecond=0)
    batch = [
        _s("gpu01", "power_w", 300, now, H100_UUIDS[0]),
        _s("gpu01", "power_w", 301, now, H100_UUIDS[1]),
        _s("gpu01", "power_w", 999, now, H100_UUIDS[0]),
    ]
    report = telemetry_ingest_samples(batch, now=now)
    # then the repeat is dropped: the first wins
    assert (report.stored, report.duplicates) == (2, 1)
    assert _values() == [("power_w", 300.0), ("power_w", 301.0)]


@pytest.mark.django_db(transaction=True)
def test_a_resent_batch_is_merged_the_stored_samples_stay(inv: Any) -> None:
    # given a batch stored and committed (an agent whose request timed out after the commit)
    inv.node("gpu01")
    now = timezone.now().replace(microsecond=0)
    first = [
        _s("gpu01", "power_w", 300 + i, now - dt.timedelta(seconds=10 * i), H100_UUIDS[0]) for i in range(3)
    ]
    telemetry_ingest_samples(first, now=now)
    # when it is sent again with other values and one new sample
    again = [{**s, "value": 1.0} for s in first] + [
        _s("gpu01", "power_w", 350, now + dt.timedelta(seconds=10), H100_UUIDS[0])
    ]
    report = telemetry_ingest_samples(again, now=now + dt.timedelta(seconds=10))
    # then only the new sample is stored, the repeats are counted, the stored values are kept
    assert (report.stored, report.duplicates) == (1, 3)
    assert sorted(Sample.objects.values_list("value", flat=True)) == [300.0, 301.0, 302.0, 350.0]
    assert LatestValue.objects.get().value == 350.0


def test_a_resent_tool_output_inside_a_callers_transaction_stores_nothing_twice(inv: Any) -> None:
    # given a dcgm-exporter output of a node stored at one time (inside the test's transaction)
    inv.node("gpu07")
    ts = timezone.now().replace(microsecond=0)
    text = fixture_text("dcgm_exporter_2gpu.prom")
    report = telemetry_ingest_text("dcgm-exporter", text, node_hostname="gpu07", ts=ts)
    stored = Sample.objects.count()
    assert report.stored == stored > 0
    # when the same output arrives again for the same time
    with transaction.atomic():
        again = telemetry_ingest_text("dcgm-exporter", text, node_hostname="gpu07", ts=ts)
    # then nothing is stored twice
    assert (again.stored, again.duplicates) == (0, stored)
    assert Sample.objects.count() == stored


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_the_store_refuses_a_repeated_series_and_time(inv: Any) -> None:
    # given one stored sample
    node = inv.node("gpu01")
    series = Series.objects.create(node=node, metric="node_power_w")
    now = timezone.now()
    storage.partitions_ensure([now.astimezone(dt.UTC).date()])
    storage.samples_write([(now, series.pk, 1.0)])
    # when the same (series, ts) is written again, then the store refuses it
    with pytest.raises(storage.SamplesRepeated), transaction.atomic():
        storage.samples_write([(now, series.pk, 2.0)])
    # and the merge writes only what is new
    later = now + dt.timedelta(seconds=1)
    assert storage.samples_merge([(now, series.pk, 3.0), (later, series.pk, 4.0)]) == {(series.pk, later)}
    assert sorted(Sample.objects.values_list("value", flat=True)) == [1.0, 4.0]


def test_stored_samples_read_back_exactly(inv: Any) -> None:
    # given samples at microsecond times (one given in another zone), tiny, negative and huge values
    node = inv.node("gpu01")
    a, b = (Series.objects.create(node=node, metric=m) for m in ("node_power_w", "temperature_c"))
    t0 = timezone.now().astimezone(dt.UTC).replace(hour=12, microsecond=123457)
    later = (t0 + dt.timedelta(seconds=10, microseconds=1)).astimezone(dt.timezone(dt.timedelta(hours=8)))
    rows = [(t0, a.pk, 1e-300), (t0, b.pk, -40.25), (later, a.pk, 1.7976931348623157e308)]
    storage.partitions_ensure([t0.date()])
    # when they are written in one batch
    storage.samples_write(rows, t0.date())
    # then every (ts, series, value) is what was given, to the microsecond and the last bit
    stored = sorted(Sample.objects.values_list("ts", "series_id", "value"))
    assert stored == sorted(rows)


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_the_migration_removes_stored_repeats_and_makes_the_index_unique(inv: Any) -> None:
    import importlib

    migration = importlib.import_module("monitoring.migrations.0007_sample_one_per_series_ts")
    # given the index of before the migration and a (series, ts) stored three times
    node = inv.node("gpu01")
    series = Series.objects.create(node=node, metric="node_power_w")
    now = timezone.now()
    storage.partitions_ensure([now.astimezone(dt.UTC).date()])
    with connection.schema_editor() as editor:
        migration.backwards(None, editor)
    storage.samples_write([(now, series.pk, 1.0), (now, series.pk, 2.0), (now, series.pk, 3.0)])
    storage.samples_write([(now + dt.timedelta(seconds=1), series.pk, 5.0)])
    # when the migration runs
    with connection.schema_editor() as editor:
        migration.forwards(None, editor)
    # then one row per (series, ts) is left, and a repeat is refused
    assert Sample.objects.count() == 2
    with pytest.raises(storage.SamplesRepeated), transaction.atomic():
        storage.samples_write([(now, series.pk, 9.0)])


# -- plausible values ----------------------------------------------------------------------------
def test_implausible_values_are_refused_with_the_sample_and_the_reason(inv: Any) -> None:
    # given the values the hardening campaign got accepted
    inv.node("gpu01")
    now = timezone.now()
    batch = [
        _s("gpu01", "power_w", 300, now, H100_UUIDS[0]),
        _s("gpu01", "power_w", -500, now, H100_UUIDS[1]),
        _s("gpu01", "node_power_w", -350.5, now),
        _s("gpu01", "temperature_c", 1e12, now, H100_UUIDS[0]),
        _s("gpu01", "utilization_pct", 100.5, now, H100_UUIDS[0]),
    ]
    # when they are ingested, then the batch is refused, each bad sample named with its reason
    with pytest.raises(IngestError) as exc:
        telemetry_ingest_samples(batch, now=now)
    assert exc.value.errors == [
        "[1] power_w = -500 W is outside the plausible range 0 .. 100000 W",
        "[2] node_power_w = -350.5 W is outside the plausible range 0 .. 100000 W",
        "[3] temperature_c = 1e+12 C is outside the plausible range -60 .. 200 C",
        "[4] utilization_pct = 100.5 % is outside the plausible range 0 .. 100 %",
    ]
    assert Sample.objects.count() == 0
    # and the bounds are inclusive
    ok = [
        _s("gpu01", "utilization_pct", 100, now, H100_UUIDS[0]),
        _s("gpu01", "power_w", 0, now, H100_UUIDS[0]),
    ]
    assert telemetry_ingest_samples(ok, now=now).stored == 2


def test_an_implausible_line_of_a_tool_output_is_a_problem_the_rest_is_stored(inv: Any) -> None:
    # given a dcgm-exporter output whose one card reports a negative power
    inv.node("gpu07")
    text = fixture_text("dcgm_exporter_2gpu.prom")
    good = telemetry_ingest_text("dcgm-exporter", text, node_hostname="gpu07", ts=timezone.now())
    line = next(ln for ln in text.splitlines() if ln.startswith("DCGM_FI_DEV_POWER_USAGE{"))
    bad_line = line.rsplit(" ", 1)[0] + " -500"
    Sample.objects.all().delete()
    # when it is ingested
    report = telemetry_ingest_text(
        "dcgm-exporter", text.replace(line, bad_line), node_hostname="gpu07", ts=timezone.now()
    )
    # then that sample is left out with the reason, and the rest is stored
    assert report.stored == good.stored - 1
    assert [p for p in report.problems if "plausible" in p] == [
        f"{report_card(bad_line)}: power_w = -500 W is outside the plausible range 0 .. 100000 W"
    ]


def report_card(prom_line: str) -> str:
    return prom_line.split('UUID="', 1)[1].split('"', 1)[0]


def test_times_and_values_beyond_what_a_number_holds_are_400_not_500(inv: Any) -> None:
    inv.node("gpu01")
    now = timezone.now()
    with pytest.raises(IngestError) as exc:
        telemetry_ingest_samples(
            [
                _s("gpu01", "node_power_w", 1, 1e20),
                _s("gpu01", "node_power_w", 10**400, now),
                _s("gpu01", "node_power_w", 1, -(10**30)),
                _s("gpu01", "node_power_w", 1, "9999-12-31T23:59:59-23:59"),
            ],
            now=now,
        )
    assert exc.value.errors == [
        "[0] 'ts' 1e+20 is out of range",
        "[1] 'value' must be a finite number",
        "[2] 'ts' -1000000000000000000000000000000 is out of range",
    ]
    with pytest.raises(IngestError) as exc:
        telemetry_ingest_samples([_s("gpu01", "node_power_w", 1, "9999-12-31T23:59:59-23:59")], now=now)
    assert "outside the accepted window" in exc.value.errors[0]
    assert Sample.objects.count() == 0


# -- the endpoint --------------------------------------------------------------------------------
def _node_client(inv: Any, admin_user: Any, hostname: str = "gpu01") -> APIClient:
    node = inv.node(hostname)
    _token, key = services.node_token_create(node=node, user=admin_user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_an_oversized_body_is_413_json_with_the_limit(inv: Any, admin_user: Any, settings: Any) -> None:
    client = _node_client(inv, admin_user)
    settings.PORTAL_TELEMETRY_MAX_BODY_BYTES = 1000
    body = json.dumps([_s("gpu01", "node_power_w", 1, timezone.now())] * 20)
    assert len(body) > 1000
    resp = client.post(URL, data=body, content_type="application/json")
    assert resp.status_code == 413
    assert resp["Content-Type"] == "application/json"
    assert resp.json() == {
        "detail": "The request body is larger than the limit of 1,000 bytes.",
        "limit": 1000,
    }
    text = client.post(f"{URL}?format=ipmitool-sdr", data="x" * 1001, content_type="text/plain")
    assert (text.status_code, text.json()["limit"]) == (413, 1000)
    assert Sample.objects.count() == 0


def test_the_body_limit_is_the_setting_not_djangos_upload_limit(inv: Any, admin_user: Any) -> None:
    # given a valid 3 MB body (Django's own limit for request.body is 2.5 MB)
    client = _node_client(inv, admin_user)
    body = json.dumps([_s("gpu01", "node_power_w", 1, timezone.now())]) + " " * 3_000_000
    resp = client.post(URL, data=body, content_type="application/json")
    assert resp.status_code == 202, resp.content[:200]
    assert resp.json()["stored"] == 1


def test_a_declared_content_type_must_fit_the_body(inv: Any, admin_user: Any) -> None:
    client = _node_client(inv, admin_user, "gpu07")
    samples = json.dumps([_s("gpu07", "node_power_w", 1, timezone.now())])
    csv = fixture_text("nvidia_smi_h100_8gpu_nounits.csv")
    # JSON samples declared as text, a CSV declared as XML: 415 with what is accepted
    resp = client.post(URL, data=samples, content_type="text/plain")
    assert resp.status_code == 415
    assert resp.json() == {
        "detail": "JSON samples are sent as application/json, not text/plain; a tool's output needs "
        "?format=<tool>&node=<hostname>.",
        "accepted": ["application/json"],
    }
    resp = client.post(f"{URL}?format=nvidia-smi-csv", data=csv, content_type="application/xml")
    assert resp.status_code == 415
    assert resp.json() == {
        "detail": "A nvidia-smi-csv body is sent as text/plain, text/csv, not application/xml.",
        "accepted": ["text/plain", "text/csv"],
    }
    assert Sample.objects.count() == 0
    # the fitting types are taken, with parameters; curl's default type counts as none declared
    assert client.post(URL, data=samples, content_type="application/json; charset=utf-8").status_code == 202
    url = f"{URL}?format=nvidia-smi-csv"
    assert client.post(url, data=csv, content_type="text/csv").status_code == 202
    resp = client.post(url, data=csv, content_type="application/x-www-form-urlencoded")
    assert resp.status_code == 202
    assert resp.json()["duplicates"] == 0  # the same output a second later: a new time


def test_the_endpoint_says_which_formats_it_takes(inv: Any, admin_user: Any, settings: Any) -> None:
    client = _node_client(inv, admin_user)
    resp = client.get(URL)
    assert resp.status_code == 200
    body = resp.json()
    assert body["json"]["content_types"] == ["application/json"]
    assert body["max_body_bytes"] == settings.PORTAL_TELEMETRY_MAX_BODY_BYTES
    formats = {f["name"]: f["content_types"] for f in body["formats"]}
    assert formats["nvidia-smi-csv"] == ["text/plain", "text/csv"]
    assert formats["nvidia-smi-xml"] == ["text/plain", "application/xml", "text/xml"]
    assert formats["redfish"] == ["application/json", "text/plain"]
    assert sorted(formats) == sorted(FORMATS)
    assert APIClient().get(URL).status_code == 401


def test_the_endpoint_answers_400_for_overflowing_times_and_bad_values(inv: Any, admin_user: Any) -> None:
    client = _node_client(inv, admin_user)
    resp = client.post(URL, data=[_s("gpu01", "node_power_w", 1, 1e20)], format="json")
    assert resp.status_code == 400
    assert resp.json()["errors"] == ["[0] 'ts' 1e+20 is out of range"]
    resp = client.post(URL, data=[_s("gpu01", "node_power_w", -500, timezone.now())], format="json")
    assert resp.status_code == 400
    assert resp.json()["errors"] == ["[0] node_power_w = -500 W is outside the plausible range 0 .. 100000 W"]
    empty = client.post(URL, data=[], format="json")
    assert (empty.status_code, empty.json()["stored"]) == (202, 0)
    resp = client.post(URL, data="[" * 50_000, content_type="application/json")
    assert resp.status_code == 400
    assert resp.json()["detail"].startswith("Malformed JSON")
    assert Sample.objects.count() == 0


@pytest.mark.parametrize(
    ("params", "detail"),
    [
        ({"from": "99999999999999999999"}, "time out of range: '99999999999999999999'"),
        ({"to": "-99999999999999999999"}, "time out of range: '-99999999999999999999'"),
        ({"from": "now-99999999999d"}, "time out of range: 'now-99999999999d'"),
        ({"to": "-62135596800"}, "time out of range"),  # 0001-01-01: the default 'from' an hour earlier
        ({"from": "2026-13-45T00:00:00"}, "time out of range: '2026-13-45T00:00:00'"),
    ],
)
def test_series_times_beyond_a_datetime_are_400(api: APIClient, params: dict[str, str], detail: str) -> None:
    resp = api.get("/api/monitoring/series/", {"metric": "temperature_c", "card": "1", **params})
    assert resp.status_code == 400
    assert resp.json() == {"detail": detail}


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_columns_packed_as_binary_arrays_arrive_as_sent(inv: Any) -> None:
    # given series and times with microseconds, other offsets, negative and large values
    node = inv.node("gpu01")
    a, b = (Series.objects.create(node=node, metric=m) for m in ("voltage_v", "energy_j"))
    plus2 = dt.timezone(dt.timedelta(hours=2))
    t1 = dt.datetime(2026, 6, 1, 12, 0, 0, 123456, tzinfo=plus2)
    t0 = dt.datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC)  # before PostgreSQL's epoch
    # when they are merged into the samples and upserted as latest values
    storage.partitions_ensure([t1.astimezone(dt.UTC).date(), t0.date()])
    written = storage.samples_merge([(t1, a.pk, -12.25), (t0, b.pk, 1.8e19)])
    storage.latest_upsert([(a.pk, t1, -12.25), (b.pk, t0, 1.8e19)])
    # then the database holds exactly those
    assert written == {(a.pk, t1), (b.pk, t0)}
    assert sorted(Sample.objects.values_list("series_id", "ts", "value")) == [
        (a.pk, t1, -12.25),
        (b.pk, t0, 1.8e19),
    ]
    assert sorted(LatestValue.objects.values_list("series_id", "ts", "value")) == [
        (a.pk, t1, -12.25),
        (b.pk, t0, 1.8e19),
    ]
