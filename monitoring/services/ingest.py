"""Telemetry ingest: validate a batch, resolve series, COPY samples, store events, evaluate the
alert rules of the touched targets, all in one transaction; write the latest values behind it once
it commits (this process's writer: storage's "latest values, written behind the batch"; inside a
caller's transaction, in it); hand the changed ids to ``telemetry_ingested`` once both are committed.

Entry points (the HTTP endpoint, the pull collectors and the simulator use them):
``telemetry_ingest_text(format, text, node_hostname=…)`` and ``telemetry_ingest_samples(samples)``.
A batch is all or nothing: any invalid sample raises ``IngestError`` and nothing is stored.
"""

from __future__ import annotations

import datetime as dt
import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

from django.conf import settings
from django.core.cache import cache as django_cache
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from inventory.models import Card, Node
from inventory.readiness import readiness_evaluate
from monitoring import storage
from monitoring.models import Event, LatestValue, Series
from monitoring.parsers import Event as ParsedEvent
from monitoring.parsers import ParseError, ParseResult, ParseWarning, heartbeat_events, parse, xid_events
from monitoring.parsers.metrics import BOUNDS, METRICS
from monitoring.parsers.model import normalize_bus_id
from monitoring.signals import telemetry_ingested

# series key: (hostname as reported, card ref, metric, labels text) -> (series id, node id, card id)
SeriesKey = tuple[str, str, str, str]
SeriesInfo = tuple[int, int, int | None]
# one validated sample: (series key, ts, value, series info if this process knows it already)
Item = tuple[SeriesKey, dt.datetime, float, SeriesInfo | None]
# what alert evaluation needs of a series: (metric, card ref, labels, node id, card id)
SeriesMeta = tuple[str, str, str, int, int | None]

# an Item's fields, and a series info's, taken by map() in C: a batch is passed over many times
_KEY, _TS, _VALUE, _INFO = (operator.itemgetter(i) for i in range(4))
_SID, _NODE, _CARD = (operator.itemgetter(i) for i in range(3))
_METRIC = operator.itemgetter(2)

_series_cache: dict[str, dict[SeriesKey, SeriesInfo]] = {}
SERIES_CACHE_MAX = 2_000_000
STATEFUL_METRICS = frozenset({"xid_last", "heartbeat", "link_retrain_total", "link_up"})
# counters with a derived rate metric, stored in the same batch (per device: the labels match)
RATE_COUNTERS: dict[str, str] = {
    "net_rx_bytes_total": "net_util_pct",
    "net_tx_bytes_total": "net_util_pct",
    "disk_reads_total": "disk_iops",
    "disk_writes_total": "disk_iops",
}
LINK_SPEED = "net_speed_bytes_per_s"
# a previous value older than this is a gap (agent down), not a rate
RATE_MAX_GAP_S = 900


class IngestError(ValueError):
    """The batch was refused; ``errors`` are human-readable reasons. Nothing was stored."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(self.errors))


@dataclass
class IngestReport:
    stored: int = 0
    events: int = 0
    skipped: int = 0
    duplicates: int = 0
    series_created: int = 0
    unknown_cards: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    alert_ids: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "stored": self.stored,
            "events": self.events,
            "skipped": self.skipped,
            "duplicates": self.duplicates,
            "series_created": self.series_created,
            "unknown_cards": self.unknown_cards,
            "problems": self.problems,
            "warnings": self.warnings,
            "alerts": self.alert_ids,
        }


# Labels that tell series of one metric apart on a card/node (``instance``: BMC sensors sharing a
# name, two "Temp" on a Dell). Others (index, board_type, sensor thresholds, peer chip…) describe
# rather than identify, and would split a series when they change.
SERIES_LABELS = frozenset({"sensor", "instance", "port", "chip", "scope", "xid", "device"})


def labels_text(labels: Iterable[tuple[str, str]] | Mapping[str, Any] | None) -> str:
    if not labels:
        return ""
    pairs = labels.items() if isinstance(labels, Mapping) else labels
    kept = sorted((str(k), str(v)) for k, v in pairs if k in SERIES_LABELS)
    return ",".join(f"{k}={v}" for k, v in kept)[:255]


def card_ref_normalise(raw: str | None) -> str:
    """GPU/MIG UUIDs kept as they are; PCI addresses normalised to ``0000:3b:00.0``."""
    if not raw:
        return ""
    known = _refs.get(raw)
    if known is not None:
        return known
    ref = raw.strip()
    if ref[:4].upper() not in ("GPU-", "MIG-"):
        ref = normalize_bus_id(ref) or ref[:64]
    if len(_refs) >= REFS_MAX:  # the cards of a cluster: a bound, not an eviction policy
        _refs.clear()
    _refs[raw] = ref
    return ref


# raw card ids as the tools print them -> card_ref_normalise's result (every batch names the same)
_refs: dict[str, str] = {}
REFS_MAX = 200_000


def series_cache_clear() -> None:
    """Forget this process's series ids (and its alert rule index)."""
    from monitoring.services.alerts import alert_rules_forget

    _series_cache.clear()
    alert_rules_forget()


def _cache() -> dict[SeriesKey, SeriesInfo]:
    return _series_cache.setdefault(str(connection.settings_dict["NAME"]), {})


# -- public entry points ------------------------------------------------------------------------
def telemetry_ingest_text(
    format_name: str, text: str, *, node_hostname: str, ts: dt.datetime | None = None
) -> IngestReport:
    """Parse one tool output of ``format_name`` from ``node_hostname`` and ingest it."""
    now = timezone.now()
    try:
        result = parse(format_name, text, node=node_hostname, ts=ts or now)
    except ParseError as exc:
        raise IngestError(
            [_("Cannot parse %(format)s output: %(reason)s") % {"format": format_name, "reason": exc}]
        )
    return telemetry_ingest_result(result, node_hostname=node_hostname, now=now)


def telemetry_ingest_result(
    result: ParseResult, *, node_hostname: str | None, now: dt.datetime | None = None
) -> IngestReport:
    """Ingest parsed samples: of ``node_hostname`` (the node that ran the tool, whatever name the
    tool prints), or with ``None`` of each sample's own node (series a Prometheus collected)."""
    now = now or timezone.now()
    items: list[Item] = []
    skipped = 0
    refused: list[str] = []
    cache = _cache()
    for s in result.samples:
        if not math.isfinite(s.value):
            skipped += 1
            continue
        lo, hi = BOUNDS[s.metric]
        if not lo <= s.value <= hi:  # a tool's bad line is a problem of the batch, not its end
            refused.append(_implausible(s.metric, s.value, where=s.card or labels_text(s.labels)))
            continue
        key = (node_hostname or s.node or "", card_ref_normalise(s.card), s.metric, labels_text(s.labels))
        items.append((key, s.ts or now, s.value, cache.get(key)))
    report = _ingest(items, result.events, now=now, default_host=node_hostname)
    if result.cards and node_hostname:
        host, seen = node_hostname, sorted({i for c in result.cards for i in (c.uuid, c.bus_id) if i})
        transaction.on_commit(lambda: readiness_from_enumeration(host, seen))
    report.skipped += skipped + len(refused)
    problems = [f"line {p.line}: {p.field or ''} {p.reason}".strip() for p in result.problems]
    report.problems = [*problems, *refused][:50]
    report.warnings = [_warning_text(w) for w in result.warnings][:50]
    return report


def _implausible(metric: str, value: float, *, where: str = "") -> str:
    lo, hi = BOUNDS[metric]
    unit = METRICS[metric][0]
    text = _("%(metric)s = %(value)s %(unit)s is outside the plausible range %(lo)s .. %(hi)s %(unit)s") % {
        "metric": metric,
        "value": f"{value:g}",
        "unit": unit,
        "lo": f"{lo:g}",
        "hi": f"{hi:g}",
    }
    return f"{where}: {text}" if where else text


def _warning_text(w: ParseWarning) -> str:
    if w.code == "unknown_field":
        return _("Field %(field)s is not one the portal reads; its column was ignored.") % {"field": w.field}
    if w.code == "duplicate_field":
        return _("Field %(field)s repeats a value an earlier column gives; its column was ignored.") % {
            "field": w.field
        }
    if w.code == "no_card_id":
        return _("No index, uuid or pci.bus_id column: cards are numbered in row order.")
    return _("Ignored: %(what)s") % {"what": f"{w.code} {w.field or ''}".strip()}


def readiness_from_enumeration(node_hostname: str, seen: Sequence[str]) -> None:
    """A tool listed the node's devices: re-evaluate its readiness ("cards enumerated vs inventory")
    when that list changed, or at least hourly; never on every sample batch."""
    key = f"monitoring:seen-cards:{node_hostname}"
    if not seen or django_cache.get(key) == list(seen):
        return
    node = Node.objects.filter(hostname=node_hostname).first()
    if node is None:
        return
    readiness_evaluate(node, seen=seen)
    django_cache.set(key, list(seen), timeout=3600)


def telemetry_ingest_samples(
    samples: Sequence[Mapping[str, Any]], *, only_node: str | None = None, now: dt.datetime | None = None
) -> IngestReport:
    """Ingest JSON-shaped samples ``{"ts", "node", "card", "metric", "value", "labels"?}``.

    ``ts`` is ISO 8601 (naive = UTC) or epoch seconds; ``card`` may be empty for node metrics;
    ``value`` a finite number within the metric's plausible range (``metrics.BOUNDS``).
    ``only_node``: a node token's hostname; every sample must be for it (``node`` may be omitted).
    A sample repeating an earlier one of the batch (same series and ts) is dropped: the first wins.
    """
    now = now or timezone.now()
    items = _columns_checked(samples, only_node, now)
    if items is None:  # something is off: the careful pass says what, sample by sample
        items = _samples_checked(samples, only_node, now)
    return _ingest(items, (), now=now, default_host=only_node)


_NUMBER_TYPES = frozenset({float, int})
_LOWEST = {metric: lo for metric, (lo, _hi) in BOUNDS.items()}
_HIGHEST = {metric: hi for metric, (_lo, hi) in BOUNDS.items()}


def _columns_checked(
    samples: Sequence[Mapping[str, Any]], only_node: str | None, now: dt.datetime
) -> list[Item] | None:
    """The batch validated column by column (each check one pass over one field, the distinct
    times, cards and hosts parsed once); ``None`` when any check fails."""
    if not samples:
        return []
    try:
        if set(map(type, samples)) != {dict}:
            return None
        n = len(samples)
        # the columns are Any until checked: each check below makes one of them what Item says
        metrics: list[Any] = [s.get("metric") for s in samples]
        if not METRICS.keys() >= set(metrics):
            return None
        values: list[Any] = [s.get("value") for s in samples]
        types = set(map(type, values))
        if not types <= _NUMBER_TYPES:
            return None
        if int in types:
            values = [float(v) for v in values]
        # NaN fails both comparisons, infinities the bounds (compared in C: map, not a generator)
        if not all(map(operator.le, map(_LOWEST.__getitem__, metrics), values)) or not all(
            map(operator.le, values, map(_HIGHEST.__getitem__, metrics))
        ):
            return None
        hosts: list[Any] = [s.get("node") for s in samples]
        distinct_hosts = set(hosts)
        if only_node is not None:
            if not distinct_hosts <= {only_node, None, ""}:
                return None
            if distinct_hosts != {only_node}:
                hosts = [only_node] * n
        elif not all(type(h) is str and h for h in distinct_hosts):
            return None
        raw_ts = [s.get("ts") for s in samples]
        times = {raw: _parse_ts(raw, now) for raw in set(raw_ts)}
        tss = [times[raw] for raw in raw_ts] if len(times) > 1 else [times[raw_ts[0]]] * n
        cards = [s.get("card") or "" for s in samples]
        refs_of = {}
        for card in set(cards):
            if type(card) is not str:
                return None
            refs_of[card] = card_ref_normalise(card)
        refs = [refs_of[c] for c in cards]
        labels = [s.get("labels") for s in samples]
        if any(labels):
            if not all(x is None or type(x) is dict for x in labels):
                return None
            ltexts = [labels_text(x) if x else "" for x in labels]
        else:
            ltexts = [""] * n
    except (TypeError, ValueError, OverflowError):  # unhashable fields, bad times, huge integers
        return None
    keys = list(zip(hosts, refs, metrics, ltexts, strict=True))
    return list(zip(keys, tss, values, map(_cache().get, keys), strict=True))


def _samples_checked(
    samples: Sequence[Mapping[str, Any]], only_node: str | None, now: dt.datetime
) -> list[Item]:
    """The careful pass: every sample checked on its own; raises IngestError with the reasons."""
    items: list[Item] = []
    append = items.append
    errors: list[str] = []
    known = METRICS
    times: dict[str, dt.datetime] = {}
    refs: dict[str, str] = {}
    isfinite = math.isfinite
    known_series = _cache().get
    for i, s in enumerate(samples):
        try:
            if type(s) is not dict and not isinstance(s, Mapping):
                raise ValueError(_("not an object"))
            metric = s.get("metric")
            if type(metric) is not str or metric not in known:
                raise ValueError(_("unknown metric %(m)r") % {"m": metric})
            host = s.get("node") or only_node
            if not host or type(host) is not str and not isinstance(host, str):
                raise ValueError(_("'node' is required"))
            if only_node is not None and host != only_node:
                raise ValueError(_("this token may only send samples for %(node)s") % {"node": only_node})
            value: Any = s.get("value")
            vtype = type(value)
            if vtype is not float and (vtype is bool or not isinstance(value, int | float)):
                raise ValueError(_("'value' must be a finite number"))
            try:
                value = float(value)
            except OverflowError:
                raise ValueError(_("'value' must be a finite number")) from None
            if not isfinite(value):
                raise ValueError(_("'value' must be a finite number"))
            lo, hi = BOUNDS[metric]
            if not lo <= value <= hi:
                raise ValueError(_implausible(metric, value))
            raw_ts = s.get("ts")
            if type(raw_ts) is str:
                ts = times.get(raw_ts)
                if ts is None:
                    ts = times[raw_ts] = _parse_ts(raw_ts, now)
            else:
                ts = _parse_ts(raw_ts, now)
            card = s.get("card") or ""
            ref = refs.get(card) if type(card) is str else None
            if ref is None:
                if not isinstance(card, str):
                    raise ValueError(_("'card' must be a string"))
                ref = refs[card] = card_ref_normalise(card)
            labels = s.get("labels")
            if labels is None:
                ltext = ""
            elif isinstance(labels, Mapping):
                ltext = labels_text(labels)
            else:
                raise ValueError(_("'labels' must be an object"))
            key = (host, ref, metric, ltext)
            append((key, ts, value, known_series(key)))
        except ValueError as exc:
            errors.append(f"[{i}] {exc}")
            if len(errors) >= 20:
                break
    if errors:
        raise IngestError(errors)
    return items


def _parse_ts(raw: Any, now: dt.datetime) -> dt.datetime:
    if raw is None:
        return now
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        try:
            return dt.datetime.fromtimestamp(raw, tz=dt.UTC)
        except (OverflowError, OSError, ValueError):  # beyond what a datetime holds (e.g. 1e20)
            raise ValueError(_("'ts' %(v)s is out of range") % {"v": str(raw)[:40]}) from None
    if isinstance(raw, str):
        try:
            ts = dt.datetime.fromisoformat(raw)
        except ValueError:
            raise ValueError(_("'ts' is not an ISO 8601 time: %(v)r") % {"v": raw[:40]}) from None
        return ts if ts.tzinfo is not None else ts.replace(tzinfo=dt.UTC)
    raise ValueError(_("'ts' must be an ISO 8601 string or epoch seconds"))


# -- the batch ----------------------------------------------------------------------------------
def _ingest(
    items: Sequence[Item], parsed_events: Iterable[ParsedEvent], *, now: dt.datetime, default_host: str | None
) -> IngestReport:
    parsed_events = list(parsed_events)
    days: list[dt.date] = []
    if items:
        distinct = set(map(_TS, items))  # a batch usually carries one or a few times
        lo, hi = min(distinct), max(distinct)
        _check_window(items, lo, hi, now)
        first, last = lo.astimezone(dt.UTC).date(), hi.astimezone(dt.UTC).date()
        days = [first + dt.timedelta(days=d) for d in range((last - first).days + 1)]
    args = (items, parsed_events, days)
    if connection.in_atomic_block:  # inside the caller's transaction: a savepoint guards the COPY
        return _ingest_atomic(*args, now=now, default_host=default_host, nested=True)
    try:
        return _ingest_atomic(*args, now=now, default_host=default_host)
    except storage.PartitionMissing:  # dropped since this process checked: the batch is retried once
        storage.partitions_forget()
        return _ingest_atomic(*args, now=now, default_host=default_host)
    except storage.SamplesRepeated:  # some were stored before (an agent resending): merge them
        return _ingest_atomic(*args, now=now, default_host=default_host, merge=True)


def _ingest_atomic(
    items: Sequence[Item],
    parsed_events: list[ParsedEvent],
    days: list[dt.date],
    *,
    now: dt.datetime,
    default_host: str | None,
    nested: bool = False,
    merge: bool = False,
) -> IngestReport:
    from monitoring.services.alerts import (
        alert_rules_by_metric,
        alert_states_read,
        alerts_evaluate,
        alerts_plan,
    )

    report = IngestReport()
    # latest values written behind the batch, once its samples are committed (storage's "latest
    # values, written behind the batch"); inside a caller's transaction, in it
    behind = storage.latest_behind()
    with transaction.atomic():
        missing = {it[0] for it in items if it[3] is None} if None in map(_INFO, items) else None
        fresh = _resolve_series(missing, report) if missing else {}
        if not RATE_COUNTERS.keys().isdisjoint(map(_METRIC, map(_KEY, items))):
            derived = _derived_rates(items, fresh)
            missing = {it[0] for it in derived if it[3] is None} - fresh.keys()
            if missing:
                fresh.update(_resolve_series(missing, report))
            items = [*items, *derived]
        if fresh:
            items = [it if it[3] is not None else (it[0], it[1], it[2], fresh[it[0]]) for it in items]
        sids: list[int] = list(map(_SID, map(_INFO, items)))  # every item has its series now
        tss: list[dt.datetime] = list(map(_TS, items))
        # one sample per (series, ts); a batch of one time repeats none when its series don't
        if len(set(sids) if len(set(tss)) == 1 else set(zip(sids, tss, strict=True))) < len(items):
            items, sids, tss = _first_of_each(items, sids, tss, report)
        values: list[float] = list(map(_VALUE, items))
        rules = alert_rules_by_metric()  # before the batch's first statement: it may read
        rows = list(zip(tss, sids, values, strict=True))
        early = bool(items) and not nested and not merge
        packed: bytes | None = None
        watch: _Watch | None = None

        def before_copy() -> None:
            """While PostgreSQL begins the transaction and reads the alert states: the COPY
            stream is packed."""
            nonlocal packed
            packed = storage.copy_stream(tss, sids, values)

        # the alert states of the batch's series, read with the transaction's BEGIN (in its
        # round trip, while the work above is done)
        reads = [alert_states_read(min(sids), max(sids))] if rules and sids else []
        found = storage.reads_first(reads, meanwhile=before_copy if early else None)
        state_rows = found[0] if reads else None

        def meanwhile() -> None:
            """While PostgreSQL copies the samples (no query on this connection): what alert
            evaluation needs is prepared."""
            nonlocal watch
            watch = _watch(items, sids, values, rules, state_rows)
            watch.plan = alerts_plan(watch.series, rules=rules, state_rows=state_rows)

        if items:
            stored = _samples_store(
                rows,
                days,
                nested=nested,
                merge=merge,
                meanwhile=meanwhile if early else None,
                packed=packed,
            )
            if stored is not None and len(stored) < len(items):  # the rest were stored before
                keep = [i for i, pair in enumerate(zip(sids, tss, strict=True)) if pair in stored]
                report.duplicates += len(items) - len(keep)
                items = [items[i] for i in keep]
                sids, tss = [sids[i] for i in keep], [tss[i] for i in keep]
                values = [values[i] for i in keep]
        report.stored = len(items)
        if watch is None:
            watch = _watch(items, sids, values, rules, state_rows)
        series, watched, stateful = watch.series, watch.watched, watch.stateful
        events = _store_events([*parsed_events, *_derived_events(stateful)], default_host)
        report.events = len(events)
        # the previous values stall rules compare with: this batch's latest values have not moved
        # yet (written behind, after the commit; or in the upsert's round trip, after the reads)
        plan = watch.plan or alerts_plan(series, rules=rules, state_rows=state_rows)
        newest = _newest(sids, tss, values)
        read = storage.latest_upsert([] if behind else list(zip(*newest, strict=True)), reads=plan.reads)
        alert_ids = alerts_evaluate(series, watched, events, now=now, plan=plan, read=read)
        report.alert_ids = sorted(alert_ids)
        node_ids = watch.node_ids | {e.node_id for e in events}
        card_ids = watch.card_ids

        def ingested() -> None:
            telemetry_ingested.send(
                sender=Series, node_ids=node_ids, card_ids=card_ids, alert_ids=set(alert_ids)
            )

        if behind and sids:  # the live frames once the latest values are committed too
            transaction.on_commit(lambda: storage.latest_later(*newest, then=ingested))
        else:
            transaction.on_commit(ingested)
    return report


@dataclass
class _Watch:
    """What alert evaluation and the ingest signal need of a batch's stored items."""

    series: dict[int, SeriesMeta]  # series with rules -> (metric, card ref, labels, node id, card id)
    watched: dict[int, list[tuple[dt.datetime, float]]]  # their points
    stateful: list[tuple[int, Item]]  # points of STATEFUL_METRICS (derived events)
    node_ids: set[int]
    card_ids: set[int]
    plan: Any = None  # alerts.SeriesPlan of ``series``


def _watch(
    items: Sequence[Item],
    sids: Sequence[int],
    values: Sequence[float],
    rules: Mapping[str, Sequence[Any]],
    state_rows: Sequence[tuple[int, int, int, Any]] | None = None,
) -> _Watch:
    """The batch's series that alert evaluation must see: those with a state row (a condition
    holds, or an alert is open), and those with a point outside the quiet band of their metric's
    rules (alerts.alert_quiet_bands); found with maps in C, so that a quiet batch costs no Python
    per sample. Every point of a kept series is kept (a quiet one ends what a louder one began).
    ``sids`` and ``values``: the items' series ids and values, in order."""
    from monitoring.services.alerts import alert_quiet_bands

    metrics = list(map(_METRIC, map(_KEY, items)))
    distinct = set(metrics)
    series: dict[int, SeriesMeta] = {}
    watched: dict[int, list[tuple[dt.datetime, float]]] = {}
    stateful: list[tuple[int, Item]] = []
    if not distinct.isdisjoint(rules):
        lowest, highest = alert_quiet_bands(rules)
        for metric in distinct - lowest.keys():  # metrics without rules: always quiet
            lowest[metric], highest[metric] = -math.inf, math.inf
        quiet = map(
            operator.and_,
            map(operator.le, map(lowest.__getitem__, metrics), values),
            map(operator.le, values, map(highest.__getitem__, metrics)),
        )
        keep = set(compress(sids, map(operator.not_, quiet))) | {row[2] for row in state_rows or ()}
        if keep:
            for item in compress(items, map(keep.__contains__, sids)):
                key, ts, value, info = item
                sid = info[0]  # type: ignore[index]
                watched.setdefault(sid, []).append((ts, value))
                series[sid] = (key[2], key[1], key[3], info[1], info[2])  # type: ignore[index]
    if not distinct.isdisjoint(STATEFUL_METRICS):
        stateful = [(it[3][0], it) for it in items if it[0][2] in STATEFUL_METRICS]  # type: ignore[index]
    node_ids: set[int] = set(map(_NODE, map(_INFO, items)))
    card_ids: set[int] = set(map(_CARD, map(_INFO, items)))
    card_ids.discard(None)  # type: ignore[arg-type]
    return _Watch(series, watched, stateful, node_ids, card_ids)


def _newest(
    sids: Sequence[int], tss: Sequence[dt.datetime], values: Sequence[float]
) -> tuple[Sequence[int], Sequence[dt.datetime], Sequence[float]]:
    """The newest point of each series, as columns (series ids, times, values): the batch itself
    when it has one time (its series are distinct by then: see _first_of_each)."""
    if len(set(tss)) <= 1:
        return sids, tss, values
    latest: dict[int, tuple[dt.datetime, float]] = {}
    for sid, ts, value in zip(sids, tss, values, strict=True):
        prev = latest.get(sid)
        if prev is None or prev[0] < ts:
            latest[sid] = (ts, value)
    return list(latest), [p[0] for p in latest.values()], [p[1] for p in latest.values()]


def _first_of_each(
    items: Sequence[Item], sids: list[int], tss: list[dt.datetime], report: IngestReport
) -> tuple[list[Item], list[int], list[dt.datetime]]:
    """One sample per (series, ts) in a batch: the first one wins (as in the store)."""
    seen: set[tuple[int, dt.datetime]] = set()
    keep: list[int] = []
    for i, pair in enumerate(zip(sids, tss, strict=True)):
        if pair not in seen:
            seen.add(pair)
            keep.append(i)
    report.duplicates += len(items) - len(keep)
    return [items[i] for i in keep], [sids[i] for i in keep], [tss[i] for i in keep]


def _samples_store(
    rows: list[storage.SampleRow],
    days: list[dt.date],
    *,
    nested: bool,
    merge: bool,
    meanwhile: Callable[[], None] | None = None,
    packed: bytes | None = None,
) -> set[tuple[int, dt.datetime]] | None:
    """COPY the batch; ``None`` when all rows were written. ``merge`` (or a repeat met inside the
    caller's transaction): write only the rows not stored yet and return the (series, ts) written.
    ``meanwhile`` (not with ``nested`` or ``merge``): Python work to do while PostgreSQL copies;
    ``packed``: the rows' COPY stream, packed already (storage.copy_stream)."""
    storage.partitions_ensure(days)
    day = days[0] if len(days) == 1 else None
    if merge:
        return storage.samples_merge(rows)
    if not nested:
        # a repeat aborts the transaction: _ingest merges
        storage.samples_write(rows, day, meanwhile=meanwhile, packed=packed)
        return None
    try:
        with transaction.atomic():
            storage.samples_write(rows, day)
    except storage.PartitionMissing:
        storage.partitions_forget()
        storage.partitions_ensure(days)
        try:
            with transaction.atomic():
                storage.samples_write(rows, day)
        except storage.SamplesRepeated:
            return storage.samples_merge(rows)
    except storage.SamplesRepeated:
        return storage.samples_merge(rows)
    return None


def _check_window(items: Sequence[Item], lo: dt.datetime, hi: dt.datetime, now: dt.datetime) -> None:
    oldest = now - dt.timedelta(days=settings.PORTAL_TELEMETRY_RAW_RETENTION_DAYS)
    newest = now + dt.timedelta(seconds=settings.PORTAL_TELEMETRY_MAX_FUTURE_S)
    if oldest <= lo and hi <= newest:
        return
    errors = [
        _("[%(i)s] ts %(ts)s is outside the accepted window %(lo)s .. %(hi)s")
        % {
            "i": i,
            "ts": it[1].isoformat(),
            "lo": oldest.isoformat(timespec="seconds"),
            "hi": newest.isoformat(timespec="seconds"),
        }
        for i, it in enumerate(items)
        if not (oldest <= it[1] <= newest)
    ]
    raise IngestError(errors[:20])


def _nodes_by_name(names: Iterable[str]) -> dict[str, Node]:
    """Hostnames as the tools report them -> nodes (exact hostname, Slurm name, or short name)."""
    names = set(names)
    if not names:
        return {}
    q = Q(hostname__in=names) | Q(slurm_name__in=names)
    for name in names:
        q |= Q(hostname__startswith=f"{name}.")
    found: dict[str, Node] = {}
    for node in Node.objects.filter(q).order_by("pk"):
        for name in (node.hostname, node.slurm_name, node.hostname.split(".")[0]):
            if name in names:
                found.setdefault(name, node)
    return found


def _resolve_series(missing: set[SeriesKey], report: IngestReport) -> dict[SeriesKey, SeriesInfo]:
    """Ids of the series this process has not seen yet: looked up (and created) in bulk; the
    process cache learns them once the batch commits."""
    cache = _cache()
    nodes = _nodes_by_name(k[0] for k in missing)
    unknown = sorted({k[0] for k in missing} - set(nodes))
    if unknown:
        raise IngestError(
            [_("unknown node %(n)r: add it to the inventory first") % {"n": n} for n in unknown[:20]]
        )
    cards = _card_index({n.pk for n in nodes.values()})
    wanted: dict[tuple[int, str, str, str], SeriesKey] = {}
    for key in missing:
        wanted[(nodes[key[0]].pk, key[1], key[2], key[3])] = key
    existing = _series_lookup(wanted)
    # created in key order (a set's order scatters them): a node's series get neighbouring ids, so
    # that a batch of a few nodes touches few pages of the samples' and latest values' indexes
    to_create = [
        Series(node_id=nid, card_ref=ref, metric=metric, labels=labels, card_id=cards.get((nid, ref)))
        for (nid, ref, metric, labels) in sorted(wanted)
        if (nid, ref, metric, labels) not in existing
    ]
    if to_create:
        Series.objects.bulk_create(to_create, ignore_conflicts=True)
        existing = _series_lookup(wanted)
        report.series_created += len(to_create)
    fresh: dict[SeriesKey, SeriesInfo] = {}
    for dbkey, key in wanted.items():
        fresh[key] = existing[dbkey]
    report.unknown_cards = sorted({k[1] for k, info in fresh.items() if k[1] and info[2] is None})

    def remember() -> None:
        if len(cache) > SERIES_CACHE_MAX:
            cache.clear()
        cache.update(fresh)

    transaction.on_commit(remember)
    return fresh


def _series_lookup(
    wanted: Mapping[tuple[int, str, str, str], SeriesKey],
) -> dict[tuple[int, str, str, str], SeriesInfo]:
    node_ids = {k[0] for k in wanted}
    metrics = {k[2] for k in wanted}
    out: dict[tuple[int, str, str, str], SeriesInfo] = {}
    rows = Series.objects.filter(node_id__in=node_ids, metric__in=metrics).values_list(
        "id", "node_id", "card_ref", "metric", "labels", "card_id"
    )
    for sid, nid, ref, metric, labels, card_id in rows:
        key = (nid, ref, metric, labels)
        if key in wanted:
            out[key] = (sid, nid, card_id)
    return out


def _card_index(node_ids: set[int]) -> dict[tuple[int, str], int]:
    """(node id, card ref) -> card id, by GPU UUID and by normalised PCI bus id."""
    index: dict[tuple[int, str], int] = {}
    for cid, nid, uuid, bus in Card.objects.filter(node_id__in=node_ids).values_list(
        "id", "node_id", "gpu_uuid", "pci_bus_id"
    ):
        if uuid:
            index[(nid, uuid)] = cid
        if bus:
            index[(nid, normalize_bus_id(bus) or bus)] = cid
    return index


def _derived_rates(items: Sequence[Item], fresh: Mapping[SeriesKey, SeriesInfo]) -> list[Item]:
    """Rate samples of the batch's counters (see RATE_COUNTERS): ``net_util_pct`` = max(rx, tx)
    bytes/s / link speed x 100 where the speed is known (in the batch, else its latest value);
    ``disk_iops`` = reads/s + writes/s. A rate needs the series' previous value (its latest value,
    or the batch's previous point) at most RATE_MAX_GAP_S earlier; a decrease is a counter reset
    and skips that point. A point is derived only when every counter of its device has a rate."""
    counters: dict[int, tuple[SeriesKey, list[tuple[dt.datetime, float]]]] = {}
    speeds: dict[tuple[int, str], tuple[dt.datetime, float]] = {}
    node_of: dict[int, int] = {}
    for key, ts, value, info in items:
        if key[2] in RATE_COUNTERS:
            sid, nid = (info or fresh[key])[:2]
            counters.setdefault(sid, (key, []))[1].append((ts, value))
            node_of[sid] = nid
        elif key[2] == LINK_SPEED:
            nid = (info or fresh[key])[1]
            if speeds.get((nid, key[3]), (ts,))[0] <= ts:
                speeds[(nid, key[3])] = (ts, value)
    # one query: the counters' latest values, and the link speeds not in this batch
    q = Q(series_id__in=counters)
    need_speed = {
        node_of[sid]
        for sid, (key, _pts) in counters.items()
        if key[2].startswith("net_") and (node_of[sid], key[3]) not in speeds
    }
    if need_speed:
        q |= Q(series__node_id__in=need_speed, series__metric=LINK_SPEED, series__card_ref="")
    previous: dict[int, tuple[dt.datetime, float]] = {}
    for sid, nid, metric, labels, ts, value in LatestValue.objects.filter(q).values_list(
        "series_id", "series__node_id", "series__metric", "series__labels", "ts", "value"
    ):
        if metric == LINK_SPEED:
            speeds.setdefault((nid, labels), (ts, value))
        else:
            previous[sid] = (ts, value)
    # (host, node id, derived metric, labels, ts) -> counter metric -> rate per second
    rates: dict[tuple[str, int, str, str, dt.datetime], dict[str, float | None]] = {}
    for sid, (key, pts) in counters.items():
        last = previous.get(sid)
        for ts, value in sorted(pts):
            rate: float | None = None
            if last is not None:
                gap = (ts - last[0]).total_seconds()
                if gap <= 0:
                    continue  # not newer than what is stored: no rate, keep the newer reference
                if gap <= RATE_MAX_GAP_S and value >= last[1]:
                    rate = (value - last[1]) / gap
            last = (ts, value)
            rates.setdefault((key[0], node_of[sid], RATE_COUNTERS[key[2]], key[3], ts), {})[key[2]] = rate
    known = _cache()
    out: list[Item] = []
    for (host, nid, metric, labels, ts), by_counter in rates.items():
        values = list(by_counter.values())
        if any(v is None for v in values):
            continue
        if metric == "disk_iops":
            derived = sum(v for v in values if v is not None)
        else:
            speed = speeds.get((nid, labels))
            if speed is None or speed[1] <= 0:
                continue
            derived = max(v for v in values if v is not None) / speed[1] * 100
        key = (host, "", metric, labels)
        out.append((key, ts, derived, known.get(key)))
    return out


def _derived_events(stateful: list[tuple[int, Item]]) -> list[ParsedEvent]:
    """Events that need the previous value: Xid changes, heartbeat stalls, link retrains, link flaps."""
    if not stateful:
        return []
    previous = dict(
        LatestValue.objects.filter(series_id__in={sid for sid, _item in stateful}).values_list(
            "series_id", "value"
        )
    )
    out: list[ParsedEvent] = []
    prev_xid: dict[str, int] = {}
    prev_hb: dict[str, float] = {}
    current = ParseResult()
    from monitoring.parsers import Sample as ParsedSample

    for sid, ((host, ref, metric, labels), ts, value, _info) in sorted(stateful, key=lambda x: x[1][1]):
        before = previous.get(sid)
        previous[sid] = value
        if before is None:
            continue
        if metric == "xid_last" and ref:
            prev_xid[ref] = int(before)
            current.samples.append(ParsedSample(metric, value, "count", ts, host, ref))
        elif metric == "heartbeat" and ref:
            prev_hb[ref] = before
            current.samples.append(ParsedSample(metric, value, "count", ts, host, ref))
        elif metric == "link_retrain_total" and value > before:
            out.append(
                ParsedEvent(
                    "link_retrain",
                    ts,
                    host,
                    ref or None,
                    "warning",
                    f"link retrained {value - before:g} time(s) ({labels})",
                    {"labels": labels, "count": value, "previous": before},
                )
            )
        elif metric == "link_up" and value != before:
            up = value >= 1
            out.append(
                ParsedEvent(
                    "link_up" if up else "link_down",
                    ts,
                    host,
                    ref or None,
                    "info" if up else "warning",
                    f"link {'up' if up else 'down'} ({labels})",
                    {"labels": labels},
                )
            )
    out.extend(xid_events(prev_xid, current))
    out.extend(heartbeat_events(prev_hb, current))
    return out


def _store_events(events: Sequence[ParsedEvent], default_host: str | None) -> list[Event]:
    if not events:
        return []
    nodes = _nodes_by_name({default_host or e.node or "" for e in events} - {""})
    cards = _card_index({n.pk for n in nodes.values()})
    rows: list[Event] = []
    seen: set[tuple[Any, ...]] = set()
    now = timezone.now()
    for e in events:
        node = nodes.get(default_host or e.node or "")
        if node is None:
            continue  # a log line naming a host we do not manage
        ref = card_ref_normalise(e.card)
        key = (node.pk, ref, e.kind, e.ts, e.message)
        if key in seen:  # a parser and the derived pass may both report a link going down
            continue
        seen.add(key)
        rows.append(
            Event(
                ts=e.ts or now,
                node=node,
                card_id=cards.get((node.pk, ref)),
                card_ref=ref,
                kind=e.kind,
                severity=e.severity,
                message=e.message[:2000],
                data=_jsonable(e.data),
            )
        )
    _name_link_ports(rows)
    return Event.objects.bulk_create(rows)


LINK_EVENTS = frozenset({"link_down", "link_up", "link_retrain"})


def _name_link_ports(rows: Sequence[Event]) -> None:
    """A link event that names a card's Ethernet channel (tt-smi's ``port=0``) also records the port
    the channel is wired to (``data["port_name"]``: "QSFP1", inventory.links), for its message."""
    from inventory.links import port_keys
    from inventory.models import Port
    from monitoring.messages import parse_labels

    wanted = []
    for row in rows:
        if row.kind in LINK_EVENTS and row.card_id is not None:
            label = parse_labels(str(row.data.get("labels", ""))).get("port", row.data.get("port"))
            if label is not None:
                wanted.append((row, str(label).lower()))
    if not wanted:
        return
    names = dict(
        Port.objects.filter(card_id__in={row.card_id for row, _l in wanted}).values_list("pk", "name")
    )
    keys = port_keys(names)
    for row, label in wanted:
        pk = keys.get((row.node_id, row.card_id, label))
        if pk is not None and names[pk].lower() != label:
            row.data["port_name"] = names[pk]


def _jsonable(data: Mapping[str, Any]) -> dict[str, Any]:
    return {
        k: (v if isinstance(v, int | float | str | bool | type(None) | list | dict) else str(v))
        for k, v in data.items()
    }
