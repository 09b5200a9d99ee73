"""Periodic storage work: partitions ahead, rollups over the last closed buckets, retention."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from inventory.models import Card
from monitoring import storage
from monitoring.models import Series
from monitoring.parsers.model import normalize_bus_id


def _floor(ts: dt.datetime, step: int) -> dt.datetime:
    epoch = int(ts.timestamp())
    return dt.datetime.fromtimestamp(epoch - epoch % step, tz=dt.UTC)


@transaction.atomic
def telemetry_partitions_ensure(
    *, now: dt.datetime | None = None, days_ahead: int | None = None
) -> list[str]:
    """Create today's partition and ``days_ahead`` more (PORTAL_TELEMETRY_PARTITIONS_AHEAD_DAYS)."""
    now = now or timezone.now()
    ahead = settings.PORTAL_TELEMETRY_PARTITIONS_AHEAD_DAYS if days_ahead is None else days_ahead
    today = now.astimezone(dt.UTC).date()
    return storage.partitions_ensure(today + dt.timedelta(days=d) for d in range(ahead + 1))


@transaction.atomic
def telemetry_rollup(
    *, now: dt.datetime | None = None, start: dt.datetime | None = None, end: dt.datetime | None = None
) -> dict[str, int]:
    """Recompute 1-minute buckets (default: the last 10 closed minutes) and the 1-hour buckets that
    contain them (the last 2 closed hours and the current one). Idempotent: run it as often as you like."""
    now = now or timezone.now()
    end_1m = _floor(end or now, 60)
    start_1m = _floor(start, 60) if start else end_1m - dt.timedelta(minutes=10)
    minutes = storage.rollup_compute(60, start_1m, end_1m)
    start_1h = _floor(start_1m, 3600) if start else _floor(now, 3600) - dt.timedelta(hours=2)
    hours = storage.rollup_compute(3600, start_1h, end_1m)
    return {"1m": minutes, "1h": hours}


@dataclass
class RetentionReport:
    raw: int
    rollup_1m: int
    rollup_1h: int


@transaction.atomic
def telemetry_retention(*, now: dt.datetime | None = None) -> RetentionReport:
    """Drop raw samples past PORTAL_TELEMETRY_RAW_RETENTION_DAYS (whole partitions), 1-minute rollups
    past PORTAL_TELEMETRY_1M_RETENTION_DAYS and 1-hour rollups past _1H_ (0 = keep forever)."""
    now = now or timezone.now()
    raw = storage.samples_drop_before(now - dt.timedelta(days=settings.PORTAL_TELEMETRY_RAW_RETENTION_DAYS))
    m = storage.rollups_delete_before(
        60, now - dt.timedelta(days=settings.PORTAL_TELEMETRY_1M_RETENTION_DAYS)
    )
    h_days = settings.PORTAL_TELEMETRY_1H_RETENTION_DAYS
    h = storage.rollups_delete_before(3600, now - dt.timedelta(days=h_days)) if h_days > 0 else 0
    return RetentionReport(raw=raw, rollup_1m=m, rollup_1h=h)


@transaction.atomic
def series_relink_cards() -> int:
    """Point series of cards that were unknown at first sight to the inventory card added since."""
    linked = 0
    orphans = (
        Series.objects.filter(card__isnull=True).exclude(card_ref="").values_list("id", "node_id", "card_ref")
    )
    by_node: dict[int, list[tuple[int, str]]] = {}
    for sid, nid, ref in orphans:
        by_node.setdefault(nid, []).append((sid, ref))
    if not by_node:
        return 0
    index: dict[tuple[int, str], int] = {}
    for cid, nid, uuid, bus in Card.objects.filter(node_id__in=by_node).values_list(
        "id", "node_id", "gpu_uuid", "pci_bus_id"
    ):
        if uuid:
            index[(nid, uuid)] = cid
        if bus:
            index[(nid, normalize_bus_id(bus) or bus)] = cid
    for nid, refs in by_node.items():
        for sid, ref in refs:
            card_id = index.get((nid, ref))
            if card_id is not None:
                linked += Series.objects.filter(pk=sid).update(card_id=card_id)
    if linked:
        from monitoring.services.ingest import series_cache_clear

        transaction.on_commit(series_cache_clear)
    return linked


def telemetry_maintain(*, now: dt.datetime | None = None) -> dict[str, object]:
    """Everything the hourly task does."""
    created = telemetry_partitions_ensure(now=now)
    retention = telemetry_retention(now=now)
    linked = series_relink_cards()
    return {"partitions_created": created, "retention": retention.__dict__, "series_linked": linked}
