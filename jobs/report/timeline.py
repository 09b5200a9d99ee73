"""The incident timeline of a job, node, card or cable: one chronological merge of Slurm state
changes (jobs and nodes), actions and who asked for them, alerts firing and resolving, telemetry
events (Xid, AER, link, NCCL, heartbeat), readiness changes and recorded edits (the audit log).

Reads only: each source is one query bounded by the window and :data:`PER_SOURCE`; what a user
may not see is left out the way the rest of the portal leaves it out (jobs of others, actions,
alerts and events without the monitoring permissions).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from django.contrib.contenttypes.models import ContentType
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from inventory.models import Cable, CableTermination, Card, Node
from inventory.models.readiness import ReadinessCheck, ReadinessStatus
from jobs import selectors as js
from jobs.cluster.types import slurm_job_display_id
from jobs.models import ActionKind, ActionStatus, Job, JobTransition, NodeTransition
from jobs.report.cables import CableIndex
from jobs.report.findings import EventFact
from jobs.report.selectors import EVENT_LEAD, job_nodes
from monitoring import selectors as ms
from monitoring.models import Alert, AlertRule
from portal.models import AuditEntry

Kind = Literal["job", "node", "card", "cable"]
SOURCES = {
    "slurm": gettext_lazy("Slurm"),
    "action": gettext_lazy("Actions"),
    "alert": gettext_lazy("Alerts"),
    "event": gettext_lazy("Telemetry events"),
    "readiness": gettext_lazy("Readiness"),
    "change": gettext_lazy("Changes"),
}
SEVERITIES = ("info", "warning", "critical")
RANK = {s: i for i, s in enumerate(SEVERITIES)}
#: newest entries read per source (a flapping card's ten thousand AER lines do not drown the rest)
PER_SOURCE = 500
#: newest entries shown of the merge (narrow the sources, the severity or the range for older ones)
MAX_ENTRIES = 500
DOWN = ("down", "fail", "not_responding", "missing", "drain")
#: the windows of a node's, card's or cable's timeline, up to now (a job's is its run)
RANGES = {"1h": dt.timedelta(hours=1), "6h": dt.timedelta(hours=6), "24h": dt.timedelta(days=1),
          "7d": dt.timedelta(days=7)}  # fmt: skip
RANGE_LABELS = {"1h": gettext_lazy("1 h"), "6h": gettext_lazy("6 h"), "24h": gettext_lazy("24 h"),
                "7d": gettext_lazy("7 d")}  # fmt: skip
DEFAULT_RANGE = "7d"


@dataclass(frozen=True)
class Entry:
    ts: dt.datetime
    source: str
    severity: str
    title: str
    detail: str = ""
    who: str = ""
    #: (URL name, pk) of the object the entry is about, and its label
    link: tuple[str, Any] | None = None
    target: str = ""


@dataclass(frozen=True)
class Scope:
    """What one timeline covers: its nodes, cards, jobs and the objects whose edits count."""

    kind: Kind
    label: str
    start: dt.datetime
    end: dt.datetime
    node_ids: tuple[int, ...] = ()
    card_ids: tuple[int, ...] = ()
    job: Job | None = None
    cable: Cable | None = None
    audited: tuple[Any, ...] = ()


def scope_for(
    kind: Kind, obj: Any, *, start: dt.datetime | None = None, end: dt.datetime | None = None
) -> Scope:
    """The scope of ``obj``'s timeline. A job's window is its run (a little before its start,
    until now while it runs); the others default to the last 7 days."""
    now = timezone.now()
    if kind == "job":
        nodes = job_nodes(obj)
        begin = (obj.start_time or obj.submit_time or now) - EVENT_LEAD
        return Scope(
            kind, obj.slurm_id, start or begin, end or (obj.end_time or now) + EVENT_LEAD,
            node_ids=tuple(n.pk for n in nodes), card_ids=tuple(c.pk for n in nodes for c in n.cards.all()),
            job=obj, audited=tuple(nodes),
        )  # fmt: skip
    start = start or now - dt.timedelta(days=7)
    end = end or now
    if kind == "node":
        cards = tuple(Card.objects.filter(node=obj).values_list("pk", flat=True))
        return Scope(kind, obj.hostname, start, end, node_ids=(obj.pk,), card_ids=cards, audited=(obj,))
    if kind == "card":
        return Scope(kind, str(obj), start, end, node_ids=(obj.node_id,), card_ids=(obj.pk,), audited=(obj,))
    terms = list(obj.terminations.select_related("port"))
    return Scope(
        kind, str(obj), start, end, node_ids=tuple({t.port.node_id for t in terms}),
        card_ids=tuple(t.card_id for t in terms if t.card_id), cable=obj, audited=(obj,),
    )  # fmt: skip


def timeline_list(
    scope: Scope, *, user: Any, sources: Iterable[str] | None = None, min_severity: str = "info"
) -> list[Entry]:
    """The newest :data:`MAX_ENTRIES` entries of ``scope``, newest first, of the given sources at or
    above ``min_severity``."""
    wanted = set(sources or SOURCES) & set(SOURCES)
    readers = {
        "slurm": _slurm, "action": _actions, "alert": _alerts, "event": _events,
        "readiness": _readiness, "change": _changes,
    }  # fmt: skip
    entries: list[Entry] = []
    for name in SOURCES:
        if name in wanted:
            entries.extend(readers[name](scope, user))
    floor = RANK.get(min_severity, 0)
    kept = [e for e in entries if RANK.get(e.severity, 0) >= floor and scope.start <= e.ts <= scope.end]
    return sorted(kept, key=lambda e: e.ts, reverse=True)[:MAX_ENTRIES]


def _between(field: str, scope: Scope) -> Q:
    return Q(**{f"{field}__gte": scope.start, f"{field}__lte": scope.end})


# -- sources ------------------------------------------------------------------------------------------


FAILED_JOB_STATES = ("FAILED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY", "BOOT_FAIL")


def _slurm(scope: Scope, user: Any) -> list[Entry]:
    out = []
    if scope.kind in ("job", "node"):
        jobs = js.job_list(user=user)
        if scope.job is not None:
            jobs = jobs.filter(pk=scope.job.pk)
        else:
            match = Q(pk__in=[])
            for n in Node.objects.filter(pk__in=scope.node_ids):
                match |= Q(node_names__contains=f",{n.effective_slurm_name},")
            jobs = jobs.filter(match).filter(Q(end_time__isnull=True) | Q(end_time__gte=scope.start))
        rows = (
            JobTransition.objects.filter(_between("at", scope), job__in=jobs)
            .order_by("-at")
            .values_list("at", "from_state", "to_state", "reason", "job_id", "job__job_id", "job__array_job_id",
                         "job__array_task_id", "job__array_tasks")[:PER_SOURCE]
        )  # fmt: skip
        text = _("Job %(id)s: %(from)s → %(to)s")
        for at, old, new, reason, pk, job_id, array_id, task_id, tasks in rows:
            shown = slurm_job_display_id(job_id, array_id, task_id, tasks)
            out.append(
                Entry(at, "slurm", "critical" if new in FAILED_JOB_STATES else "info",
                      text % {"id": shown, "from": old or "—", "to": new}, reason, link=("jobs:job", pk), target=shown)
            )  # fmt: skip
    rows_n = (
        NodeTransition.objects.filter(_between("at", scope), node_id__in=scope.node_ids)
        .order_by("-at")
        .values_list("at", "from_state", "to_state", "reason", "node_id", "node__hostname")[:PER_SOURCE]
    )
    text = _("Node %(node)s: %(from)s → %(to)s")
    for at, old, new, reason, node_id, host in rows_n:
        down = any(w in new.lower() for w in DOWN)
        out.append(
            Entry(at, "slurm", "warning" if down else "info", text % {"node": host, "from": old or "—", "to": new},
                  reason, link=("inventory:node", node_id), target=host)
        )  # fmt: skip
    return out


def _actions(scope: Scope, user: Any) -> list[Entry]:
    cond = Q(node_id__in=scope.node_ids)
    if scope.job is not None:
        cond |= Q(job=scope.job)
    rows = (
        js.action_list(user=user)
        .filter(cond)
        .filter(
            Q(created__gte=scope.start, created__lte=scope.end)
            | Q(finished__gte=scope.start, finished__lte=scope.end)
        )
        .order_by("-created")
        .values_list("pk", "kind", "status", "params", "created", "finished", "output", "error",
                     "requested_by__username")[:PER_SOURCE]
    )  # fmt: skip
    kinds, statuses = dict(ActionKind.choices), dict(ActionStatus.choices)
    asked, ended, portal = (
        _("%(kind)s %(target)s requested"),
        _("%(kind)s %(target)s %(status)s"),
        _("the portal"),
    )
    out = []
    for pk, kind, status, params, created, finished, output, error, username in rows:
        who, target, link = username or portal, str(params.get("target", "")), ("jobs:action", pk)
        what = {"kind": kinds.get(kind, kind), "target": target}
        out.append(
            Entry(created, "action", "info", asked % what, params.get("reason", ""), who, link, target)
        )
        if finished is not None:
            out.append(
                Entry(finished, "action", "warning" if status == "failed" else "info",
                      ended % {**what, "status": str(statuses.get(status, status)).lower()},
                      (error or output)[:300], who, link, target)
            )  # fmt: skip
    return out


def _alerts(scope: Scope, user: Any) -> list[Entry]:
    if scope.job is None and not user.has_perm("monitoring.view_alert"):
        return []
    cond = Q(card_id__in=scope.card_ids) if scope.kind in ("card", "cable") else Q(node_id__in=scope.node_ids)
    rows = list(
        Alert.objects.filter(cond)
        .filter(_between("started_at", scope) | _between("resolved_at", scope))
        .order_by("-started_at")
        .values_list("rule_id", "severity", "started_at", "resolved_at", "message", "node_id", "node__hostname",
                     "card_id", "card__slot")[:PER_SOURCE]
    )  # fmt: skip
    rules = {r.pk: str(r) for r in AlertRule.objects.filter(pk__in={r[0] for r in rows})}
    firing, resolved = _("Alert firing: %(rule)s on %(where)s"), _("Alert resolved: %(rule)s on %(where)s")
    out = []
    for rule_id, severity, started, ended, message, node_id, host, card_id, slot in rows:
        where = f"{host}/{slot}" if card_id else host
        link = ("inventory:card", card_id) if card_id else ("inventory:node", node_id)
        what = {"rule": rules.get(rule_id, ""), "where": where}
        out.append(Entry(started, "alert", severity, firing % what, message, link=link, target=where))
        if ended is not None:
            out.append(Entry(ended, "alert", "info", resolved % what, link=link, target=where))
    return out


def _events(scope: Scope, user: Any) -> list[Entry]:
    if scope.job is None and not user.has_perm("monitoring.view_event"):
        return []
    qs = ms.event_window_list(node_ids=scope.node_ids, start=scope.start, end=scope.end)
    if scope.kind in ("card", "cable"):
        qs = qs.filter(card_id__in=scope.card_ids)
    rows = list(
        qs.order_by("-ts").values_list(
            "ts", "kind", "severity", "node_id", "node__hostname", "card_id", "card__slot", "card_ref", "message",
            "data",
        )[:PER_SOURCE]
    )  # fmt: skip
    facts = [
        EventFact(ts=ts, kind=kind, severity=sev, node_id=nid, node=host, card_id=cid,
                  card=f"{host}/{slot}" if cid else ref, message=msg, data=data if isinstance(data, dict) else {})
        for ts, kind, sev, nid, host, cid, slot, ref, msg, data in rows
    ]  # fmt: skip
    if scope.card_ids:
        terms = CableTermination.objects.filter(cable__terminations__card_id__in=scope.card_ids)
        facts = CableIndex(
            list(terms.select_related("cable", "port__card__node", "port__node").distinct())
        ).resolve(facts)
    if scope.cable is not None:
        facts = [e for e in facts if e.cable is not None and e.cable.id == scope.cable.pk]
    out = []
    for e in facts:
        link = ("inventory:card", e.card_id) if e.card_id else ("inventory:node", e.node_id)
        title = e.message or e.kind
        detail = _("cable %(cable)s (%(a)s ↔ %(b)s)") % {"cable": e.cable.label, "a": e.cable.a_end,
                                                           "b": e.cable.b_end} if e.cable else ""  # fmt: skip
        out.append(Entry(e.ts, "event", e.severity, title[:300], detail, link=link, target=e.card or e.node))
    return out


def _audit_rows(objects: Iterable[Any]) -> Q:
    cond = Q(pk__in=[])
    by_type: dict[ContentType, list[str]] = {}
    for obj in objects:
        by_type.setdefault(ContentType.objects.get_for_model(type(obj)), []).append(str(obj.pk))
    for ct, ids in by_type.items():
        cond |= Q(content_type=ct, object_id__in=ids)
    return cond


def _readiness(scope: Scope, user: Any) -> list[Entry]:
    if scope.kind not in ("job", "node"):
        return []  # a node's readiness is not a card's or a cable's story
    checks = list(ReadinessCheck.objects.filter(node_id__in=scope.node_ids).select_related("node"))
    if not checks:
        return []
    by_id = {str(c.pk): c for c in checks}
    rows = AuditEntry.objects.filter(_audit_rows(checks), _between("ts", scope)).order_by("-ts")[:PER_SOURCE]
    statuses = dict(ReadinessStatus.choices)
    text = _("Readiness of %(node)s: %(check)s → %(status)s")
    out = []
    for r in rows:
        check = by_id.get(r.object_id)
        status = (r.after or {}).get("status")
        if check is None or not status:
            continue
        severity = {"fail": "critical", "warn": "warning"}.get(status, "info")
        # derived checks store their verdict in English: shown in the reader's language (as readiness_list)
        detail = (r.after or {}).get("detail") or ""
        out.append(
            Entry(r.ts, "readiness", severity, text % {"node": check.node.hostname, "check": check.get_key_display(),
                                                       "status": statuses.get(status, status)},
                  _(detail) if detail else "", r.username, ("inventory:node_readiness", check.node_id),
                  check.node.hostname)
        )  # fmt: skip
    return out


def _changes(scope: Scope, user: Any) -> list[Entry]:
    if not scope.audited:
        return []
    names = {(type(o).__name__.lower(), str(o.pk)): str(o) for o in scope.audited}
    rows = (
        AuditEntry.objects.filter(_audit_rows(scope.audited), _between("ts", scope))
        .select_related("content_type")
        .order_by("-ts")[:PER_SOURCE]
    )
    out = []
    for r in rows:
        model = r.content_type.model if r.content_type else ""
        changed = ", ".join(f"{k}: {v}" for k, v in (r.after or {}).items())[:300]
        out.append(
            Entry(r.ts, "change", "info", _("%(object)s: %(action)s") % {
                "object": names.get((model, r.object_id), r.object_repr), "action": r.get_action_display()},
                  r.message or changed, r.username, (f"inventory:{model}", int(r.object_id)) if model in (
                      "node", "card", "cable") else None, r.object_repr)
        )  # fmt: skip
    return out


def scope_of(kind: Kind, obj: Any, range_key: str = DEFAULT_RANGE) -> Scope:
    """The scope the page and the API show: a job's run, or the range up to now."""
    if kind == "job":
        return scope_for("job", obj)
    now = timezone.now()
    return scope_for(kind, obj, start=now - RANGES[range_key], end=now)
