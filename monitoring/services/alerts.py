"""Alert evaluation (on ingest, for the batch's targets only), lifecycle and notifications.

Lifecycle: a condition starts holding (AlertState.pending_since) -> after the rule's duration the
alert FIRES (one open alert per rule and target, a database constraint) -> it RESOLVES when the
condition stops holding (threshold / stall rules), after a quiet period (event rules with a
duration) or by hand. Acknowledging marks it seen without resolving it.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
import math
import operator
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.mail import send_mail
from django.db import IntegrityError, connection, transaction
from django.db.models import QuerySet
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from inventory.models import PSU, Node
from monitoring import storage
from monitoring.messages import alert_message_en, alert_text, alert_value, event_parts
from monitoring.models import Alert, AlertRule, AlertState, Event, LatestValue
from portal.models import AuditEntry
from portal.services import audit_record
from portal.templatetags.portal_format import exact

log = logging.getLogger(__name__)


def alert_target(node_id: int, card_ref: str, labels: str) -> str:
    return f"n{node_id}/{card_ref}/{labels}"[:128]


def _holds(rule: AlertRule, value: float, limit: float) -> bool:
    return value > limit if rule.op == AlertRule.Op.GT else value < limit


# Node.slurm_state (sinfo's display state) while jobs run on the node
BUSY_SLURM_STATES = frozenset({"alloc", "mixed", "draining", "completing"})


def busy_node_ids(rows: Iterable[tuple[int, str, int | None, int | None]]) -> set[int]:
    """Nodes whose every card belongs to a running job, from (id, slurm_state, gpus_total, gpus_alloc)
    rows: a busy Slurm state and, where Slurm tracks the node's GPUs, all of them allocated. Slurm's
    listing does not say WHICH cards a job holds, so on a partly allocated node an idle card may just
    be free: such nodes do not count, and "only while busy" rules stay quiet there."""
    return {
        nid
        for nid, state, gpus_total, gpus_alloc in rows
        if state in BUSY_SLURM_STATES and (not gpus_total or (gpus_alloc or 0) >= gpus_total)
    }


def psu_budget_w(node_ids: Iterable[int]) -> dict[int, float]:
    """Usable PSU capacity per node: non-redundant PSUs add up; a redundant set counts half."""
    plain: dict[int, float] = defaultdict(float)
    redundant: dict[int, float] = defaultdict(float)
    for nid, cap, red in PSU.objects.filter(node_id__in=set(node_ids)).values_list(
        "node_id", "capacity_w", "redundant"
    ):
        (redundant if red else plain)[nid] += cap
    return {nid: plain[nid] + redundant[nid] / 2 for nid in set(plain) | set(redundant)}


# enabled threshold / stall rules by metric, per database; read again after RULES_TTL_S or when a
# rule is saved or deleted in this process (other processes see an edit within the TTL)
RULES_TTL_S = 5.0
_rules_cache: dict[str, tuple[float, dict[str, list[AlertRule]]]] = {}


def alert_rules_by_metric() -> Mapping[str, Sequence[AlertRule]]:
    """The enabled series rules (threshold, stall) keyed by metric, from a short-lived cache."""
    db = str(connection.settings_dict["NAME"])
    now = time.monotonic()
    hit = _rules_cache.get(db)
    if hit is not None and hit[0] > now:
        return hit[1]
    index: dict[str, list[AlertRule]] = defaultdict(list)
    for rule in AlertRule.objects.filter(enabled=True).exclude(kind=AlertRule.Kind.EVENT).order_by("pk"):
        index[rule.metric].append(rule)
    _rules_cache[db] = (now + RULES_TTL_S, dict(index))
    return _rules_cache[db][1]


def alert_rules_forget(**_: Any) -> None:
    """Drop the cached rule index (a rule changed)."""
    _rules_cache.clear()


SeriesMeta = tuple[str, str, str, int, int | None]  # metric, card ref, labels, node id, card id
Pair = tuple[AlertRule, int, SeriesMeta]


@dataclass
class SeriesPlan:
    """What evaluating a batch's series needs from the database: its state rows (read already)
    and the previous values of its stall rules, as a query a caller may run in one round trip
    with its own statements (ingest: with the latest-value upsert)."""

    pairs: list[Pair]
    state_rows: Sequence[tuple[int, int, int, dt.datetime | None]]
    previous: QuerySet[LatestValue, Any] | None

    @property
    def reads(self) -> list[QuerySet[Any, Any]]:
        return [self.previous] if self.previous is not None else []


def alert_states_between(lo: int, hi: int) -> QuerySet[AlertState, tuple[Any, ...]]:
    """Every state row of the series ``lo`` .. ``hi`` (pk, rule, series, pending since), for
    :func:`alerts_plan`'s ``state_rows``: a caller knows a batch's series ids before it knows
    which of them have rules, and may read this with its first statement. A state row exists only
    while a condition holds, so the read is small; rows of other rules are never looked up."""
    return AlertState.objects.filter(series_id__gte=lo, series_id__lte=hi).values_list(
        "pk", "rule_id", "series_id", "pending_since"
    )


@functools.cache
def _alert_states_sql() -> str | None:
    """:func:`alert_states_between`'s SQL, compiled once per process (``None`` should Django
    ever compile its two bounds differently)."""
    sql, params = alert_states_between(-1, -2).query.sql_with_params()
    return sql if tuple(params) == (-1, -2) else None


def alert_states_read(lo: int, hi: int) -> storage.Read:
    """:func:`alert_states_between` as a read for ``storage.reads_first``: on PostgreSQL its SQL
    is compiled once per process and prepared on the server (building and compiling the queryset
    was a tenth of an ingest batch's Python); elsewhere the queryset (SQLite's raw rows carry
    times as text)."""
    sql = _alert_states_sql() if connection.vendor == "postgresql" else None
    return (sql, (lo, hi)) if sql is not None else alert_states_between(lo, hi)


def alert_quiet_bands(rules: Mapping[str, Sequence[AlertRule]]) -> tuple[dict[str, float], dict[str, float]]:
    """The values at which none of a metric's enabled rules can hold, whatever a series' scope:
    (lowest, highest) by metric, inclusive. A point there, of a series with no state row, leaves
    nothing to evaluate (the quiet majority). Rules that need every point (stall rules compare
    with the previous value; a limit relative to the PSUs needs the budget) make the band empty."""
    lowest: dict[str, float] = {}
    highest: dict[str, float] = {}
    for metric, of_metric in rules.items():
        lo, hi = -math.inf, math.inf
        for rule in of_metric:
            if rule.kind != AlertRule.Kind.THRESHOLD or rule.relative_to:
                lo, hi = math.inf, -math.inf
                break
            if rule.op == AlertRule.Op.GT:  # holds above the threshold
                hi = min(hi, rule.threshold)
            else:  # holds below it
                lo = max(lo, rule.threshold)
        lowest[metric], highest[metric] = lo, hi
    return lowest, highest


def alerts_plan(
    series: Mapping[int, SeriesMeta],
    *,
    previous: Mapping[int, tuple[dt.datetime, float]] | None = None,
    rules: Mapping[str, Sequence[AlertRule]] | None = None,
    state_rows: Sequence[tuple[int, int, int, dt.datetime | None]] | None = None,
) -> SeriesPlan:
    """The (rule, series) pairs of the enabled rules, the state rows they may have and the query of
    the previous latest values the stall rules compare with (``previous`` gives those already
    known), not run. ``rules``: :func:`alert_rules_by_metric` and ``state_rows``: the rows of
    :func:`alert_states_between` over (at least) these series, both read by the caller (which
    may read the database), so that this makes no query at all; without them it reads them."""
    index = alert_rules_by_metric() if rules is None else rules
    pairs: list[Pair] = []
    for sid, meta in series.items():
        for rule in index.get(meta[0], ()):
            if (rule.scope == AlertRule.Scope.CARD) == bool(meta[1]):
                pairs.append((rule, sid, meta))
    if not pairs:
        return SeriesPlan(pairs, (), None)
    if state_rows is None:
        state_rows = list(alert_states_between(min(series), max(series)))
    stall = sorted(
        {sid for r, sid, _m in pairs if r.kind == AlertRule.Kind.STALL and sid not in (previous or {})}
    )
    before = (
        LatestValue.objects.filter(series_id__in=stall).values_list("series_id", "ts", "value")
        if stall
        else None
    )
    return SeriesPlan(pairs, state_rows, before)


def alerts_evaluate(
    series: Mapping[int, SeriesMeta],
    points: Mapping[int, Sequence[tuple[dt.datetime, float]]],
    events: Sequence[Event],
    *,
    now: dt.datetime,
    previous: Mapping[int, tuple[dt.datetime, float]] | None = None,
    plan: SeriesPlan | None = None,
    read: Sequence[Sequence[Any]] | None = None,
) -> set[int]:
    """Evaluate the enabled rules against this batch's samples of ``series`` and its ``events``.

    ``series``: series id -> (metric, card ref, labels, node id, card id).
    ``previous``: latest (ts, value) of each series before this batch (stall rules need it).
    ``plan`` and ``read``: :func:`alerts_plan` of ``series`` and the rows of its ``reads``, when
    the caller ran them (else they are read here).
    Returns the ids of alerts that fired, resolved or were updated.
    """
    changed: set[int] = set()
    if series:
        if plan is None:
            plan = alerts_plan(series, previous=previous)
            read = [list(q) for q in plan.reads]
        changed |= _evaluate_series(plan, read or [], points, now=now, previous=previous or {})
    if events:
        changed |= _evaluate_events(events, now=now)
        changed |= _clear_by_events(events)
    return changed


#: events that end another event's condition: a link that comes back up resolves the "link down"
#: alert of the same link (same node, card and labels), instead of leaving it to the quiet period
CLEARED_BY: dict[str, frozenset[str]] = {"link_up": frozenset({"link_down"})}


def _clear_by_events(events: Sequence[Event]) -> set[int]:
    changed: set[int] = set()
    for event in sorted((e for e in events if e.kind in CLEARED_BY), key=lambda e: e.ts):
        labels = str(event.data.get("labels", "")) if isinstance(event.data, dict) else ""
        targets = {
            alert_target(event.node_id, event.card_ref, labels),
            alert_target(event.node_id, "", labels),
        }
        firing = Alert.objects.filter(
            status=Alert.Status.FIRING,
            rule__kind=AlertRule.Kind.EVENT,
            rule__event_kind__in=CLEARED_BY[event.kind],
            target__in=targets,
            started_at__lte=event.ts,
        )
        for alert in firing:
            _resolve(alert, event.ts, {"key": "event", "event": _event_parts(event)})
            changed.add(alert.pk)
    return changed


def _could_hold(rule: AlertRule, pts: Sequence[tuple[dt.datetime, float]], limit: float | None) -> bool:
    """Whether the rule's condition may hold at a point of ``pts`` (stall: always, it needs the
    previous value; a limit relative to the PSUs: always, it needs the budget)."""
    if rule.kind != AlertRule.Kind.THRESHOLD or limit is None:
        return True
    if rule.op == AlertRule.Op.GT:  # the extreme point decides (map and max in C: a batch has many pairs)
        return max(map(_POINT_VALUE, pts), default=-math.inf) > limit
    return min(map(_POINT_VALUE, pts), default=math.inf) < limit


_POINT_VALUE = operator.itemgetter(1)


def _evaluate_series(
    plan: SeriesPlan,
    read: Sequence[Sequence[Any]],
    points: Mapping[int, Sequence[tuple[dt.datetime, float]]],
    *,
    now: dt.datetime,
    previous: Mapping[int, tuple[dt.datetime, float]],
) -> set[int]:
    rows = iter(read)
    states: dict[tuple[int, int], tuple[int, dt.datetime | None]] = {
        (rid, sid): (pk, since) for pk, rid, sid, since in plan.state_rows
    }
    prev = dict(previous)
    if plan.previous is not None:
        prev.update({sid: (ts, v) for sid, ts, v in next(rows)})
    # the quiet majority: no state row, and no point where the condition could hold -> nothing to do
    pairs = [
        p
        for p in plan.pairs
        if (p[0].id, p[1]) in states
        or _could_hold(p[0], points.get(p[1], ()), None if p[0].relative_to else p[0].threshold)
    ]
    if not pairs:
        return set()
    busy: set[int] = set()
    if any(rule.cluster_id is not None or rule.only_when_node_busy for rule, _sid, _m in pairs):
        # one read for both: the nodes' clusters and whether Slurm runs a job there
        nodes = list(
            Node.objects.filter(pk__in={m[3] for _r, _s, m in pairs}).values_list(
                "id", "cluster_id", "slurm_state", "slurm__gpus_total", "slurm__gpus_alloc"
            )
        )
        clusters = {row[0]: row[1] for row in nodes}
        busy = busy_node_ids((nid, state, total, alloc) for nid, _c, state, total, alloc in nodes)
        pairs = [p for p in pairs if p[0].cluster_id is None or p[0].cluster_id == clusters.get(p[2][3])]
    # An open alert implies a state row (the condition held when it fired and has not cleared
    # since), so open alerts are read only for the series that have one: usually none.
    open_alerts = (
        {
            (a.rule_id, a.series_id): a
            for a in Alert.objects.filter(
                status=Alert.Status.FIRING,
                rule_id__in={k[0] for k in states},
                series_id__in={k[1] for k in states},
            )
        }
        if states
        else {}
    )
    budgets = (
        psu_budget_w({m[3] for r, _s, m in pairs if r.relative_to == AlertRule.Relative.PSU_CAPACITY})
        if any(r.relative_to for r, _s, _m in pairs)
        else {}
    )
    changed: set[int] = set()
    for rule, sid, (_metric, ref, labels, nid, cid) in pairs:
        limit = rule.threshold
        if rule.relative_to == AlertRule.Relative.PSU_CAPACITY:
            if nid not in budgets:
                continue
            limit = budgets[nid] * rule.threshold / 100
        state = states.get((rule.id, sid))
        alert = open_alerts.get((rule.id, sid))
        pts = points.get(sid, ())
        idle = rule.only_when_node_busy and nid not in busy  # the condition cannot hold
        if (
            state is None
            and alert is None
            and (
                idle
                or rule.kind == AlertRule.Kind.THRESHOLD
                and not any(_holds(rule, v, limit) for _ts, v in pts)
            )
        ):
            continue  # the quiet majority: nothing pending, nothing open, nothing to write
        target = alert_target(nid, ref, labels)
        pending = state[1] if state else None
        last: tuple[dt.datetime, float] | None = prev.get(sid)
        for ts, value in sorted(pts):
            if rule.kind == AlertRule.Kind.STALL:
                holds = last is not None and value <= last[1] and ts > last[0]
                start = pending or (last[0] if last else ts)
                last = (ts, value) if not holds or last is None else last
            else:
                holds = _holds(rule, value, limit)
                start = pending or ts
            if idle or not holds:
                pending = None
                if alert is not None:
                    _resolve(alert, ts, {"key": "idle"} if idle else {"key": "cleared", "value": value})
                    changed.add(alert.pk)
                    alert = None
                continue
            pending = start
            if alert is None and (ts - pending).total_seconds() >= rule.duration_s:
                alert = _fire(rule, target, nid, cid, sid, pending, ts, value, limit)
                if alert is not None:
                    changed.add(alert.pk)
        _state_save(rule, sid, state, pending)
    return changed


def _state_save(
    rule: AlertRule, sid: int, state: tuple[int, dt.datetime | None] | None, pending: dt.datetime | None
) -> None:
    """Keep a state row (pk, pending since) only while a condition holds: the quiet majority writes nothing."""
    if pending is None:
        if state is not None:
            AlertState.objects.filter(pk=state[0]).delete()
    elif state is None:
        AlertState.objects.create(rule=rule, series_id=sid, pending_since=pending)
    elif state[1] != pending:
        AlertState.objects.filter(pk=state[0]).update(pending_since=pending)


def _fire(
    rule: AlertRule,
    target: str,
    node_id: int,
    card_id: int | None,
    series_id: int | None,
    started: dt.datetime,
    seen: dt.datetime,
    value: float,
    limit: float,
    event: Event | None = None,
) -> Alert | None:
    alert = Alert(
        rule=rule,
        target=target,
        node_id=node_id,
        card_id=card_id,
        series_id=series_id,
        severity=rule.severity,
        started_at=started,
        last_seen_at=seen,
        value=value,
        params={"event": _event_parts(event)} if event is not None else {"limit": limit},
    )
    alert.message = alert_message_en(alert)
    try:
        with transaction.atomic():
            alert.save()
    except IntegrityError:  # a concurrent batch opened it first: one open alert per rule and target
        return Alert.objects.filter(rule=rule, target=target, status=Alert.Status.FIRING).first()
    transaction.on_commit(lambda: _enqueue_notify(alert.pk, "firing"))
    return alert


def _event_parts(event: Event) -> dict[str, Any]:
    return event_parts(event.kind, event.data if isinstance(event.data, dict) else {}, event.message[:2000])


def _resolve(alert: Alert, when: dt.datetime, how: dict[str, Any]) -> None:
    """Resolve ``alert``; ``how`` says why (``key``: cleared, idle, quiet, by_hand, event; and its values)."""
    alert.status = Alert.Status.RESOLVED
    alert.resolved_at = when
    alert.params = {**(alert.params or {}), "resolution": how}
    alert.message = alert_message_en(alert)
    alert.save(update_fields=["status", "resolved_at", "params", "message"])
    transaction.on_commit(lambda: _enqueue_notify(alert.pk, "resolved"))


def _evaluate_events(events: Sequence[Event], *, now: dt.datetime) -> set[int]:
    rules = list(
        AlertRule.objects.filter(
            enabled=True, kind=AlertRule.Kind.EVENT, event_kind__in={e.kind for e in events}
        )
    )
    if not rules:
        return set()
    clusters = dict(Node.objects.filter(pk__in={e.node_id for e in events}).values_list("id", "cluster_id"))
    changed: set[int] = set()
    for event in sorted(events, key=lambda e: e.ts):
        for rule in rules:
            if rule.event_kind != event.kind or (
                rule.cluster_id and rule.cluster_id != clusters.get(event.node_id)
            ):
                continue
            scope_ref = event.card_ref if rule.scope == AlertRule.Scope.CARD else ""
            labels = str(event.data.get("labels", "")) if isinstance(event.data, dict) else ""
            target = alert_target(event.node_id, scope_ref, labels)
            alert = Alert.objects.filter(rule=rule, target=target, status=Alert.Status.FIRING).first()
            if alert is not None:
                alert.params = {**(alert.params or {}), "event": _event_parts(event)}
                alert.last_seen_at = event.ts
                alert.message = alert_message_en(alert)
                alert.save(update_fields=["last_seen_at", "params", "message"])
            else:
                alert = _fire(
                    rule,
                    target,
                    event.node_id,
                    event.card_id,
                    None,
                    event.ts,
                    event.ts,
                    0.0,
                    0.0,
                    event=event,
                )
            if alert is not None:
                changed.add(alert.pk)
    return changed


# -- periodic and manual transitions ------------------------------------------------------------
def alerts_resolve_quiet(*, now: dt.datetime | None = None) -> int:
    """Resolve event alerts whose rule has a quiet period and saw no new event for that long."""
    now = now or timezone.now()
    resolved = 0
    for alert in Alert.objects.filter(
        status=Alert.Status.FIRING, rule__kind=AlertRule.Kind.EVENT, rule__duration_s__gt=0
    ).select_related("rule"):
        seen = alert.last_seen_at or alert.started_at
        if (now - seen).total_seconds() >= alert.rule.duration_s:
            with transaction.atomic():
                _resolve(alert, now, {"key": "quiet", "duration_s": alert.rule.duration_s})
            resolved += 1
    return resolved


@transaction.atomic
def alert_acknowledge(*, alert: Alert, user: Any) -> Alert:
    if not user.has_perm("monitoring.acknowledge_alert"):
        raise ValidationError(_("You may not acknowledge alerts."))
    if alert.acknowledged_at is not None:
        return alert
    alert.acknowledged_at = timezone.now()
    alert.acknowledged_by = user
    alert.save(update_fields=["acknowledged_at", "acknowledged_by"])
    audit_record(user=user, action=AuditEntry.Action.ACTION, instance=alert, message="alert acknowledged")
    return alert


@transaction.atomic
def alert_resolve(*, alert: Alert, user: Any) -> Alert:
    if not user.has_perm("monitoring.acknowledge_alert"):
        raise ValidationError(_("You may not resolve alerts."))
    if alert.status == Alert.Status.RESOLVED:
        return alert
    _resolve(alert, timezone.now(), {"key": "by_hand", "user": user.get_username()})
    audit_record(user=user, action=AuditEntry.Action.ACTION, instance=alert, message="alert resolved by hand")
    return alert


# -- notifications ------------------------------------------------------------------------------
def _enqueue_notify(alert_id: int, transition: str) -> None:
    from monitoring.tasks import alert_notify_task

    alert_notify_task.delay(alert_id, transition)


def alert_payload(alert: Alert, transition: str) -> dict[str, Any]:
    """What a webhook receives: ``message`` in English (stable, for scripts), ``text`` in the site's
    language, and the parts both are made of (``metric``, ``value``, ``params``)."""
    with translation.override(settings.LANGUAGE_CODE):
        text = alert_text(alert)
        value = alert_value(alert)
    return {
        "alert": alert.pk,
        "transition": transition,
        "rule": alert.rule.name,
        "severity": alert.severity,
        "status": alert.status,
        "node": alert.node.hostname,
        "card": alert.card.telemetry_id if alert.card else None,
        "target": alert.target,
        "metric": alert.rule.metric or None,
        "value": alert.value,
        "value_text": value,
        "message": alert.message,
        "text": text,
        "params": alert.params,
        "started_at": alert.started_at.isoformat(),
        "resolved_at": alert.resolved_at.isoformat() if alert.resolved_at else None,
    }


def alert_email(alert: Alert, transition: str) -> tuple[str, str]:
    """The e-mail's subject and body, in the site's language."""
    with translation.override(settings.LANGUAGE_CODE):
        what = _("firing") if transition == "firing" else _("resolved")
        subject = _("[Rackpilot %(severity)s] %(what)s: %(rule)s on %(node)s") % {
            "severity": alert.get_severity_display(),
            "what": what,
            "rule": alert.rule,
            "node": alert.node.hostname,
        }
        lines = [
            alert_text(alert),
            "",
            _("Node: %(node)s") % {"node": alert.node.hostname},
            _("Card: %(card)s") % {"card": alert.card.slot if alert.card else "—"},
            _("Value: %(value)s") % {"value": alert_value(alert)},
            _("Started: %(when)s") % {"when": exact(alert.started_at)},
        ]
        if alert.resolved_at:
            lines.append(_("Resolved: %(when)s") % {"when": exact(alert.resolved_at)})
    return subject, "\n".join(lines) + "\n"


def alert_notify(alert_id: int, transition: str) -> list[str]:
    """Send the webhook and the e-mails of the rule; request a drain when the rule asks.

    Returns the errors (also stored on the alert); each channel is tried independently.
    """
    alert = Alert.objects.select_related("rule", "node", "card").get(pk=alert_id)
    rule = alert.rule
    errors: list[str] = []
    if rule.notify_webhook:
        try:
            req = urllib.request.Request(  # noqa: S310 - admins configure the URL
                rule.notify_webhook,
                data=json.dumps(alert_payload(alert, transition)).encode(),
                method="POST",
                headers={"Content-Type": "application/json", "User-Agent": "Rackpilot"},
            )
            with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310
                resp.read(1024)
        except OSError as exc:
            errors.append(f"webhook: {exc}")
    emails = [e.strip() for e in rule.notify_emails.replace(";", ",").split(",") if e.strip()]
    if emails:
        subject, body = alert_email(alert, transition)
        try:
            send_mail(subject, body, settings.PORTAL_TELEMETRY_ALERT_FROM_EMAIL, emails)
        except Exception as exc:  # noqa: BLE001 - any mail failure is recorded, never raised
            errors.append(f"email: {exc}")
    if rule.drain_node and transition == "firing":
        errors.extend(_request_drain(alert))
    Alert.objects.filter(pk=alert.pk).update(notified_at=timezone.now(), notify_error="\n".join(errors))
    return errors


def _request_drain(alert: Alert) -> list[str]:
    """Ask the cluster layer (jobs app) for a drain of the alert's node."""
    from jobs.services import node_drain_request  # the jobs app owns node actions (imported late: cycle)

    try:
        node_drain_request(alert.node, user=None, reason=f"Rackpilot alert: {alert.rule.name}")
    except (ValidationError, PermissionDenied) as exc:
        return [f"drain: {exc}"]
    return []


#: the event of a remediation runbook that gave up (jobs.runbooks), alerted by a default event rule
RUNBOOK_FAILED = "runbook_failed"


def runbook_alert(node: Node, message: str) -> set[int]:
    """Record that a runbook gave up on ``node`` and alert through the event rules of that kind."""
    now = timezone.now()
    event = Event.objects.create(
        ts=now, node=node, kind=RUNBOOK_FAILED, severity=Event.Severity.CRITICAL, message=message[:4000]
    )
    return alerts_evaluate({}, {}, [event], now=now)
