"""The job report's reads: one job's window on its nodes and cards, summarised from stored
telemetry (rollups for long jobs: :func:`monitoring.selectors.series_window_stats`), its events with
the cable each link event lands on, and the findings of :mod:`jobs.report.findings`.

Queries: the nodes with their cards, the series summary (one query per threshold group), the
events, the cables of the job's cards, the job's transitions: a constant number for any job size.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from typing import Any

from django.db.models import Q
from django.utils import timezone

from inventory.choices import CARD_SCHEDULABLE
from inventory.models import CableTermination, Card, Node
from jobs.models import Job, JobTemplate, NodeTransition
from jobs.report import findings as f
from jobs.report.cables import CableIndex
from monitoring import selectors as ms
from monitoring.parsers.metrics import THROTTLE_BITS

CARD_METRICS = ("utilization_pct", "memory_used_bytes", "memory_total_bytes", "power_w", "temperature_c")
NODE_METRICS = ("disk_iops", "net_util_pct", "node_power_w", "node_power_capacity_w")
THROTTLE_METRICS = {f"throttle_{name}": name for name in THROTTLE_BITS if name != "gpu_idle"}
#: events this long before the job's start still count (a link that flapped as it started)
EVENT_LEAD = dt.timedelta(minutes=5)
#: and this long after its end: collectors poll every few seconds to a minute, so the link that went
#: down just before the job died is often seen only after Slurm has ended it
EVENT_LAG = dt.timedelta(minutes=2)


@dataclass
class JobReport:
    job: Job
    start: dt.datetime | None
    end: dt.datetime | None
    resolution: int
    facts: f.JobFacts
    nodes: list[f.NodeUsage] = field(default_factory=list)
    notes: list[f.Finding] = field(default_factory=list)
    diagnosis: list[f.Finding] = field(default_factory=list)
    events: list[f.EventFact] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return f.is_failure(self.facts)

    @property
    def unexplained(self) -> bool:
        return self.failed and not self.diagnosis

    @property
    def time_used_pct(self) -> float | None:
        if not self.facts.time_limit_s:
            return None
        return 100 * self.facts.elapsed_s / self.facts.time_limit_s

    @property
    def cards(self) -> list[f.CardUsage]:
        return [c for n in self.nodes for c in n.cards]

    @property
    def energy_kwh(self) -> float | None:
        values = [c.energy_kwh for c in self.cards if c.energy_kwh is not None]
        return sum(values) if values else None

    @property
    def suspect_node(self) -> f.Suspect | None:
        """The node of the most likely cause (what "resubmit excluding" leaves out)."""
        for finding in self.diagnosis:
            s = finding.suspect
            if s is None:
                continue
            if s.kind == "node":
                return s
            node = self._node_of(s)
            if node is not None:
                return node
        return None

    def _node_of(self, s: f.Suspect) -> f.Suspect | None:
        if s.kind == "card":
            for n in self.nodes:
                if any(c.card_id == s.id for c in n.cards):
                    return f.Suspect("node", n.node_id, n.hostname)
        if s.kind == "cable":
            for e in self.events:
                if e.cable is not None and e.cable.id == s.id:
                    return f.Suspect("node", e.node_id, e.node)
        return None


def job_nodes(job: Job) -> list[Node]:
    """The inventory nodes a job ran on (by Slurm name, or the short host name of a node without
    one), with their cards."""
    names = {n for n in (job.node_names or "").split(",") if n}
    if not names:
        return []
    candidates = Node.objects.filter(
        Q(slurm_name__in=names) | Q(slurm_name="") | Q(hostname__in=names), cluster_id=job.cluster_id
    ).prefetch_related("cards__card_model")
    return [
        n for n in candidates.order_by("hostname") if n.effective_slurm_name in names or n.hostname in names
    ]


def _window(job: Job, now: dt.datetime) -> tuple[dt.datetime | None, dt.datetime | None]:
    if job.start_time is None:
        return None, None
    return job.start_time, job.end_time or now


def _usage(nodes: list[Node], stats: list[ms.SeriesStats], hours: float) -> list[f.NodeUsage]:
    by_card: dict[tuple[int, int | None, str], dict[str, ms.SeriesStats]] = {}
    by_node: dict[int, dict[str, list[ms.SeriesStats]]] = {}
    for s in stats:
        if s.card_ref:
            by_card.setdefault((s.node_id, s.card_id, s.card_ref), {})[s.metric] = s
        else:
            by_node.setdefault(s.node_id, {}).setdefault(s.metric, []).append(s)
    out = []
    for node in nodes:
        cards = {c.pk: c for c in node.cards.all() if c.status in CARD_SCHEDULABLE}
        usage = f.NodeUsage(node_id=node.pk, hostname=node.hostname, slurm_name=node.effective_slurm_name)
        seen: set[int] = set()
        for (node_id, card_id, ref), metrics in sorted(by_card.items(), key=lambda kv: str(kv[0][2])):
            if node_id != node.pk:
                continue
            card = cards.get(card_id or 0)
            if card_id is not None:
                seen.add(card_id)
            usage.cards.append(_card_usage(node, card, card_id, ref, metrics, hours))
        for card in cards.values():  # cards the tools never reported: no telemetry, still listed
            if card.pk not in seen:
                usage.cards.append(_card_usage(node, card, card.pk, card.telemetry_id, {}, hours))
        usage.cards.sort(key=lambda c: c.label)
        nm = by_node.get(node.pk, {})
        usage.disk_iops_mean, usage.disk_iops_peak = _sum_stats(nm.get("disk_iops", []))
        usage.net_util_mean, usage.net_util_peak = _max_stats(nm.get("net_util_pct", []))
        usage.power_mean, usage.power_peak = _max_stats(nm.get("node_power_w", [])[:1])
        usage.power_capacity = _max_stats(nm.get("node_power_capacity_w", []))[1]
        out.append(usage)
    return out


def _sum_stats(rows: list[ms.SeriesStats]) -> tuple[float | None, float | None]:
    """Mean and peak of several devices added up (disks of one node)."""
    if not rows:
        return None, None
    return sum(r.mean for r in rows), sum(r.max for r in rows)


def _max_stats(rows: list[ms.SeriesStats]) -> tuple[float | None, float | None]:
    """Mean and peak of the busiest device (network interfaces of one node)."""
    if not rows:
        return None, None
    return max(r.mean for r in rows), max(r.max for r in rows)


def _card_usage(
    node: Node, card: Card | None, card_id: int | None, ref: str, m: dict[str, ms.SeriesStats], hours: float
) -> f.CardUsage:
    label = f"{node.hostname}/{card.slot}" if card is not None else f"{node.hostname}/{ref}"
    u = f.CardUsage(
        card_id=card_id, card_ref=ref, label=label, node=node.hostname,
        vendor=card.card_model.vendor if card is not None else "",
    )  # fmt: skip
    if (s := m.get("utilization_pct")) is not None:
        u.util_mean, u.util_peak = s.mean, s.max
    if (s := m.get("memory_used_bytes")) is not None:
        u.mem_mean, u.mem_peak = s.mean, s.max
    if (s := m.get("memory_total_bytes")) is not None:
        u.mem_total = s.max
    elif card is not None and card.card_model.memory_gb:
        u.mem_total = card.card_model.memory_gb * 10**9
    if (s := m.get("power_w")) is not None:
        u.power_mean, u.power_peak, u.power_min = s.mean, s.max, s.min
        u.energy_kwh = s.mean * hours / 1000
    if (s := m.get("temperature_c")) is not None:
        u.temp_mean, u.temp_peak, u.hot_share = s.mean, s.max, s.share_above
    u.throttle = {reason: m[metric].mean for metric, reason in THROTTLE_METRICS.items() if metric in m}
    return u


DOWN_WORDS = ("down", "fail", "not_responding", "missing")


def _is_down(state: str) -> bool:
    return any(w in (state or "").lower() for w in DOWN_WORDS)


def _down_nodes(
    nodes: list[Node], start: dt.datetime, end: dt.datetime
) -> tuple[tuple[str, int, str, str], ...]:
    """Job nodes Slurm set down in the window (on record even if they came back since), or that are
    down now since after the job started."""
    by_id = {n.pk: n for n in nodes}
    found: dict[int, tuple[str, int, str, str]] = {}
    went_down = NodeTransition.objects.filter(
        node_id__in=list(by_id), at__gte=start - EVENT_LEAD, at__lte=end + EVENT_LEAD
    ).order_by("at")
    for t in went_down:
        if _is_down(t.to_state) and t.node_id not in found:
            found[t.node_id] = (by_id[t.node_id].hostname, t.node_id, t.to_state, t.reason)
    for n in nodes:
        since = n.slurm_state_since
        if n.pk not in found and _is_down(n.slurm_state) and (since is None or since >= start - EVENT_LEAD):
            found[n.pk] = (n.hostname, n.pk, n.slurm_state, n.slurm_reason)
    return tuple(found.values())


def _facts(
    job: Job, nodes: list[Node], start: dt.datetime | None, end: dt.datetime | None, output: str
) -> f.JobFacts:
    elapsed = (end - start).total_seconds() if start and end else 0.0
    cards_per_node = max(
        (sum(1 for c in n.cards.all() if c.status in CARD_SCHEDULABLE) for n in nodes), default=0
    )
    reason = job.state_reason or next(
        (t.reason for t in reversed(list(job.transitions.all())) if t.reason), ""
    )
    return f.JobFacts(
        state=job.state,
        exit_code=job.exit_code,
        reason=reason,
        elapsed_s=elapsed,
        time_limit_s=job.time_limit * 60 if job.time_limit else None,
        active=job.is_active,
        whole_nodes=bool(job.gpus) and job.gpus >= cards_per_node,  # idle cards: only of GPU jobs
        output=output,
        down_nodes=_down_nodes(nodes, start, end) if start and end and job.state in f.FAILED_STATES else (),
    )


#: the event kinds the diagnosis reads (a flaky card's thousands of corrected AER lines are not read)
DIAGNOSIS_EVENT_KINDS = (
    *f.LINK_KINDS,
    "xid",
    "gpu_fell_off_bus",
    "heartbeat_stall",
    "nccl_timeout",
    "nccl_net_error",
)
#: at most this many events of a window (the first ones: a fault shows early)
MAX_EVENTS = 5000


def _events(nodes: list[Node], start: dt.datetime, end: dt.datetime) -> list[f.EventFact]:
    rows = (
        ms.event_window_list(node_ids=[n.pk for n in nodes], start=start - EVENT_LEAD, end=end + EVENT_LAG)
        .filter(kind__in=DIAGNOSIS_EVENT_KINDS)
        .values_list("ts", "kind", "severity", "node_id", "card_id", "card_ref", "message", "data")[
            :MAX_EVENTS
        ]
    )
    hosts = {n.pk: n.hostname for n in nodes}
    labels = {c.pk: f"{n.hostname}/{c.slot}" for n in nodes for c in n.cards.all()}
    terms = (
        CableTermination.objects.filter(cable__terminations__card_id__in=list(labels))
        .select_related("cable", "port__card__node", "port__node")
        .distinct()
    )
    return CableIndex(list(terms)).resolve(
        [
            f.EventFact(
                ts=ts,
                kind=kind,
                severity=severity,
                node_id=node_id,
                node=hosts.get(node_id, ""),
                card_id=card_id,
                card=labels.get(card_id or 0, card_ref),
                message=message,
                data=data if isinstance(data, dict) else {},
            )
            for ts, kind, severity, node_id, card_id, card_ref, message, data in rows
        ]
    )


def job_report_get(job: Job, *, output: str = "", now: dt.datetime | None = None) -> JobReport:
    """The report of ``job`` (live while it runs: the window ends now). ``output``: the tail of its
    output file, as the job page has it (:func:`jobs.output.job_output_get`)."""
    now = now or timezone.now()
    start, end = _window(job, now)
    nodes = job_nodes(job)
    facts = _facts(job, nodes, start, end, output)
    if start is None or end is None or end <= start:
        return JobReport(job=job, start=start, end=end, resolution=0, facts=facts)
    metrics = [*CARD_METRICS, *NODE_METRICS, *THROTTLE_METRICS]
    resolution, stats = ms.series_window_stats(
        node_ids=[n.pk for n in nodes], metrics=metrics, start=start, end=end,
        above={"temperature_c": f.HOT_C}, now=now,
    )  # fmt: skip
    usage = _usage(nodes, stats, (end - start).total_seconds() / 3600)
    events = _events(nodes, start, end)
    return JobReport(
        job=job, start=start, end=end, resolution=resolution, facts=facts, nodes=usage,
        notes=f.efficiency_notes(facts, usage), diagnosis=f.diagnose(facts, usage, events), events=events,
    )  # fmt: skip


def report_next_steps(report: JobReport, user: Any) -> dict[str, Any]:
    """Which next-step buttons apply for ``user`` (the API refuses the same ones): resubmit (the
    owner, a finished failed job; excluding the suspect node; resuming where its template can),
    drain the suspect node / mark the suspect cable faulty (operators)."""
    job = report.job
    out: dict[str, Any] = {
        "resubmit": False,
        "exclude": "",
        "can_resume": False,
        "drain": None,
        "cable": None,
    }
    if not report.failed or job.is_active:
        return out
    suspect = report.suspect_node
    node = next((n for n in report.nodes if suspect and n.node_id == suspect.id), None)
    owner = job.owner_id is not None and job.owner_id == getattr(user, "pk", None)
    if owner and user.has_perm("jobs.submit_job"):
        out["resubmit"] = True
        out["exclude"] = node.slurm_name if node else ""
        action = job.submitted_by_action
        template_id = action.params.get("template") if action is not None else None
        if isinstance(template_id, int):
            template = JobTemplate.objects.filter(pk=template_id).first()
            out["can_resume"] = template is not None and template.can_resume
    if user.has_perm("jobs.operate_nodes"):
        out["drain"] = suspect
        out["cable"] = next(
            (f.suspect for f in report.diagnosis if f.suspect and f.suspect.kind == "cable"), None
        )
    return out


def report_as_dict(report: JobReport) -> dict[str, Any]:
    """The report as the API returns it (JobReportSerializer documents the shape)."""
    return {
        "job": report.job.pk,
        "state": report.job.state,
        "active": report.facts.active,
        "start": report.start,
        "end": report.end,
        "elapsed_s": report.facts.elapsed_s,
        "time_limit_s": report.facts.time_limit_s,
        "time_used_pct": report.time_used_pct,
        "resolution_s": report.resolution,
        "energy_kwh": report.energy_kwh,
        "failed": report.failed,
        "unexplained": report.unexplained,
        "diagnosis": [asdict(x) for x in report.diagnosis],
        "notes": [asdict(x) for x in report.notes],
        "nodes": [
            {
                **{k: v for k, v in asdict(n).items() if k != "cards"},
                "cards": [
                    {**asdict(c), "idle": c.idle, "throttled_thermal": c.throttled_thermal} for c in n.cards
                ],
            }
            for n in report.nodes
        ],  # fmt: skip
        "suspect_node": asdict(report.suspect_node) if report.suspect_node else None,
        "output": report.facts.output,
    }
