"""Health check evaluation: read every node's facts in a few bulk queries, judge each enabled check
(:mod:`monitoring.health.rules`), damp flapping, record transitions, drain and resume.

NHC's rule on ownership: a failing check with ``drain`` asks the cluster layer to drain its node
with the reason ``rackpilot-health: <check>``; when none of the node's draining checks fails any
more, the node is resumed only if Slurm still shows that reason (a drain set by a person, or by
anything else, is never undone).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection, transaction
from django.db.models import Count, Max, Min
from django.utils import timezone

from inventory.choices import CARD_NOT_INSTALLED, NodeStatus
from inventory.models import Card, Cluster, Node
from monitoring import storage
from monitoring.health import probes as probe_cmds
from monitoring.health.rules import RULES, CardFacts, NodeFacts, params_clean, rule_probes
from monitoring.models import (
    Event,
    HealthCheck,
    HealthProbe,
    HealthStatus,
    LatestValue,
    NodeHealth,
    Sample,
)
from monitoring.signals import telemetry_ingested
from portal.models import AuditEntry
from portal.services import audit_record

log = logging.getLogger(__name__)

DRAIN_PREFIX = "rackpilot-health: "
#: Slurm display states of a node that is drained or being drained
DRAINED_STATES = frozenset({"drained", "draining"})
#: telemetry metrics the checks read, by kind
METRICS_BY_KIND: dict[str, tuple[str, ...]] = {
    "cards_enumerated": ("temperature_c", "power_w", "utilization_pct", "heartbeat"),
    "pcie_link": ("pcie_link_gen", "pcie_link_width", "pcie_link_gen_max", "pcie_link_width_max"),
    "ecc": ("ecc_uncorrected_total", "reset_required"),
    "temperature_headroom": ("temperature_c", "thermal_limit_c"),
    "tt_heartbeat": ("dram_ok",),
    "link_up": ("link_up", "net_speed_bytes_per_s"),
}


# -- facts ------------------------------------------------------------------------------------------
@dataclass
class Target:
    node_id: int
    hostname: str
    cluster_id: int
    role: str
    slurm_state: str
    slurm_reason: str
    facts: NodeFacts


def _targets(node_ids: Iterable[int] | None) -> dict[int, Target]:
    nodes = Node.objects.filter(cluster__isnull=False).exclude(
        status__in=[NodeStatus.PLANNED, NodeStatus.DECOMMISSIONED]
    )
    if node_ids is not None:
        nodes = nodes.filter(pk__in=list(node_ids))
    targets = {
        pk: Target(pk, host, cid, role, state, reason, NodeFacts(pk))
        for pk, host, cid, role, state, reason in nodes.values_list(
            "pk", "hostname", "cluster_id", "role", "slurm_state", "slurm_reason"
        )
    }
    cards = (
        Card.objects.filter(node_id__in=list(targets)).exclude(status__in=CARD_NOT_INSTALLED).order_by("slot")
    )
    for cid, nid, slot, model_id, vendor, bus in cards.values_list(
        "pk", "node_id", "slot", "card_model_id", "card_model__vendor", "pci_bus_id"
    ):
        targets[nid].facts.cards.append(CardFacts(cid, slot, model_id, vendor, bus))
    return targets


def _read_facts(targets: Mapping[int, Target], checks: Sequence[HealthCheck], now: dt.datetime) -> None:
    for target in targets.values():
        target.facts.now_s = now.timestamp()
    kinds = {c.kind for c in checks}
    metrics = sorted({m for k in kinds for m in METRICS_BY_KIND.get(k, ())})
    every_node = len(targets) > 500  # one scan beats a long IN list
    ids = list(targets)
    if metrics:
        for nid, cid, metric, labels, epoch, value in _latest_rows(metrics, None if every_node else ids):
            found = targets.get(nid)
            if found is not None:
                facts = found.facts
                facts.latest.setdefault((cid, metric), []).append((labels, epoch, value))
                if cid is not None and epoch > facts.card_seen.get(cid, 0.0):
                    facts.card_seen[cid] = epoch
    windows = [c.params.get("minutes", 0) for c in checks if c.kind == "xid"]
    windows += [c.params.get("window_minutes", 0) for c in checks if c.kind == "ecc"]
    if windows:
        events = Event.objects.filter(kind="xid", ts__gte=now - dt.timedelta(minutes=max(windows)))
        for nid, ts, data, cid in events.values_list("node_id", "ts", "data", "card_id"):
            xid = data.get("xid") if isinstance(data, dict) else None
            if nid in targets and isinstance(xid, int):
                targets[nid].facts.xids.append((ts, xid, cid))
    beats = [c.params.get("window_s", 120) for c in checks if c.kind == "tt_heartbeat"]
    if beats:
        samples = Sample.objects.filter(
            series__metric="heartbeat", ts__gte=now - dt.timedelta(seconds=max(beats))
        )
        if not every_node:
            samples = samples.filter(series__node_id__in=ids)
        for nid, cid, n, lo, hi in (
            samples.values("series__node_id", "series__card_id")
            .annotate(n=Count("value"), lo=Min("value"), hi=Max("value"))
            .values_list("series__node_id", "series__card_id", "n", "lo", "hi")
        ):
            if nid in targets and cid is not None:
                targets[nid].facts.heartbeats[cid] = (n, lo, hi)
    keys = sorted({k for c in checks for k in rule_probes(c.kind, c.params)})
    if keys:
        for nid, key, code, out, ts in HealthProbe.objects.filter(key__in=keys, node_id__in=ids).values_list(
            "node_id", "key", "exit_code", "stdout", "ts"
        ):
            targets[nid].facts.probes[key] = (code, out, ts)


LATEST_SQL = (
    "SELECT s.node_id, s.card_id, s.metric, s.labels, EXTRACT(EPOCH FROM v.ts)::float8, v.value "
    "FROM monitoring_latestvalue v JOIN monitoring_series s ON s.id = v.series_id WHERE s.metric = ANY(%s)"
)


def _latest_rows(metrics: list[str], node_ids: list[int] | None) -> Iterable[tuple[Any, ...]]:
    """(node, card, metric, labels, epoch seconds, value) of the latest values of ``metrics``.

    On PostgreSQL plain SQL: tens of thousands of rows, epoch seconds instead of datetimes, no
    per-row converters (a third of the time of the queryset). Elsewhere (the demo's SQLite) the ORM."""
    if connection.vendor == "postgresql":
        sql, params = LATEST_SQL, list[Any]([metrics])
        if node_ids is not None:
            sql, params = sql + " AND s.node_id = ANY(%s)", [metrics, node_ids]
        storage.latest_flush()  # read-your-writes, as LatestValue's manager does
        with connection.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall()
    rows = LatestValue.objects.filter(series__metric__in=metrics)
    if node_ids is not None:
        rows = rows.filter(series__node_id__in=node_ids)
    return [
        (n, c, m, labels, ts.timestamp(), v)
        for n, c, m, labels, ts, v in rows.values_list(
            "series__node_id", "series__card_id", "series__metric", "series__labels", "ts", "value"
        )
    ]


def _applies(check: HealthCheck, target: Target) -> list[CardFacts] | None:
    """The check's cards on the node (all active ones unless it names a model); None: not this node."""
    if check.cluster_id is not None and check.cluster_id != target.cluster_id:
        return None
    if check.node_role and check.node_role != target.role:
        return None
    cards = target.facts.cards
    if check.card_model_id is not None:
        cards = [c for c in cards if c.model_id == check.card_model_id]
        if not cards:
            return None
    return cards


# -- evaluation -------------------------------------------------------------------------------------
@dataclass
class HealthReport:
    evaluated: int = 0
    transitions: list[tuple[str, str, str]] = field(default_factory=list)  # (node, check, new status)
    drains: list[str] = field(default_factory=list)
    resumes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def health_evaluate(*, now: dt.datetime | None = None, node_ids: Iterable[int] | None = None) -> HealthReport:
    """Judge every enabled check on every node it applies to (or only on ``node_ids``)."""
    now = now or timezone.now()
    report = HealthReport()
    checks = list(HealthCheck.objects.filter(enabled=True).order_by("pk"))
    for check in checks:
        check.params = params_clean(check.kind, check.params)  # defaults filled in
    targets = _targets(node_ids)
    if not checks or not targets:
        return report
    _read_facts(targets, checks, now)
    with transaction.atomic():
        rows = NodeHealth.objects.select_for_update().filter(
            health_check_id__in=[c.pk for c in checks], node_id__in=list(targets)
        )
        states = {
            (cid, nid): _Standing(pk, cid, nid, status, streak, message, since)
            for pk, cid, nid, status, streak, message, since in rows.values_list(
                "pk", "health_check_id", "node_id", "status", "streak", "message", "changed_at"
            )
        }
        new: list[_Standing] = []
        changed: list[_Standing] = []
        flipped: list[_Standing] = []
        for check in checks:
            rule = RULES[check.kind]
            for target in targets.values():
                cards = _applies(check, target)
                if cards is None:
                    continue
                result = rule.evaluate(check.params, target.facts, cards, now)
                if result is None:
                    continue
                report.evaluated += 1
                state = states.get((check.pk, target.node_id))
                if state is None:
                    state = _Standing(None, check.pk, target.node_id, HealthStatus.PASSING, 0, "", now)
                    states[(check.pk, target.node_id)] = state
                    new.append(state)
                before = state.status
                if _damp(state, check, result.ok, result.message, now) and state.pk is not None:
                    changed.append(state)
                if state.status != before:
                    flipped.append(state)
        created = NodeHealth.objects.bulk_create([s.row() for s in new])
        for standing, made in zip(new, created, strict=True):
            standing.pk = made.pk
        NodeHealth.objects.bulk_update(
            [s.row() for s in changed], ["status", "streak", "message", "changed_at"]
        )
        by_pk = {c.pk: c for c in checks}
        for state in flipped:
            check = by_pk[state.check_id]
            host = targets[state.node_id].hostname
            report.transitions.append((host, check.name, state.status))
            audit_record(
                user=None,
                action=AuditEntry.Action.ACTION,
                instance=state.row(),
                after={"check": check.name, "node": host, "status": state.status, "message": state.message},
                message=f"health {state.status}: {check.name} on {host}",
            )
        touched = {s.node_id for s in flipped}
        _drain_and_resume(checks, states, targets, report)
        _start_runbooks([(s.node_id, by_pk[s.check_id]) for s in flipped if s.status == HealthStatus.FAILING])
    if touched:
        transaction.on_commit(
            lambda: telemetry_ingested.send(
                sender=NodeHealth, node_ids=touched, card_ids=set(), alert_ids=set()
            )
        )
    return report


@dataclass
class _Standing:
    """A NodeHealth row as plain values (thousands are read per evaluation, few are written)."""

    pk: int | None
    check_id: int
    node_id: int
    status: str
    streak: int
    message: str
    changed_at: dt.datetime | None

    def row(self) -> NodeHealth:
        return NodeHealth(
            pk=self.pk,
            health_check_id=self.check_id,
            node_id=self.node_id,
            status=self.status,
            streak=self.streak,
            message=self.message,
            changed_at=self.changed_at,
        )


def _damp(state: _Standing, check: HealthCheck, ok: bool, message: str, now: dt.datetime) -> bool:
    """Apply one result; True when the row changed. The status turns after ``consecutive`` results
    against it in a row; a result agreeing with it resets the streak."""
    observed = HealthStatus.PASSING if ok else HealthStatus.FAILING
    before = (state.status, state.streak, state.message)
    if observed == state.status:
        state.streak = 0
        state.message = message
    else:
        state.streak += 1
        if state.streak >= check.consecutive:
            state.status, state.streak, state.changed_at, state.message = observed, 0, now, message
    return (state.status, state.streak, state.message) != before


def _drain_and_resume(
    checks: Sequence[HealthCheck],
    states: Mapping[tuple[int, int], _Standing],
    targets: Mapping[int, Target],
    report: HealthReport,
) -> None:
    from jobs.services import node_drain_request, node_resume_request  # the jobs app owns node actions

    draining = {c.pk: c for c in checks if c.drain}
    if not draining:
        return
    failing: dict[int, list[str]] = defaultdict(list)
    judged: set[int] = set()
    for (check_id, node_id), state in states.items():
        if check_id in draining:
            judged.add(node_id)
            if state.status == HealthStatus.FAILING:
                failing[node_id].append(draining[check_id].name)
    from jobs.models import ACTIVE_RUN_STATUSES, RunbookRun

    remediating = set(
        RunbookRun.objects.filter(node_id__in=judged, status__in=ACTIVE_RUN_STATUSES).values_list(
            "node_id", flat=True
        )
    )
    for node_id in sorted(judged - remediating):  # a runbook at work drains and resumes the node itself
        target = targets[node_id]
        drained = target.slurm_state in DRAINED_STATES
        ours = target.slurm_reason.startswith(DRAIN_PREFIX.rstrip())
        request: Callable[[], Any] | None = None
        if failing[node_id] and not drained:
            reason = (DRAIN_PREFIX + ", ".join(sorted(failing[node_id])))[:200]
            request, done = (
                (lambda n=node_id, r=reason: node_drain_request(_node(n), user=None, reason=r)),
                report.drains,
            )
        elif not failing[node_id] and drained and ours:
            request, done = (lambda n=node_id: node_resume_request(_node(n), user=None)), report.resumes
        if request is None:
            continue
        try:
            with transaction.atomic():
                action = request()
        except (
            ValidationError,
            PermissionDenied,
        ) as exc:  # an action in progress: the next round tries again
            report.errors.append(f"{target.hostname}: {'; '.join(getattr(exc, 'messages', [str(exc)]))}")
            continue
        if not getattr(action, "reused", False):
            done.append(target.hostname)


def _start_runbooks(failed: Sequence[tuple[int, HealthCheck]]) -> None:
    """Checks that turned failing start the runbook their kind triggers (jobs.runbooks)."""
    if not failed:
        return
    from jobs.runbooks import runbook_start_for_check

    for node_id, check in failed:
        runbook_start_for_check(node_id, check.kind, check.name)


def _node(pk: int) -> Node:
    return Node.objects.get(pk=pk)


# -- check commands ---------------------------------------------------------------------------------
def health_probe_keys(node: Node) -> list[str]:
    """The check commands the enabled checks that apply to ``node`` need."""
    targets = _targets([node.pk])
    if node.pk not in targets:
        return []
    keys: set[str] = set()
    for check in HealthCheck.objects.filter(enabled=True):
        if _applies(check, targets[node.pk]) is not None:
            keys.update(rule_probes(check.kind, params_clean(check.kind, check.params)))
    return sorted(keys)


def health_probe_commands(node: Node) -> list[dict[str, Any]]:
    return [{"key": key, "argv": probe_cmds.probe_argv(key)} for key in health_probe_keys(node)]


def health_probes_store(
    node: Node, results: Sequence[Mapping[str, Any]], *, now: dt.datetime | None = None
) -> int:
    """Keep the newest output of each check command of ``node`` (only the keys its checks ask for)."""
    now = now or timezone.now()
    wanted = set(health_probe_keys(node))
    unknown = sorted({str(r.get("key")) for r in results} - wanted)
    if unknown:
        raise ValidationError({"results": [f"not a check command of this node: {', '.join(unknown)}"]})
    rows = [
        HealthProbe(
            node=node,
            key=r["key"],
            exit_code=int(r["exit_code"]),
            stdout=str(r.get("stdout", ""))[:65536],
            stderr=str(r.get("stderr", ""))[:4096],
            ts=now,
        )
        for r in results
    ]
    HealthProbe.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["node", "key"],
        update_fields=["exit_code", "stdout", "stderr", "ts"],
    )
    return len(rows)


def health_probe_cluster(
    cluster_id: int, *, runner_factory: Callable[[Cluster], Any] | None = None
) -> dict[str, Any]:
    """Run the check commands on every node of a cluster over SSH (the telemetry pull path), store
    what they print and evaluate those nodes."""
    from jobs.cluster.errors import ClusterError
    from monitoring.collectors import cluster_runner, node_argv

    cluster = Cluster.objects.get(pk=cluster_id)
    nodes = list(
        Node.objects.filter(cluster=cluster).exclude(
            status__in=[NodeStatus.PLANNED, NodeStatus.DECOMMISSIONED]
        )
    )
    errors: dict[str, str] = {}
    runner = (runner_factory or cluster_runner)(cluster)
    try:
        for node in nodes:
            results = []
            for key in health_probe_keys(node):
                try:
                    out = runner.run(node_argv(node, probe_cmds.probe_argv(key)), timeout=30.0)
                except ClusterError as exc:
                    errors[node.hostname] = str(exc)
                    continue
                results.append(
                    {"key": key, "exit_code": out.exit_code, "stdout": out.stdout, "stderr": out.stderr}
                )
            if results:
                health_probes_store(node, results)
    finally:
        runner.close()
    report = health_evaluate(node_ids=[n.pk for n in nodes])
    return {"cluster": cluster.name, "errors": errors, "transitions": report.transitions}


# -- for runbooks (jobs.runbooks) --------------------------------------------------------------------
def health_verify(
    node_id: int, *, since: dt.datetime, now: dt.datetime | None = None
) -> tuple[bool | None, str]:
    """Whether the node is healthy again after a remediation that ended at ``since``: every active
    card reported after it (enumeration: a card that did not come back after a reset never does),
    and every enabled check that applies passes on those readings, undamped. (None, why): not yet
    known (no fresh readings yet); the runbook step looks again until its timeout."""
    now = now or timezone.now()
    targets = _targets([node_id])
    target = targets.get(node_id)
    if target is None:
        return False, "node not found"
    checks = list(HealthCheck.objects.filter(enabled=True).order_by("pk"))
    for check in checks:
        check.params = params_clean(check.kind, check.params)
    _read_facts(targets, checks, now)
    silent = [
        c.slot for c in target.facts.cards if target.facts.card_seen.get(c.id, 0.0) <= since.timestamp()
    ]
    if silent:
        return None, f"no reading since {since:%H:%M:%S} from cards {', '.join(silent)}"
    failed, passed = [], 0
    for check in checks:
        cards = _applies(check, target)
        if cards is None:
            continue
        result = RULES[check.kind].evaluate(check.params, target.facts, cards, now)
        if result is None:
            continue
        if result.ok:
            passed += 1
        else:
            failed.append(f"{check.name}: {result.message}")
    if failed:
        return False, "; ".join(failed)
    return True, f"{len(target.facts.cards)} cards report; {passed} checks pass"


def health_verified(node_id: int, *, note: str) -> int:
    """A remediation verified the node: its failing standings turn passing now (without waiting
    for the damping streak, which would drain the node again right after its resume)."""
    rows = list(
        NodeHealth.objects.filter(node_id=node_id, status=HealthStatus.FAILING).select_related("health_check")
    )
    now = timezone.now()
    for row in rows:
        row.status, row.streak, row.changed_at, row.message = HealthStatus.PASSING, 0, now, note
        row.save(update_fields=["status", "streak", "changed_at", "message"])
        audit_record(user=None, action=AuditEntry.Action.ACTION, instance=row,
                     after={"check": row.health_check.name, "status": row.status, "message": note},
                     message=f"health passing: {row.health_check.name} ({note})")  # fmt: skip
    if rows:
        transaction.on_commit(
            lambda: telemetry_ingested.send(
                sender=NodeHealth, node_ids={node_id}, card_ids=set(), alert_ids=set()
            )
        )
    return len(rows)
