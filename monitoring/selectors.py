"""Reads of the monitoring app: latest values, series with a resolution choice, alerts, events."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Count, Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _

from monitoring import storage
from monitoring.models import (
    Alert,
    AlertRule,
    Event,
    HealthCheck,
    HealthStatus,
    LatestValue,
    NodeHealth,
    Series,
)

MAX_POINTS = 11_000
PROMETHEUS = -1  # the resolution of points a cluster's Prometheus source answered
RESOLUTION_NAMES = {0: "raw", 60: "1m", 3600: "1h", PROMETHEUS: "prometheus"}


class SeriesQueryError(ValueError):
    pass


def _target_filter(*, node: str | None = None, card: str | None = None) -> Q:
    q = Q()
    if node:
        q &= Q(node_id=int(node)) if node.isdigit() else Q(node__hostname=node)
    if card:
        q &= Q(card_id=int(card)) if card.isdigit() else (Q(card_ref=card) | Q(card__gpu_uuid=card))
    return q


def series_list(
    *, node: str | None = None, card: str | None = None, metric: str | None = None, labels: str | None = None
) -> QuerySet[Series]:
    qs = Series.objects.filter(_target_filter(node=node, card=card)).select_related("node", "card")
    if metric:
        qs = qs.filter(metric=metric)
    if labels is not None:
        qs = qs.filter(labels=labels)
    return qs.order_by("id")


def latest_value_list(
    *, node: str | None = None, card: str | None = None, metric: str | None = None
) -> QuerySet[LatestValue]:
    q = Q()
    if node:
        q &= Q(series__node_id=int(node)) if node.isdigit() else Q(series__node__hostname=node)
    if card:
        q &= (
            Q(series__card_id=int(card))
            if card.isdigit()
            else (Q(series__card_ref=card) | Q(series__card__gpu_uuid=card))
        )
    if metric:
        q &= Q(series__metric=metric)
    return LatestValue.objects.filter(q).order_by("series_id")


def resolution_choose(step: int, start: dt.datetime, *, now: dt.datetime | None = None) -> int:
    """The coarsest stored resolution not coarser than ``step`` that still covers ``start``
    (raw, 1-minute or 1-hour); if none is fine enough, the finest that covers it."""
    now = now or timezone.now()
    keep = {
        0: settings.PORTAL_TELEMETRY_RAW_RETENTION_DAYS,
        60: settings.PORTAL_TELEMETRY_1M_RETENTION_DAYS,
        3600: settings.PORTAL_TELEMETRY_1H_RETENTION_DAYS,
    }
    covering = [src for src, days in keep.items() if days <= 0 or start >= now - dt.timedelta(days=days)]
    if not covering:
        covering = [3600]
    fitting = [src for src in covering if src <= step]
    return max(fitting) if fitting else min(covering)


@dataclass
class SeriesResult:
    resolution: int
    step: int
    start: dt.datetime
    end: dt.datetime
    series: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return {
            "resolution": RESOLUTION_NAMES[self.resolution],
            "step": self.step,
            "from": self.start.isoformat(),
            "to": self.end.isoformat(),
            "series": self.series,
        }


def series_query(
    *,
    metric: str,
    start: dt.datetime,
    end: dt.datetime,
    step: int,
    node: str | None = None,
    card: str | None = None,
    labels: str | None = None,
    now: dt.datetime | None = None,
) -> SeriesResult:
    """Points ``[epoch s, min, avg, max]`` of the matching series, bucketed by ``step`` seconds."""
    if end <= start:
        raise SeriesQueryError(_("'to' must be after 'from'"))
    if step < 1:
        raise SeriesQueryError(_("'step' must be at least 1 second"))
    if not node and not card:
        raise SeriesQueryError(_("give a 'card' or a 'node'"))
    target = prometheus_target(node=node, card=card)
    if target is not None:
        from monitoring.prometheus_source import prometheus_series_query

        prom, target_node, target_card = target
        return prometheus_series_query(
            prom, metric=metric, start=start, end=end, step=step, node=target_node, card=target_card
        )
    source = resolution_choose(step, start, now=now)
    step = max(step, source or 1)
    if (end - start).total_seconds() / step > MAX_POINTS:
        raise SeriesQueryError(_("more than %(n)s points: use a larger 'step'") % {"n": MAX_POINTS})
    rows = list(
        series_list(node=node, card=card, metric=metric, labels=labels).values(
            "id", "node__hostname", "card_id", "card_ref", "labels"
        )
    )
    points: dict[int, list[list[float]]] = {r["id"]: [] for r in rows}
    for sid, bucket, mn, av, mx in storage.series_buckets(list(points), step, start, end, source):
        points[sid].append([bucket, mn, av, mx])
    series = [
        {
            "id": r["id"],
            "node": r["node__hostname"],
            "card": r["card_id"],
            "card_ref": r["card_ref"],
            "labels": r["labels"],
            "points": points[r["id"]],
        }
        for r in rows
    ]
    return SeriesResult(resolution=source, step=step, start=start, end=end, series=series)


@dataclass(frozen=True)
class SeriesStats:
    """One series summarised over a window (see :func:`series_window_stats`)."""

    series_id: int
    node_id: int
    card_id: int | None
    card_ref: str
    metric: str
    labels: str
    min: float
    mean: float
    max: float
    samples: int
    share_above: float


def window_resolution(start: dt.datetime, end: dt.datetime, *, now: dt.datetime | None = None) -> int:
    """The stored resolution a window's summary reads: buckets at most a twentieth of the window
    (a 24 h job reads 1 h rollups, a 2 h job 1 min rollups, a 10 min job raw samples)."""
    return resolution_choose(max(1, int((end - start).total_seconds() / 20)), start, now=now)


def series_window_stats(
    *,
    node_ids: Iterable[int],
    metrics: Iterable[str],
    start: dt.datetime,
    end: dt.datetime,
    above: dict[str, float] | None = None,
    now: dt.datetime | None = None,
) -> tuple[int, list[SeriesStats]]:
    """(resolution read, min / mean / max / samples of every series of these metrics on these
    nodes over [start, end)). ``above``: metric -> threshold, for the share of time above it."""
    source = window_resolution(start, end, now=now)
    rows = list(
        Series.objects.filter(node_id__in=list(node_ids), metric__in=list(metrics)).values_list(
            "id", "node_id", "card_id", "card_ref", "metric", "labels"
        )
    )
    meta = {r[0]: r for r in rows}
    above = above or {}
    groups: dict[float | None, list[int]] = {}
    for r in rows:
        groups.setdefault(above.get(r[4]), []).append(r[0])
    out: list[SeriesStats] = []
    for threshold, ids in groups.items():
        for sid, mn, mean, mx, n, share in storage.series_window_aggregate(
            ids, start, end, source, above=threshold
        ):
            _id, node_id, card_id, card_ref, metric, labels = meta[sid]
            out.append(SeriesStats(sid, node_id, card_id, card_ref, metric, labels, mn, mean, mx, n, share))
    return source, out


def event_window_list(*, node_ids: Iterable[int], start: dt.datetime, end: dt.datetime) -> QuerySet[Event]:
    """Telemetry events of these nodes in [start, end], oldest first."""
    return (
        Event.objects.filter(node_id__in=list(node_ids), ts__gte=start, ts__lte=end)
        .select_related("node", "card")
        .order_by("ts", "id")
    )


def prometheus_target(*, node: str | None, card: str | None) -> tuple[Any, Any, Any] | None:
    """(source, node, card) when the node or card asked for is of a cluster whose telemetry an
    enabled Prometheus source holds; None (the portal's own store) otherwise."""
    from inventory.models import Card, Node
    from monitoring.models import PrometheusSource
    from monitoring.prometheus_source import source_for_cluster

    if not PrometheusSource.objects.filter(enabled=True).exists():
        return None
    found_card = None
    if card:
        cards = Card.objects.select_related("node")
        q = Q(pk=int(card)) if card.isdigit() else Q(gpu_uuid=card) | Q(pci_bus_id=card)
        found_card = cards.filter(q).first()
        found_node = found_card.node if found_card else None
    else:
        assert node is not None
        q = Q(pk=int(node)) if node.isdigit() else Q(hostname=node)
        found_node = Node.objects.filter(q).first()
    if found_node is None:
        return None
    source = source_for_cluster(found_node.cluster_id)
    return (source, found_node, found_card) if source else None


def alert_list(*, status: str | None = None, node: str | None = None) -> QuerySet[Alert]:
    qs = Alert.objects.select_related("rule", "node", "card", "acknowledged_by")
    if status:
        qs = qs.filter(status=status)
    if node:
        qs = qs.filter(node_id=int(node)) if node.isdigit() else qs.filter(node__hostname=node)
    return qs


def prometheus_source_list() -> QuerySet[Any]:
    from monitoring.models import PrometheusSource

    return PrometheusSource.objects.select_related("cluster").order_by("cluster__name")


def alert_rule_list() -> QuerySet[AlertRule]:
    return AlertRule.objects.select_related("cluster")


def event_list(
    *, node: str | None = None, kind: str | None = None, since: dt.datetime | None = None
) -> QuerySet[Event]:
    qs = Event.objects.select_related("node", "card")
    if node:
        qs = qs.filter(node_id=int(node)) if node.isdigit() else qs.filter(node__hostname=node)
    if kind:
        qs = qs.filter(kind=kind)
    if since:
        qs = qs.filter(ts__gte=since)
    return qs


def unknown_card_refs(node_ids: Iterable[int] | None = None) -> dict[int, list[str]]:
    """node id -> card ids the tools report that the inventory does not know (readiness uses this)."""
    qs = Series.objects.filter(card__isnull=True).exclude(card_ref="")
    if node_ids is not None:
        qs = qs.filter(node_id__in=list(node_ids))
    out: dict[int, list[str]] = {}
    for nid, ref in qs.values_list("node_id", "card_ref").distinct().order_by("node_id", "card_ref"):
        out.setdefault(nid, []).append(ref)
    return out


def metrics_exposition(*, max_age_s: int = 600, now: dt.datetime | None = None) -> str:
    """Prometheus text (0.0.4): the portal's own health and every fresh latest value."""
    from inventory.models import Node

    now = now or timezone.now()
    lines = [
        "# HELP rackpilot_up Rackpilot answers.",
        "# TYPE rackpilot_up gauge",
        "rackpilot_up 1",
        "# HELP rackpilot_nodes Nodes in the inventory.",
        "# TYPE rackpilot_nodes gauge",
        f"rackpilot_nodes {Node.objects.count()}",
        "# HELP rackpilot_series Telemetry series known.",
        "# TYPE rackpilot_series gauge",
        f"rackpilot_series {Series.objects.count()}",
        "# HELP rackpilot_alerts_firing Open alerts by severity.",
        "# TYPE rackpilot_alerts_firing gauge",
    ]
    firing = _firing_by_severity()
    for sev in ("info", "warning", "critical"):
        lines.append(f'rackpilot_alerts_firing{{severity="{sev}"}} {firing.get(sev, 0)}')
    rows = (
        LatestValue.objects.filter(ts__gte=now - dt.timedelta(seconds=max_age_s))
        .order_by("series__metric", "series_id")
        .values_list(
            "series__metric", "series__node__hostname", "series__card_ref", "series__labels", "value"
        )
    )
    current = None
    for metric, host, ref, labels, value in rows.iterator(chunk_size=5000):
        name = f"rackpilot_{metric}"
        if metric != current:
            lines.append(f"# TYPE {name} gauge")
            current = metric
        parts = [f'node="{_esc(host)}"']
        if ref:
            parts.append(f'card="{_esc(ref)}"')
        for pair in labels.split(",") if labels else ():
            k, _sep, v = pair.partition("=")
            parts.append(f'{k}="{_esc(v)}"')
        lines.append(f"{name}{{{','.join(parts)}}} {value!r}")
    return "\n".join(lines) + "\n"


def _firing_by_severity() -> dict[str, int]:
    from django.db.models import Count

    return {
        row["severity"]: row["n"]
        for row in Alert.objects.filter(status=Alert.Status.FIRING).values("severity").annotate(n=Count("id"))
    }


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


ENERGY_GROUPS = {"job": "job__job_id", "user": "job__user", "account": "job__account", "month": "month"}


def job_energy_summary(
    *, user: Any, group_by: str = "job", cluster: str | None = None
) -> list[dict[str, Any]]:
    """Energy and cost grouped by job, cluster user, Slurm account or month (of the job's end).

    Users without jobs.view_all_jobs see their own jobs only.
    """
    from django.db.models import Count, Sum
    from django.db.models.functions import TruncMonth

    from monitoring.models import JobEnergy

    if group_by not in ENERGY_GROUPS:
        raise ValueError(f"group_by must be one of {', '.join(ENERGY_GROUPS)}")
    qs = JobEnergy.objects.all()
    if not user.has_perm("jobs.view_all_jobs"):
        qs = qs.filter(job__owner=user)
    if cluster:
        qs = qs.filter(job__cluster__name=cluster)
    key = ENERGY_GROUPS[group_by]
    if group_by == "month":
        qs = qs.annotate(month=TruncMonth("job__end_time"))
    rows = (
        qs.values(key)
        .annotate(
            jobs=Count("id"),
            energy_kwh=Sum("energy_kwh"),
            energy_cost=Sum("energy_cost"),
            hardware_cost=Sum("hardware_cost"),
            total_cost=Sum("total_cost"),
        )
        .order_by(key)
    )
    return [
        {
            group_by: r[key].date().isoformat()[:7] if group_by == "month" and r[key] else r[key],
            "jobs": r["jobs"],
            "energy_kwh": round(r["energy_kwh"] or 0.0, 6),
            "energy_cost": str(r["energy_cost"]),
            "hardware_cost": str(r["hardware_cost"]),
            "total_cost": str(r["total_cost"]),
        }
        for r in rows
    ]


def job_energy_get(job: Any) -> Any:
    from monitoring.models import JobEnergy

    return JobEnergy.objects.filter(job=job).first()


def alert_activity(*, node_id: int, user: Any, card_id: int | None = None, limit: int = 10) -> dict[str, Any]:
    """A node's (or one card's) alerts, the firing ones first, and its newest events, as the context
    of live/alert_activity.html (``hidden`` for a user who may not see alerts)."""
    if user is None or not user.has_perm("monitoring.view_alert"):
        return {"hidden": True}
    alerts = Alert.objects.select_related("rule", "card").filter(node_id=node_id)
    events = Event.objects.select_related("card").filter(node_id=node_id)
    if card_id is not None:
        alerts, events = alerts.filter(card_id=card_id), events.filter(card_id=card_id)
    return {
        "node_id": node_id,
        "card_id": card_id,
        "alerts": list(alerts.order_by("status", "-started_at", "-pk")[:limit]),
        "events": list(events[:limit]),
    }


def card_window_telemetry(
    card_ids: Iterable[int], metrics: Iterable[str], start: dt.datetime, end: dt.datetime
) -> dict[int, dict[str, dict[str, list[tuple[dt.datetime, float]]]]]:
    """Raw samples of some cards over [start, end): card id -> metric -> labels -> [(ts, value)]
    (a burn-in's evidence; at most one run's window of a few cards)."""
    series = list(
        Series.objects.filter(card_id__in=list(card_ids), metric__in=list(metrics)).values_list(
            "id", "card_id", "metric", "labels"
        )
    )
    keys = {sid: (card_id, metric, labels) for sid, card_id, metric, labels in series}
    out: dict[int, dict[str, dict[str, list[tuple[dt.datetime, float]]]]] = {}
    for sid, ts, value in storage.raw_points(list(keys), start, end):
        card_id, metric, labels = keys[sid]
        out.setdefault(card_id, {}).setdefault(metric, {}).setdefault(labels, []).append((ts, value))
    return out


def card_window_events(
    card_ids: Iterable[int], start: dt.datetime, end: dt.datetime
) -> dict[int, list[tuple[dt.datetime, str]]]:
    """card id -> [(ts, kind)] of its events in [start, end], oldest first."""
    out: dict[int, list[tuple[dt.datetime, str]]] = {}
    rows = (
        Event.objects.filter(card_id__in=list(card_ids), ts__gte=start, ts__lte=end)
        .order_by("ts", "id")
        .values_list("card_id", "ts", "kind")
    )
    for card_id, ts, kind in rows:
        out.setdefault(card_id, []).append((ts, kind))
    return out


def card_energy_kwh(card_ids: Iterable[int], *, now: dt.datetime | None = None) -> dict[int, float]:
    """card id -> energy drawn since its telemetry began, in kWh, from the hourly power rollups (and the
    1-minute ones for the hour not yet rolled up)."""
    now = now or timezone.now()
    ids = Series.objects.filter(card_id__in=list(card_ids), metric="power_w").order_by(
        "card_id", "labels", "id"
    )
    by_series: dict[int, int] = {}
    for sid, card_id in ids.values_list("id", "card_id"):  # one power series per card (the first)
        if card_id not in by_series.values():
            by_series[sid] = card_id
    out = dict.fromkeys(by_series.values(), 0.0)
    if not by_series:
        return out
    hour = now.replace(minute=0, second=0, microsecond=0)
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    for sid, _b, _mn, avg, _mx in storage.series_buckets(list(by_series), 3600, epoch, hour, 3600):
        out[by_series[sid]] += avg / 1000
    for sid, _b, _mn, avg, _mx in storage.series_buckets(list(by_series), 60, hour, now, 60):
        out[by_series[sid]] += avg / 1000 / 60
    return out


def health_check_list() -> QuerySet[HealthCheck]:
    return HealthCheck.objects.select_related("cluster", "card_model").annotate(
        failing=Count("states", filter=Q(states__status=HealthStatus.FAILING))
    )


def node_health_list() -> QuerySet[NodeHealth]:
    """Every check's standing on every node, the failing ones first."""
    return NodeHealth.objects.select_related("node", "health_check").order_by(
        "status", "node__hostname", "health_check__name"
    )


def node_failing_checks(node_ids: Iterable[int]) -> dict[int, list[str]]:
    """{node id: names of the health checks failing there}: a node with any is shown unhealthy."""
    out: dict[int, list[str]] = {}
    rows = NodeHealth.objects.filter(node_id__in=list(node_ids), status=HealthStatus.FAILING)
    for node_id, name in rows.order_by("health_check__name").values_list("node_id", "health_check__name"):
        out.setdefault(node_id, []).append(name)
    return out
