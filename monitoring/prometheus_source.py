"""Reads from a cluster's Prometheus source: the series endpoint (and so the node and card charts)
and the job energy figures, through PromQL, for clusters whose telemetry a Prometheus-compatible
server stores. Errors reach the caller as :class:`monitoring.promql.PromError`."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from typing import Any

from django.utils.translation import gettext as _

from inventory.models import Card, Node
from monitoring.models import PrometheusSource
from monitoring.parsers.prom_mapping import NODE_METRICS, PromMapping
from monitoring.promql import PromClient, PromServer, aggregated, bounded_step, host_regex, selector
from monitoring.services.ingest import card_ref_normalise, labels_text


def source_for_cluster(cluster_id: int | None) -> PrometheusSource | None:
    """The enabled Prometheus source of a cluster, if it has one."""
    if cluster_id is None:
        return None
    return PrometheusSource.objects.filter(cluster_id=cluster_id, enabled=True).first()


def client_of(source: PrometheusSource) -> PromClient:
    return PromClient(
        PromServer(
            url=source.base_url,
            auth=source.auth,
            username=source.username,
            secret=source.secret,
            verify_tls=source.verify_tls,
            ca_cert=source.ca_cert,
            timeout_s=source.timeout_s,
        )
    )


def _names(node: Node) -> tuple[str, ...]:
    """What exporters call the node: its hostname, short name or Slurm name (as ingest resolves them)."""
    return (node.hostname, node.hostname.split(".")[0], node.slurm_name)


def _node_selectors(mapping: PromMapping, metric: str, node: Node) -> list[tuple[str, float]]:
    return [
        (selector(name, {}, {label: host_regex(*_names(node))}), scale)
        for name, scale in mapping.names_of(metric)
        for label in mapping.node_labels
    ]


def _card_selectors(mapping: PromMapping, metric: str, card: Card) -> list[tuple[str, float]]:
    ref = card.gpu_uuid or card.pci_bus_id
    if not ref:
        return []
    return [
        (selector(name, {label: ref}), scale)
        for name, scale in mapping.names_of(metric)
        for label in mapping.card_labels
    ]


def _identity(
    mapping: PromMapping, metric: str, labels: dict[str, str], cards: dict[str, int]
) -> tuple[int | None, str, str]:
    """(inventory card id, card ref, series labels) of one answered series, as remote write would
    store it (:meth:`PromMapping.kept_labels`)."""
    raw = mapping.card_of(labels) if metric not in NODE_METRICS else None
    ref = card_ref_normalise(raw)
    labels = {k: v for k, v in labels.items() if k != "agg"}
    return cards.get(ref), ref, labels_text(mapping.kept_labels(metric, labels, raw))


def _card_index(nodes: Iterable[Node]) -> dict[str, int]:
    out: dict[str, int] = {}
    for card in Card.objects.filter(node__in=list(nodes)).only("id", "gpu_uuid", "pci_bus_id"):
        for ref in (card.gpu_uuid, card.pci_bus_id):
            if ref:
                out[card_ref_normalise(ref)] = card.pk
    return out


def prometheus_series_query(
    source: PrometheusSource,
    *,
    metric: str,
    start: dt.datetime,
    end: dt.datetime,
    step: int,
    node: Node,
    card: Card | None,
) -> Any:
    """What :func:`monitoring.selectors.series_query` answers, from PromQL: per step the min, avg and
    max of each matching series over that step, the step raised to stay under the point limit."""
    from monitoring.selectors import PROMETHEUS, SeriesQueryError, SeriesResult

    mapping = PromMapping.from_data(source.mapping)
    if not mapping.names_of(metric):
        raise SeriesQueryError(
            _("The Prometheus mapping of this cluster gives no series for %(m)s.") % {"m": metric}
        )
    step = bounded_step(start, end, step)
    sels = (
        _card_selectors(mapping, metric, card) if card is not None else _node_selectors(mapping, metric, node)
    )
    answered = client_of(source).query_range(aggregated(sels, step), start, end, step) if sels else []
    cards = _card_index([node])
    by_key: dict[tuple[int | None, str, str], dict[float, list[float | None]]] = {}
    for s in answered:
        key = _identity(mapping, metric, s.labels, cards)
        slot = {"min": 1, "avg": 2, "max": 3}[s.labels["agg"]]
        points = by_key.setdefault(key, {})
        for t, v in s.points:
            points.setdefault(t, [t, None, None, None])[slot] = v
    series = [
        {
            "id": None,
            "node": node.hostname,
            "card": card_id,
            "card_ref": ref,
            "labels": kept,
            "points": [points[t] for t in sorted(points)],
        }
        for (card_id, ref, kept), points in sorted(by_key.items(), key=lambda kv: (kv[0][1], kv[0][2]))
    ]
    return SeriesResult(resolution=PROMETHEUS, step=step, start=start, end=end, series=series)


def prometheus_power_points(
    source: PrometheusSource, nodes: list[Node], start: dt.datetime, end: dt.datetime
) -> tuple[list[tuple[Any, int, str, str]], dict[Any, list[tuple[dt.datetime, float]]]]:
    """The job energy's input from PromQL: (key, node id, metric, card ref) of every card and node
    power series of ``nodes``, and their points over [start, end] at a step bounded in points."""
    mapping = PromMapping.from_data(source.mapping)
    client = client_of(source)
    step = bounded_step(start, end, 15)
    cards = _card_index(nodes)
    series: list[tuple[Any, int, str, str]] = []
    points: dict[Any, list[tuple[dt.datetime, float]]] = {}
    for metric in ("power_w", "node_power_w"):
        for node in nodes:
            sels = _node_selectors(mapping, metric, node)
            if not sels:
                continue
            expr = " or ".join(f"({sel} * {scale!r})" if scale != 1 else sel for sel, scale in sels)
            for s in client.query_range(expr, start, end, step):
                _card, ref, kept = _identity(mapping, metric, s.labels, cards)
                key = (node.pk, metric, ref, kept)
                series.append((key, node.pk, metric, ref))
                points[key] = [(dt.datetime.fromtimestamp(t, dt.UTC), v) for t, v in s.points]
    return series, points


def prometheus_check(source: PrometheusSource) -> int:
    """How many ``up`` series the server answers with the source's settings (PromError if none)."""
    return len(client_of(source).query("up"))


def prometheus_latest(
    source: PrometheusSource, *, node: Node, card: Card | None, metric: str | None
) -> list[dict[str, Any]]:
    """What the latest endpoint answers, from one instant query: the newest value of every mapped
    series of the node (or card), ``metric`` only if given."""
    mapping = PromMapping.from_data(source.mapping)
    names = [(n, scale) for n, (canon, scale) in mapping.by_name.items() if metric is None or canon == metric]
    if not names:
        return []
    pattern = "|".join(re.escape(n) for n, _scale in names)
    if card is not None:
        ref = card.gpu_uuid or card.pci_bus_id
        if not ref:
            return []
        matchers = [{label: ref} for label in mapping.card_labels]
        sels = [selector("", m, {"__name__": pattern}) for m in matchers]
    else:
        sels = [
            selector("", {}, {"__name__": pattern, label: host_regex(*_names(node))})
            for label in mapping.node_labels
        ]
    cards = _card_index([node])
    rows = []
    for s in client_of(source).query(" or ".join(sels)):
        canon, scale = mapping.by_name[s.labels["__name__"]]
        card_id, ref, kept = _identity(mapping, canon, s.labels, cards)
        ts, value = s.points[0]
        rows.append(
            {
                "series": None,
                "node": node.hostname,
                "card": card_id,
                "card_ref": ref,
                "metric": canon,
                "labels": kept,
                "ts": dt.datetime.fromtimestamp(ts, dt.UTC),
                "value": value * scale,
            }
        )
    return sorted(rows, key=lambda r: (r["metric"], r["card_ref"], r["labels"]))
