"""What a job's figures mean: efficiency notes and failure diagnosis. Pure: data in, findings out.

The selectors (:mod:`jobs.report.selectors`) gather the facts of one job's window (its Slurm
state, output tail, per-card figures, telemetry events on its nodes and cards with the cable a
link event lands on); :func:`efficiency_notes` writes jobstats-like notes, each with its evidence
and what to do, and :func:`diagnose` ranks the likely causes of a failed job. Sources: the
troubleshooting tables of the field guides and NVIDIA's Xid catalogue.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Literal

from django.utils.translation import gettext as _

from jobs.pending_reasons import diagnose_output
from monitoring.parsers.kernel_logs import parse_log_events
from monitoring.parsers.prometheus import XID_DESCRIPTIONS

Severity = Literal["info", "warning", "critical"]

#: job states the diagnosis explains (CANCELLED only when the system, not a person, cancelled it)
FAILED_STATES = frozenset({"FAILED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY", "BOOT_FAIL", "CANCELLED"})
#: below this peak utilisation (%) a card did nothing for the whole job
IDLE_PEAK_PCT = 5.0
#: mean utilisation (%) under which a job did not keep its cards busy
LOW_UTIL_PCT = 25.0
#: a card counts as hot above this (°C): the default alert rule's threshold
HOT_C = 85.0
#: share of the time a throttle reason must hold to be worth a note
THROTTLE_NOTE_SHARE = 0.10
#: a job that used less than this share of its limit should ask for less
SHORT_USE_SHARE = 0.25
#: I/O is the bottleneck when the network runs this busy (%) ...
NET_BUSY_PCT = 70.0
#: ... or the disks sustain this share of their peak rate and at least this many operations/s
DISK_BUSY_SHARE = 0.7
DISK_BUSY_IOPS = 500.0
#: memory use (share of the card's) that is a near miss for out-of-memory
MEMORY_FULL_SHARE = 0.95
#: a card's power dropping below this share of its mean while the job ran is an excursion
POWER_DROP_SHARE = 0.1
#: a node drawing this share of its PSU capacity is near the limit
PSU_NEAR_SHARE = 0.9

THERMAL_REASONS = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown"})
POWER_REASONS = frozenset({"sw_power_cap", "hw_power_brake_slowdown"})
LINK_KINDS = frozenset({"link_down", "link_up", "link_retrain"})

# NVIDIA's Xid catalogue, by what the researcher or the operator does about it
XID_CLASSES: dict[str, frozenset[int]] = {
    "bus": frozenset({79}),
    "ecc": frozenset({48, 63, 64, 92, 94, 95, 140}),
    "nvlink": frozenset({74, *range(144, 151)}),
    "firmware": frozenset({61, 62, 119, 120}),
    "application": frozenset({13, 31, 43, 45}),
}

_CUDA_OOM = re.compile(r"CUDA out of memory|torch\.(?:cuda\.)?OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED")
_TT_OOM = re.compile(
    r"Out of Memory: Not enough space to allocate[^\n]*|TT_FATAL[^\n]*(?:allocat|out of memory)"
)
_INIT_TIMEOUT = re.compile(
    r"init_process_group[^\n]*|DistNetworkError[^\n]*|DistStoreError[^\n]*|TCPStore[^\n]*(?:timed? ?out|timeout)"
    r"[^\n]*|rendezvous[^\n]*(?:timed? ?out|timeout)[^\n]*",
    re.I,
)
_TIMEOUT_WORD = re.compile(r"timed? ?out|timeout|connection refused", re.I)
_SYSTEM_CANCEL = re.compile(r"CANCELLED (?:AT \S+ )?BY (?:0|root|slurm)\b|by (?:root|slurm|0)\b", re.I)


@dataclass
class CardUsage:
    """One card over the job's window (None: no telemetry of that figure)."""

    card_id: int | None
    card_ref: str
    label: str
    node: str
    vendor: str = ""
    util_mean: float | None = None
    util_peak: float | None = None
    mem_mean: float | None = None
    mem_peak: float | None = None
    mem_total: float | None = None
    power_mean: float | None = None
    power_peak: float | None = None
    power_min: float | None = None
    energy_kwh: float | None = None
    temp_mean: float | None = None
    temp_peak: float | None = None
    hot_share: float = 0.0
    throttle: dict[str, float] = field(default_factory=dict)

    @property
    def idle(self) -> bool:
        return self.util_peak is not None and self.util_peak < IDLE_PEAK_PCT

    @property
    def throttled_thermal(self) -> float:
        """Share of the time clocks were held down for temperature (NVIDIA reasons; Tenstorrent:
        the time above :data:`HOT_C`, where its firmware throttles)."""
        nv = max((self.throttle.get(r, 0.0) for r in THERMAL_REASONS), default=0.0)
        return max(nv, self.hot_share)

    @property
    def throttled_thermal_pct(self) -> float:
        return 100 * self.throttled_thermal


@dataclass
class NodeUsage:
    node_id: int
    hostname: str
    slurm_name: str = ""
    cards: list[CardUsage] = field(default_factory=list)
    disk_iops_mean: float | None = None
    disk_iops_peak: float | None = None
    net_util_mean: float | None = None
    net_util_peak: float | None = None
    power_mean: float | None = None
    power_peak: float | None = None
    power_capacity: float | None = None


@dataclass(frozen=True)
class Suspect:
    """The object a finding points at (it links to it; the next-step buttons act on it)."""

    kind: Literal["node", "card", "cable"]
    id: int
    label: str


@dataclass(frozen=True)
class CableRef:
    id: int
    label: str
    a_end: str
    b_end: str


@dataclass(frozen=True)
class EventFact:
    ts: dt.datetime
    kind: str
    severity: str
    node_id: int
    node: str
    card_id: int | None
    card: str
    message: str
    data: dict[str, object]
    cable: CableRef | None = None


@dataclass(frozen=True)
class JobFacts:
    state: str
    exit_code: int | None
    reason: str
    elapsed_s: float
    time_limit_s: float | None
    active: bool
    whole_nodes: bool
    output: str = ""
    #: (hostname, node id, Slurm state, reason) of job nodes Slurm set down/failed in the window
    down_nodes: tuple[tuple[str, int, str, str], ...] = ()


@dataclass
class Finding:
    code: str
    severity: Severity
    title: str
    evidence: list[str] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    score: int = 0
    suspect: Suspect | None = None


def _pct(x: float) -> str:
    return f"{x:.0f} %"


def _cards(job_nodes: list[NodeUsage]) -> list[CardUsage]:
    return [c for n in job_nodes for c in n.cards]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


# -- efficiency notes ------------------------------------------------------------------------------


def efficiency_notes(facts: JobFacts, nodes: list[NodeUsage]) -> list[Finding]:
    """Notes on how the job used what it held, each with its evidence and what to do."""
    notes: list[Finding] = []
    cards = _cards(nodes)
    measured = [c for c in cards if c.util_peak is not None]
    idle = [c for c in measured if c.idle]
    if idle and facts.whole_nodes:
        notes.append(
            Finding(
                "idle_cards",
                "warning",
                _("%(n)s of %(total)s cards were idle the whole job") % {"n": len(idle), "total": len(measured)},
                [_("%(card)s: peak utilisation %(peak)s") % {"card": c.label, "peak": _pct(c.util_peak or 0)}
                 for c in idle],
                [_("Ask only for the cards the job uses (--gpus), or make the code use all of them "
                   "(torchrun --nproc-per-node, DistributedDataParallel).")],
            )
        )  # fmt: skip
    busy = [c for c in measured if not c.idle]
    util = _mean([c.util_mean for c in busy if c.util_mean is not None])
    if util is not None and util < LOW_UTIL_PCT:
        notes.append(_low_util_note(util, nodes))
    for c in cards:
        share = c.throttled_thermal
        if share >= THROTTLE_NOTE_SHARE:
            notes.append(
                Finding(
                    "thermal_throttle",
                    "warning",
                    _("Card %(card)s throttled %(share)s of the time for temperature")
                    % {"card": c.label, "share": _pct(share * 100)},
                    _temperature_evidence(c),
                    [
                        _(
                            "Its airflow is blocked or a fan failed: check the cabling in front of it and its fans."
                        )
                    ],
                    suspect=Suspect("card", c.card_id, c.label) if c.card_id else None,
                )
            )
        power = max((c.throttle.get(r, 0.0) for r in POWER_REASONS), default=0.0)
        if power >= THROTTLE_NOTE_SHARE * 2:
            notes.append(
                Finding(
                    "power_throttle",
                    "info",
                    _("Card %(card)s was held at its power limit %(share)s of the time")
                    % {"card": c.label, "share": _pct(power * 100)},
                    [
                        _("mean power %(w)s W, peak %(p)s W")
                        % {"w": _num(c.power_mean), "p": _num(c.power_peak)}
                    ],
                    [
                        _(
                            "Expected under full load; if the limit was lowered (nvidia-smi -pl), ask an operator."
                        )
                    ],
                )
            )
        if c.mem_peak and c.mem_total and c.mem_peak >= MEMORY_FULL_SHARE * c.mem_total:
            notes.append(
                Finding(
                    "memory_full",
                    "info",
                    _("Card %(card)s used %(share)s of its memory at peak")
                    % {"card": c.label, "share": _pct(100 * c.mem_peak / c.mem_total)},
                    [_memory_evidence(c)],
                    [_("One larger batch away from running out of memory: leave some headroom.")],
                )
            )
    if facts.time_limit_s and not facts.active and facts.state == "COMPLETED":
        used = facts.elapsed_s / facts.time_limit_s
        if used < SHORT_USE_SHARE and facts.time_limit_s >= 3600:
            notes.append(
                Finding(
                    "time_limit",
                    "info",
                    _("Used %(share)s of the %(limit)s limit") % {"share": _pct(used * 100),
                                                                  "limit": _duration(facts.time_limit_s)},
                    [_("ran %(ran)s") % {"ran": _duration(facts.elapsed_s)}],
                    [_("Ask for less time (--time): shorter jobs start sooner (backfill).")],
                )
            )  # fmt: skip
    return notes


def _line_at(text: str, pos: int) -> str:
    """The whole line of ``text`` around position ``pos``."""
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start : end if end >= 0 else len(text)].strip()


def _low_util_note(util: float, nodes: list[NodeUsage]) -> Finding:
    net = max((n.net_util_mean for n in nodes if n.net_util_mean is not None), default=None)
    disk = [n for n in nodes if n.disk_iops_mean and n.disk_iops_peak]
    disk_busy = [
        n for n in disk
        if (n.disk_iops_mean or 0) >= DISK_BUSY_IOPS and (n.disk_iops_mean or 0) >= DISK_BUSY_SHARE * (n.disk_iops_peak or 1)
    ]  # fmt: skip
    if (net is not None and net >= NET_BUSY_PCT) or disk_busy:
        evidence = [_("mean card utilisation %(u)s") % {"u": _pct(util)}]
        evidence += [
            _("%(node)s: disk %(mean)s operations/s on average (peak %(peak)s)")
            % {"node": n.hostname, "mean": _num(n.disk_iops_mean), "peak": _num(n.disk_iops_peak)}
            for n in disk_busy
        ]
        if net is not None and net >= NET_BUSY_PCT:
            evidence.append(_("network interfaces %(n)s busy on average") % {"n": _pct(net)})
        return Finding(
            "io_bound",
            "warning",
            _("Card utilisation %(u)s while the disks or the network were saturated: data loading is the "
              "bottleneck") % {"u": _pct(util)},
            evidence,
            [_("Raise DataLoader num_workers and use pinned memory."),
             _("Stage the data set on local NVMe (or in memory) before training.")],
        )  # fmt: skip
    return Finding(
        "low_util",
        "warning",
        _("Mean card utilisation %(u)s") % {"u": _pct(util)},
        [_("mean card utilisation %(u)s; disks and network were not saturated") % {"u": _pct(util)}],
        [_("Use a larger batch if memory allows."),
         _("Profile the input pipeline: CPU preprocessing or a synchronisation barrier may be waiting.")],
    )  # fmt: skip


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _duration(seconds: float) -> str:
    minutes = int(round(seconds / 60))
    if minutes >= 120:
        return _("%(h)s h") % {"h": f"{minutes / 60:g}" if minutes % 60 == 0 else f"{minutes / 60:.1f}"}
    return _("%(m)s min") % {"m": minutes}


def _gib(value: float | None) -> str:
    return "—" if value is None else f"{value / 2**30:.1f} GiB"


def _memory_evidence(c: CardUsage) -> str:
    return _("%(card)s: memory peak %(peak)s of %(total)s (mean %(mean)s)") % {
        "card": c.label, "peak": _gib(c.mem_peak), "total": _gib(c.mem_total), "mean": _gib(c.mem_mean),
    }  # fmt: skip


def _temperature_evidence(c: CardUsage) -> list[str]:
    out = [_("%(card)s: %(peak)s °C at peak, %(mean)s °C on average") % {
        "card": c.label, "peak": _num(c.temp_peak), "mean": _num(c.temp_mean)}]  # fmt: skip
    for reason, share in sorted(c.throttle.items()):
        if share > 0:
            out.append(
                _("throttle reason %(r)s active %(s)s of the time") % {"r": reason, "s": _pct(share * 100)}
            )
    return out


# -- failure diagnosis -------------------------------------------------------------------------------


def is_failure(facts: JobFacts) -> bool:
    """Whether the job ended in a way the diagnosis explains."""
    if facts.state not in FAILED_STATES:
        return False
    if facts.state == "CANCELLED":
        return bool(_SYSTEM_CANCEL.search(facts.reason or "")) or bool(facts.down_nodes)
    return True


def diagnose(facts: JobFacts, nodes: list[NodeUsage], events: list[EventFact]) -> list[Finding]:
    """The likely causes of the failure, most likely first. Empty when nothing explains it (the
    caller says so plainly and shows the output)."""
    if not is_failure(facts):
        return []
    out_events = parse_log_events(facts.output or "")
    found = [
        *_nccl(facts, out_events, events),
        *_xids(events),
        *_oom(facts, nodes),
        *_node_down(facts, events),
        *_thermal(nodes, events),
        *_power(nodes),
        *_init_timeout(facts, events),
        *_time_limit(facts),
    ]
    return sorted(found, key=lambda f: -f.score)


def _link_events(events: list[EventFact]) -> list[EventFact]:
    return [e for e in events if e.kind in LINK_KINDS]


def _nccl(facts: JobFacts, out_events: list, events: list[EventFact]) -> list[Finding]:
    lines = [e.message for e in out_events if e.kind == "nccl_timeout"]
    lines += [e.message for e in [*out_events, *events] if e.kind == "nccl_net_error"]
    if not lines:
        return []
    links = _link_events(events)
    evidence = [_("output: %(line)s") % {"line": line[:300]} for line in dict.fromkeys(lines[:2])]
    by_cable: dict[int, list[EventFact]] = {}
    for e in links:
        if e.cable is not None:
            by_cable.setdefault(e.cable.id, []).append(e)
    if by_cable:
        cable_id, flaps = max(by_cable.items(), key=lambda kv: len(kv[1]))
        cable = flaps[0].cable
        assert cable is not None
        evidence += [_link_line(e) for e in flaps[:6]]
        return [
            Finding(
                "nccl_link",
                "critical",
                _("NCCL collective timed out while cable %(cable)s (%(a)s ↔ %(b)s) was flapping")
                % {"cable": cable.label, "a": cable.a_end, "b": cable.b_end},
                evidence,
                [_("Replace cable %(cable)s, %(a)s ↔ %(b)s (or reseat both ends), then resubmit.")
                 % {"cable": cable.label, "a": cable.a_end, "b": cable.b_end},
                 _("Mark the cable faulty so the fabric check flags it until it is replaced.")],
                score=100,
                suspect=Suspect("cable", cable.id, cable.label),
            )
        ]  # fmt: skip
    if links:
        e = links[0]
        evidence += [_link_line(x) for x in links[:6]]
        suspect = Suspect("card", e.card_id, e.card) if e.card_id else Suspect("node", e.node_id, e.node)
        return [
            Finding(
                "nccl_link",
                "critical",
                _("NCCL collective timed out while a link on %(where)s went down") % {"where": e.card or e.node},
                evidence,
                [_("Check the cables of %(where)s (dmesg, tt-smi / ibstat) and replace the one that flaps.")
                 % {"where": e.card or e.node}],
                score=90,
                suspect=suspect,
            )
        ]  # fmt: skip
    return [
        Finding(
            "nccl_timeout",
            "warning",
            _("NCCL collective timed out, with no link fault recorded on the job's cards"),
            [*evidence, _("no link down, flap or retrain on the job's nodes in its window")],
            [_("Rerun with NCCL_DEBUG=INFO to see which rank stalled; a rank stuck in data loading or a "
               "deadlock in the code also ends this way."),
             _("Check the InfiniBand counters (ibstat, perfquery) of the job's nodes.")],
            score=55,
        )
    ]  # fmt: skip


def _link_line(e: EventFact) -> str:
    where = e.card or e.node
    return f"{e.ts:%H:%M:%S} {where}: {e.message}"


def xid_class(xid: int) -> str:
    return next((name for name, xids in XID_CLASSES.items() if xid in xids), "other")


def _xid_advice(cls: str) -> tuple[str, int]:
    if cls == "bus":
        return _("The card dropped off the PCIe bus: drain the node; reseat the card, check its riser and "
                 "power leads before it runs jobs again."), 95  # fmt: skip
    if cls == "ecc":
        return _("A memory (ECC / row remapping) error: the card needs a reset to retire the row; drain the "
                 "node, reset the GPU (nvidia-smi -r) and replace the card if it recurs."), 90  # fmt: skip
    if cls == "nvlink":
        return _("An NVLink error: drain the node and check NVLink status (nvidia-smi nvlink -s)."), 85
    if cls == "firmware":
        return _("A driver or GPU firmware fault: reboot the node; update the driver if it recurs."), 80
    if cls == "application":
        return _("Usually the job's own code (an illegal memory access or a crashed kernel): rerun with "
                 "CUDA_LAUNCH_BLOCKING=1; if other jobs hit it on the same card, it is the card."), 60  # fmt: skip
    return _("Look the Xid up in NVIDIA's Xid catalogue."), 50


def _xid_of(e: EventFact) -> int:
    """The Xid of an event ("GPU has fallen off the bus" lines are Xid 79)."""
    value = e.data.get("xid")
    return int(value) if e.kind == "xid" and isinstance(value, int | str) and str(value).isdigit() else 79


def _xids(events: list[EventFact]) -> list[Finding]:
    xids = [e for e in events if e.kind in ("xid", "gpu_fell_off_bus")]
    by_class: dict[str, list[EventFact]] = {}
    for e in xids:
        by_class.setdefault(xid_class(_xid_of(e)), []).append(e)
    out = []
    for cls, evs in by_class.items():
        e = evs[0]
        xid = _xid_of(e)
        advice, score = _xid_advice(cls)
        out.append(
            Finding(
                f"xid_{cls}",
                "critical" if score >= 80 else "warning",
                _("Xid %(xid)s on %(card)s: %(meaning)s")
                % {
                    "xid": xid,
                    "card": e.card or e.node,
                    "meaning": XID_DESCRIPTIONS.get(xid, _("unknown Xid")),
                },
                [f"{x.ts:%H:%M:%S} {x.card or x.node}: {x.message}" for x in evs[:6]],
                [advice],
                score=score,
                suspect=Suspect("card", e.card_id, e.card)
                if e.card_id
                else Suspect("node", e.node_id, e.node),
            )
        )
    return out


def _oom(facts: JobFacts, nodes: list[NodeUsage]) -> list[Finding]:
    text = facts.output or ""
    cuda, tt = _CUDA_OOM.search(text), _TT_OOM.search(text)
    cards = sorted(
        (c for c in _cards(nodes) if c.mem_peak is not None),
        key=lambda c: -(c.mem_peak or 0) / (c.mem_total or 1),
    )
    fullest = cards[0] if cards else None
    if cuda or tt:
        line = _line_at(text, (cuda or tt).start())  # type: ignore[union-attr]
        evidence = [_("output: %(line)s") % {"line": line[:300]}]
        if fullest is not None:
            evidence.append(_memory_evidence(fullest))
        title = (
            _("Out of card memory (Tenstorrent allocation failure)")
            if tt and not cuda
            else _("CUDA out of memory")
        )
        advice = [_("Reduce the batch size or use gradient checkpointing."),
                  _("Shard the model or optimizer state (FSDP, DeepSpeed ZeRO).")]  # fmt: skip
        if tt and not cuda:
            advice.insert(0, _("Card memory may be fragmented: allocate the large buffers first, or restart "
                               "the process between runs."))  # fmt: skip
        return [
            Finding(
                "card_oom", "critical", title, evidence, advice, score=95,
                suspect=Suspect("card", fullest.card_id, fullest.label) if fullest and fullest.card_id else None,
            )
        ]  # fmt: skip
    if facts.state == "OUT_OF_MEMORY":
        return [
            Finding(
                "host_oom",
                "critical",
                _("Out of host memory: Slurm's memory limit killed the job"),
                [_("Slurm state OUT_OF_MEMORY")],
                [
                    _(
                        "Ask for more memory (--mem) or load less at once (fewer DataLoader workers, smaller prefetch)."
                    )
                ],
                score=95,
            )
        ]
    return []


def _node_down(facts: JobFacts, events: list[EventFact]) -> list[Finding]:
    out = []
    for host, node_id, state, reason in facts.down_nodes:
        out.append(
            Finding(
                "node_down",
                "critical",
                _("Node %(node)s went down during the job") % {"node": host},
                [_("Slurm set %(node)s %(state)s: %(reason)s") % {"node": host, "state": state, "reason": reason or "—"}],
                [_("Resubmit excluding %(node)s; an operator looks at its console / BMC log.") % {"node": host}],
                score=92,
                suspect=Suspect("node", node_id, host),
            )
        )  # fmt: skip
    stalls = [e for e in events if e.kind == "heartbeat_stall"]
    if stalls:
        e = stalls[0]
        out.append(
            Finding(
                "heartbeat_stall",
                "critical",
                _("The firmware heartbeat of %(card)s stopped") % {"card": e.card or e.node},
                [f"{x.ts:%H:%M:%S} {x.card or x.node}: {x.message}" for x in stalls[:6]],
                [_("The card hung: reset it (tt-smi -r) or reboot the node before it runs jobs again.")],
                score=88,
                suspect=Suspect("card", e.card_id, e.card)
                if e.card_id
                else Suspect("node", e.node_id, e.node),
            )
        )
    if facts.state == "NODE_FAIL" and not out:
        out.append(
            Finding(
                "node_fail",
                "critical",
                _("Slurm lost a node of the job (NODE_FAIL)"),
                [_("Slurm state NODE_FAIL; reason: %(r)s") % {"r": facts.reason or "—"}],
                [_("Resubmit; tell an operator which node it ran on.")],
                score=70,
            )
        )
    return out


def _thermal(nodes: list[NodeUsage], events: list[EventFact]) -> list[Finding]:
    hot = [
        c for c in _cards(nodes) if c.throttled_thermal >= THROTTLE_NOTE_SHARE or (c.temp_peak or 0) >= HOT_C
    ]
    if not hot:
        return []
    c = max(hot, key=lambda x: (x.temp_peak or 0, x.throttled_thermal))
    return [
        Finding(
            "thermal",
            "warning",
            _("Card %(card)s overheated (%(peak)s °C)") % {"card": c.label, "peak": _num(c.temp_peak)},
            _temperature_evidence(c),
            [_("Check the card's fan and the airflow in front of it (cables blocking the chassis intake)."),
             _("Resubmit excluding the node until it is fixed.")],
            score=60 if c.throttled_thermal < 0.5 else 75,
            suspect=Suspect("card", c.card_id, c.label) if c.card_id else None,
        )
    ]  # fmt: skip


def _power(nodes: list[NodeUsage]) -> list[Finding]:
    out = []
    for c in _cards(nodes):
        if c.power_mean and c.power_min is not None and c.power_min < POWER_DROP_SHARE * c.power_mean:
            out.append(
                Finding(
                    "power_dropout",
                    "warning",
                    _("The power draw of %(card)s dropped out") % {"card": c.label},
                    [_("%(card)s: %(min)s W at the lowest, %(mean)s W on average") % {
                        "card": c.label, "min": _num(c.power_min), "mean": _num(c.power_mean)}],
                    [_("Check the card's PCIe power leads and the PSU rail feeding it.")],
                    score=65,
                    suspect=Suspect("card", c.card_id, c.label) if c.card_id else None,
                )
            )  # fmt: skip
    for n in nodes:
        if n.power_peak and n.power_capacity and n.power_peak >= PSU_NEAR_SHARE * n.power_capacity:
            out.append(
                Finding(
                    "psu_limit",
                    "warning",
                    _("%(node)s drew %(share)s of its PSU capacity")
                    % {"node": n.hostname, "share": _pct(100 * n.power_peak / n.power_capacity)},
                    [_("peak %(p)s W of %(c)s W") % {"p": _num(n.power_peak), "c": _num(n.power_capacity)}],
                    [_("Lower the cards' power limit or move a card to another feed.")],
                    score=62,
                    suspect=Suspect("node", n.node_id, n.hostname),
                )
            )
    return out


def _init_timeout(facts: JobFacts, events: list[EventFact]) -> list[Finding]:
    text = facts.output or ""
    m = next((m for m in _INIT_TIMEOUT.finditer(text) if _TIMEOUT_WORD.search(m.group(0))), None)
    if m is None:
        return []
    evidence = [_("output: %(line)s") % {"line": m.group(0)[:300]}]
    net = [e for e in _link_events(events) if e.card_id is None]
    evidence += [_link_line(e) for e in net[:4]] or [_("no network link went down on the job's nodes")]
    advice = [s.actions for s in diagnose_output(m.group(0)) if s.code == "DistInitTimeout"]
    return [
        Finding(
            "init_timeout",
            "critical",
            _("torch.distributed start-up (init_process_group) timed out"),
            evidence,
            [str(a) for a in (advice[0] if advice else ())],
            score=85 if net else 80,
            suspect=Suspect("node", net[0].node_id, net[0].node) if net else None,
        )
    ]


def _time_limit(facts: JobFacts) -> list[Finding]:
    if facts.state != "TIMEOUT":
        return []
    limit = _duration(facts.time_limit_s) if facts.time_limit_s else "—"
    return [
        Finding(
            "time_limit",
            "warning",
            _("The job ran into its time limit (%(limit)s)") % {"limit": limit},
            [_("Slurm state TIMEOUT after %(ran)s") % {"ran": _duration(facts.elapsed_s)}],
            [_("Ask for more time (--time), or save checkpoints and resume from the last one.")],
            score=97,
        )
    ]
