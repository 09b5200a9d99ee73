from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from monitoring import storage
from monitoring.models import Event, LatestValue, Sample, Series
from monitoring.services import IngestError, telemetry_ingest_samples, telemetry_ingest_text
from monitoring.signals import telemetry_ingested
from tests.monitoring.conftest import H100_UUIDS, fixture_text

pytestmark = pytest.mark.django_db


def _s(
    node: str, metric: str, value: float, ts: dt.datetime, card: str = "", **labels: str
) -> dict[str, Any]:
    return {
        "ts": ts.isoformat(),
        "node": node,
        "card": card,
        "metric": metric,
        "value": value,
        **({"labels": labels} if labels else {}),
    }


def test_json_samples_are_stored_with_series_and_latest_values(inv: Any) -> None:
    # given a node with one inventoried card
    node = inv.node("gpu01")
    card = inv.card(node, gpu_uuid=H100_UUIDS[0])
    now = timezone.now().replace(microsecond=0)
    # when two samples of one card metric and one node metric arrive
    report = telemetry_ingest_samples(
        [
            _s("gpu01", "temperature_c", 40, now - dt.timedelta(seconds=10), H100_UUIDS[0]),
            _s("gpu01", "temperature_c", 42, now, H100_UUIDS[0]),
            _s("gpu01", "node_power_w", 900, now),
        ],
        now=now,
    )
    # then all three are stored under two series, the card one linked to the inventory card
    assert report.stored == 3
    assert report.series_created == 2
    assert report.unknown_cards == []
    assert Sample.objects.count() == 3
    temp = Series.objects.get(metric="temperature_c")
    assert temp.card_id == card.pk
    assert temp.card_ref == H100_UUIDS[0]
    assert LatestValue.objects.get(series=temp).value == 42
    assert LatestValue.objects.get(series__metric="node_power_w").value == 900


def test_a_batch_of_many_nodes_creates_each_nodes_series_with_neighbouring_ids(inv: Any) -> None:
    # given three nodes, and one batch of their samples in shuffled order (a Prometheus scrape of
    # many nodes: the order a set gives)
    nodes = [inv.node(f"gpu{i:02d}") for i in range(3)]
    now = timezone.now().replace(microsecond=0)
    metrics = ["temperature_c", "power_w", "utilization_pct", "fan_pct"]
    batch = [
        _s(node.hostname, metric, 40, now, H100_UUIDS[c])
        for node in nodes
        for c in range(2)
        for metric in metrics
    ]
    random.Random(7).shuffle(batch)
    # when it is ingested
    report = telemetry_ingest_samples(batch, now=now)
    # then the series were created in key order (node, card, metric): each node's ids form one
    # unbroken run, so a node's later batches touch neighbouring index pages
    assert report.series_created == 24
    created = list(Series.objects.order_by("id").values_list("node_id", "card_ref", "metric"))
    assert created == sorted(created)
    for node in nodes:
        ids = list(Series.objects.filter(node=node).order_by("id").values_list("id", flat=True))
        assert ids == list(range(ids[0], ids[0] + 8))


def test_an_older_sample_never_overwrites_the_latest_value(inv: Any) -> None:
    inv.node("gpu01")
    now = timezone.now()
    telemetry_ingest_samples([_s("gpu01", "node_power_w", 500, now)], now=now)
    telemetry_ingest_samples([_s("gpu01", "node_power_w", 100, now - dt.timedelta(minutes=1))], now=now)
    assert LatestValue.objects.get().value == 500
    assert Sample.objects.count() == 2


def test_a_batch_with_one_bad_sample_stores_nothing(inv: Any) -> None:
    # given a valid sample followed by an unknown metric and a non-numeric value
    inv.node("gpu01")
    now = timezone.now()
    batch = [
        _s("gpu01", "node_power_w", 500, now),
        _s("gpu01", "made_up_metric", 1, now),
        {**_s("gpu01", "node_power_w", 1, now), "value": "hot"},
    ]
    # when it is ingested, then it is refused with the reasons of each bad row
    with pytest.raises(IngestError) as exc:
        telemetry_ingest_samples(batch, now=now)
    assert exc.value.errors == ["[1] unknown metric 'made_up_metric'", "[2] 'value' must be a finite number"]
    # and nothing was written
    assert Sample.objects.count() == 0
    assert Series.objects.count() == 0
    assert LatestValue.objects.count() == 0


def test_unknown_node_and_out_of_window_times_are_refused(inv: Any) -> None:
    inv.node("gpu01")
    now = timezone.now()
    with pytest.raises(IngestError) as exc:
        telemetry_ingest_samples([_s("nope", "node_power_w", 1, now)], now=now)
    assert exc.value.errors == ["unknown node 'nope': add it to the inventory first"]
    with pytest.raises(IngestError) as exc:
        telemetry_ingest_samples([_s("gpu01", "node_power_w", 1, now - dt.timedelta(days=8))], now=now)
    assert "outside the accepted window" in exc.value.errors[0]
    assert Sample.objects.count() == 0


def test_a_failure_while_writing_rolls_back_the_whole_batch(inv: Any, monkeypatch: Any) -> None:
    # given the latest-value upsert fails after the samples were copied
    inv.node("gpu01")
    now = timezone.now()

    def boom(rows: Any, **kw: Any) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(storage, "latest_upsert", boom)
    with pytest.raises(RuntimeError):
        telemetry_ingest_samples([_s("gpu01", "node_power_w", 1, now)], now=now)
    # then neither samples nor series remain
    assert Sample.objects.count() == 0
    assert Series.objects.count() == 0


def test_nvidia_smi_csv_maps_cards_by_uuid_and_reports_unknown_ones(inv: Any) -> None:
    # given a node whose inventory knows 2 of its 8 GPUs
    node = inv.node("gpu07")
    known = [inv.card(node, gpu_uuid=u) for u in H100_UUIDS]
    # when a recorded nvidia-smi CSV of 8 GPUs is ingested
    report = telemetry_ingest_text(
        "nvidia-smi-csv", fixture_text("nvidia_smi_h100_8gpu_nounits.csv"), node_hostname="gpu07"
    )
    # then every numeric value is stored and 6 cards are reported unknown
    assert report.stored == Sample.objects.count() == 192
    assert len(report.unknown_cards) == 6
    assert set(Series.objects.filter(card__isnull=False).values_list("card_id", flat=True)) == {
        c.pk for c in known
    }
    assert (
        Series.objects.filter(card__isnull=True).exclude(card_ref="").values("card_ref").distinct().count()
        == 6
    )


def test_pci_bus_ids_map_tenstorrent_cards(inv: Any) -> None:
    node = inv.node("rig01")
    card = inv.card(node, pci_bus_id="0000:01:00.0")
    report = telemetry_ingest_text("tt-smi", fixture_text("tt_smi_4x_p150a.json"), node_hostname="rig01")
    assert report.stored == 102
    assert Series.objects.filter(card=card, metric="heartbeat").count() == 1


def test_a_malformed_tool_output_is_refused_with_the_reason(inv: Any) -> None:
    inv.node("rig01")
    with pytest.raises(IngestError) as exc:
        telemetry_ingest_text("tt-smi", "{not json", node_hostname="rig01")
    assert exc.value.errors[0].startswith("Cannot parse tt-smi output:")
    assert Sample.objects.count() == 0


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_ingest_creates_the_daily_partitions_it_needs(inv: Any) -> None:
    inv.node("gpu01")
    now = timezone.now()
    yesterday = now - dt.timedelta(days=1)
    telemetry_ingest_samples(
        [_s("gpu01", "node_power_w", 1, yesterday), _s("gpu01", "node_power_w", 2, now)], now=now
    )
    days = {d for _n, d in storage.partitions_list()}
    assert {yesterday.astimezone(dt.UTC).date(), now.astimezone(dt.UTC).date()} <= days
    with connection.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM {storage.partition_name(now.astimezone(dt.UTC).date())}")
        assert cur.fetchone()[0] == 1


def test_counter_changes_become_events(inv: Any) -> None:
    # given a link retrain counter and a DCGM last-Xid gauge already seen once
    inv.node("gpu01")
    t0 = timezone.now() - dt.timedelta(seconds=30)
    t1 = t0 + dt.timedelta(seconds=10)
    telemetry_ingest_samples(
        [
            _s("gpu01", "link_retrain_total", 0, t0, "0000:01:00.0", port="3"),
            _s("gpu01", "xid_last", 0, t0, H100_UUIDS[0]),
        ]
    )
    # when the retrain counter increases and a new Xid shows
    report = telemetry_ingest_samples(
        [
            _s("gpu01", "link_retrain_total", 2, t1, "0000:01:00.0", port="3"),
            _s("gpu01", "xid_last", 79, t1, H100_UUIDS[0]),
        ]
    )
    # then both are stored as events with their time
    assert report.events == 2
    kinds = {e.kind: e for e in Event.objects.all()}
    assert set(kinds) == {"link_retrain", "xid"}
    assert kinds["xid"].ts == t1
    assert kinds["xid"].severity == "critical"
    assert kinds["link_retrain"].card_ref == "0000:01:00.0"


def test_listeners_hear_the_changed_ids_after_commit(
    inv: Any, django_capture_on_commit_callbacks: Any
) -> None:
    node = inv.node("gpu01")
    card = inv.card(node, gpu_uuid=H100_UUIDS[0])
    heard: list[dict[str, Any]] = []

    def listener(sender: Any, **kw: Any) -> None:
        heard.append(kw)

    telemetry_ingested.connect(listener)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            telemetry_ingest_samples([_s("gpu01", "temperature_c", 50, timezone.now(), H100_UUIDS[0])])
    finally:
        telemetry_ingested.disconnect(listener)
    assert heard == [
        {"signal": telemetry_ingested, "node_ids": {node.pk}, "card_ids": {card.pk}, "alert_ids": set()}
    ]


def _drop_todays_partition_behind_the_cache(now: dt.datetime) -> str:
    name = storage.partition_name(now.astimezone(dt.UTC).date())
    with connection.cursor() as cur:
        cur.execute(f'DROP TABLE "{name}"')
    return name


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_a_partition_dropped_elsewhere_is_recreated_inside_a_callers_transaction(
    inv: Any, django_capture_on_commit_callbacks: Any
) -> None:
    # given today's partition is known to this process, then dropped by someone else
    inv.node("gpu01")
    now = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        telemetry_ingest_samples([_s("gpu01", "node_power_w", 1, now)], now=now)
    name = _drop_todays_partition_behind_the_cache(now)
    # when a batch arrives (inside the test's transaction), then it is stored in a new partition
    report = telemetry_ingest_samples([_s("gpu01", "node_power_w", 2, now)], now=now)
    assert report.stored == 1
    assert name in {n for n, _d in storage.partitions_list()}
    assert list(Sample.objects.values_list("value", flat=True)) == [2.0]
    assert LatestValue.objects.get().value == 2


@pytest.mark.skipif("connection.vendor != 'postgresql'")
@pytest.mark.django_db(transaction=True)
def test_a_partition_dropped_elsewhere_makes_the_batch_retry_once(inv: Any) -> None:
    # given a committed batch made today's partition known to this process, then it was dropped
    inv.node("gpu01")
    now = timezone.now()
    telemetry_ingest_samples([_s("gpu01", "node_power_w", 1, now)], now=now)
    name = _drop_todays_partition_behind_the_cache(now)
    # when the next batch arrives in its own transaction, then it is stored after one retry
    report = telemetry_ingest_samples([_s("gpu01", "node_power_w", 2, now)], now=now)
    assert report.stored == 1
    assert name in {n for n, _d in storage.partitions_list()}
    assert list(Sample.objects.values_list("value", flat=True)) == [2.0]
    assert LatestValue.objects.get().value == 2


def test_a_device_list_from_a_tool_updates_the_cards_enumerated_readiness(
    inv: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from inventory.models import ReadinessCheck

    # given rig01 with two of its cards in the inventory, one of which the host does not report
    node = inv.node("rig01")
    inv.card(node, pci_bus_id="0000:01:00.0")
    inv.card(node, pci_bus_id="0000:09:00.0")
    # when tt-smi's snapshot (cards 01, 02, 41, 42) is ingested
    with django_capture_on_commit_callbacks(execute=True):
        telemetry_ingest_text("tt-smi", fixture_text("tt_smi_4x_p150a.json"), node_hostname="rig01")
    # then the node fails "cards enumerated", naming the missing card
    check = ReadinessCheck.objects.get(node=node, key="cards_enumerated")
    assert (check.status, check.source) == ("fail", "auto")
    assert "0000:09:00.0" in check.detail
    # and the same list again does not re-evaluate (the verdict stays, untouched)
    ReadinessCheck.objects.filter(pk=check.pk).update(detail="kept")
    with django_capture_on_commit_callbacks(execute=True):
        telemetry_ingest_text("tt-smi", fixture_text("tt_smi_4x_p150a.json"), node_hostname="rig01")
    assert ReadinessCheck.objects.get(pk=check.pk).detail == "kept"
