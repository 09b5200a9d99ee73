"""Burn-in acceptance criteria: pure functions from a card's recorded telemetry to pass / fail per
criterion, with the measured figure beside its limit (no Django, no database).

A criterion is ``pass``, ``fail``, ``unmeasured`` (no telemetry for it) or ``not_applicable`` (the
card has nothing to measure: no heartbeat on an NVIDIA GPU, no cabled fabric port). The card passes
when nothing fails and the required criteria (power, stability, temperature) were measured: a card
without evidence is not accepted.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

Status = Literal["pass", "fail", "unmeasured", "not_applicable"]
Point = tuple[datetime, float]

PASS: Status = "pass"
FAIL: Status = "fail"
UNMEASURED: Status = "unmeasured"
NOT_APPLICABLE: Status = "not_applicable"
STATUSES = (PASS, FAIL, UNMEASURED, NOT_APPLICABLE)

#: in lifecycle order of importance; the page shows them in this order
KEYS = (
    "stress_job",
    "power_band",
    "power_stable",
    "temperature",
    "throttling",
    "errors",
    "heartbeat",
    "links",
)
#: unmeasured is a failure for these (at the end of a run: the job's outcome is known by then)
REQUIRED = frozenset({"stress_job", "power_band", "power_stable", "temperature"})
#: a dip: a sample under this share of the run's median power (the guide's bad lead)
DIP_SHARE = 0.85
#: events that fail a burn-in outright
ERROR_EVENTS = {"xid": "xid", "gpu_fell_off_bus": "xid", "pcie_aer": "aer"}
LINK_EVENTS = frozenset({"link_down", "link_retrain"})
#: the AI clock under this share of its limit counts as throttled (Tenstorrent has no reason bits)
AICLK_THROTTLED = 0.95


@dataclass(frozen=True)
class Spec:
    """What the card model promises and what the acceptance criteria allow."""

    tdp_w: float
    temperature_limit_c: float | None
    temperature_margin_c: float
    power_min_pct: float
    power_max_pct: float
    power_variation_max_pct: float
    throttle_max_pct: float
    has_heartbeat: bool
    has_links: bool


@dataclass(frozen=True)
class Telemetry:
    """One card's telemetry over the run. ``throttled`` is one flag per sample time (any slowdown
    reason active, or the AI clock held below its limit); ``link_up`` is per port label."""

    power: Sequence[Point] = ()
    temperature: Sequence[Point] = ()
    throttled: Sequence[tuple[datetime, bool]] = ()
    heartbeat: Sequence[Point] = ()
    ecc_corrected: Sequence[Point] = ()
    ecc_uncorrected: Sequence[Point] = ()
    link_up: Mapping[str, Sequence[Point]] = field(default_factory=dict)
    #: (ts, kind) of the card's events in the window
    events: Sequence[tuple[datetime, str]] = ()


@dataclass(frozen=True)
class Criterion:
    key: str
    status: Status
    value: float | None = None
    limit: float | None = None
    low: float | None = None
    high: float | None = None
    counts: dict[str, int] = field(default_factory=dict)
    #: a Slurm state (stress_job)
    state: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _under_stress(points: Sequence[Point], start: datetime, warmup: timedelta) -> list[float]:
    return [v for ts, v in points if ts >= start + warmup]


def warmup_of(duration: timedelta) -> timedelta:
    """The start of a run left out of the power and throttling figures (the job starting, the stress
    program ramping up): a tenth of the run, at least 30 s, at most 5 min, never more than half of it."""
    return min(timedelta(minutes=5), max(duration / 10, timedelta(seconds=30)), duration / 2)


def power_band(spec: Spec, power: Sequence[float]) -> Criterion:
    low, high = spec.tdp_w * spec.power_min_pct / 100, spec.tdp_w * spec.power_max_pct / 100
    if not power:
        return Criterion("power_band", UNMEASURED, low=low, high=high)
    mean = statistics.fmean(power)
    ok = low <= mean <= high and max(power) <= high * 1.05
    return Criterion("power_band", PASS if ok else FAIL, value=round(mean, 1), low=low, high=high)


def power_stable(spec: Spec, power: Sequence[float]) -> Criterion:
    """Standard deviation as a share of the mean, and the dips below 85 % of the median."""
    limit = spec.power_variation_max_pct
    if len(power) < 3:
        return Criterion("power_stable", UNMEASURED, limit=limit)
    mean = statistics.fmean(power)
    variation = statistics.pstdev(power) / mean * 100 if mean > 0 else 0.0
    median = statistics.median(power)
    dips = sum(1 for v in power if v < median * DIP_SHARE)
    status = PASS if variation <= limit else FAIL
    return Criterion(
        "power_stable", status, value=round(variation, 2), limit=limit, low=round(min(power), 1),
        counts={"dips": dips, "samples": len(power)},
    )  # fmt: skip


def temperature(spec: Spec, temps: Sequence[float]) -> Criterion:
    if spec.temperature_limit_c is None:
        return Criterion("temperature", UNMEASURED)
    limit = spec.temperature_limit_c - spec.temperature_margin_c
    if not temps:
        return Criterion("temperature", UNMEASURED, limit=limit, high=spec.temperature_limit_c)
    hottest = max(temps)
    status = PASS if hottest <= limit else FAIL
    return Criterion(
        "temperature", status, value=round(hottest, 1), limit=limit, high=spec.temperature_limit_c
    )


def throttling(spec: Spec, flags: Sequence[bool]) -> Criterion:
    limit = spec.throttle_max_pct
    if not flags:
        return Criterion("throttling", UNMEASURED, limit=limit)
    share = sum(flags) / len(flags) * 100
    return Criterion("throttling", PASS if share <= limit else FAIL, value=round(share, 1), limit=limit)


def _increase(points: Sequence[Point]) -> int:
    values = [v for _ts, v in points]
    return int(max(values) - values[0]) if values else 0


def errors(telemetry: Telemetry) -> Criterion:
    counts = {"xid": 0, "aer": 0, "ecc": 0}
    for _ts, kind in telemetry.events:
        if kind in ERROR_EVENTS:
            counts[ERROR_EVENTS[kind]] += 1
    counts["ecc"] = _increase(telemetry.ecc_corrected) + _increase(telemetry.ecc_uncorrected)
    total = sum(counts.values())
    return Criterion("errors", PASS if total == 0 else FAIL, value=total, limit=0, counts=counts)


def heartbeat(spec: Spec, telemetry: Telemetry) -> Criterion:
    """The firmware heartbeat must rise at every sample (Tenstorrent); a stall event fails too."""
    if not spec.has_heartbeat:
        return Criterion("heartbeat", NOT_APPLICABLE)
    values = [v for _ts, v in telemetry.heartbeat]
    if len(values) < 2:
        return Criterion("heartbeat", UNMEASURED, limit=0)
    stalls = sum(1 for a, b in zip(values, values[1:], strict=False) if b <= a)
    stalls += sum(1 for _ts, kind in telemetry.events if kind == "heartbeat_stall")
    return Criterion("heartbeat", PASS if stalls == 0 else FAIL, value=stalls, limit=0)


def links(spec: Spec, telemetry: Telemetry) -> Criterion:
    """Every fabric link of the card up through the run, without flaps (downs or retrains)."""
    if not spec.has_links:
        return Criterion("links", NOT_APPLICABLE)
    flaps = sum(1 for _ts, kind in telemetry.events if kind in LINK_EVENTS)
    if not telemetry.link_up and not flaps:
        return Criterion("links", UNMEASURED, limit=0)
    down = sum(1 for points in telemetry.link_up.values() if any(v < 1 for _ts, v in points))
    status = PASS if flaps == 0 and down == 0 else FAIL
    return Criterion(
        "links", status, value=flaps + down, limit=0,
        counts={"ports": len(telemetry.link_up), "ports_down": down, "flaps": flaps},
    )  # fmt: skip


def stress_job(state: str | None, exit_code: int | None) -> Criterion:
    """The stress program must run to its end: a crash (a card falling off the bus) fails the card."""
    if state is None:
        return Criterion("stress_job", UNMEASURED)
    ok = state == "COMPLETED" and not exit_code
    return Criterion("stress_job", PASS if ok else FAIL, value=exit_code, limit=0, state=state)


def evaluate(
    spec: Spec,
    telemetry: Telemetry,
    *,
    start: datetime,
    end: datetime,
    job_state: str | None = None,
    exit_code: int | None = None,
) -> list[Criterion]:
    """Every criterion of one card over [start, end]; ``job_state`` None while the job still runs."""
    warmup = warmup_of(end - start)
    power = _under_stress(telemetry.power, start, warmup)
    return [
        stress_job(job_state, exit_code),
        power_band(spec, power),
        power_stable(spec, power),
        temperature(spec, [v for _ts, v in telemetry.temperature]),
        throttling(spec, [flag for ts, flag in telemetry.throttled if ts >= start + warmup]),
        errors(telemetry),
        heartbeat(spec, telemetry),
        links(spec, telemetry),
    ]


def verdict(criteria: Sequence[Criterion]) -> Literal["pass", "fail"]:
    """Pass when nothing failed and every required criterion was measured."""
    if any(c.status == FAIL for c in criteria):
        return "fail"
    if any(c.key in REQUIRED and c.status != PASS for c in criteria):
        return "fail"
    return "pass"


def throttled_flags(
    reasons: Sequence[Point], aiclk: Sequence[Point], aiclk_max: Sequence[Point]
) -> list[tuple[datetime, bool]]:
    """One throttled flag per sample: from the clock event reasons bitmask (NVIDIA: HW slowdown, SW/HW
    thermal, power brake; the software power cap is the stress program reaching its limit, not a fault),
    else from the AI clock against its limit (Tenstorrent)."""
    if reasons:
        bad = 0x8 | 0x20 | 0x40 | 0x80
        return [(ts, bool(int(v) & bad)) for ts, v in reasons]
    if aiclk and aiclk_max:
        fmax = max(v for _ts, v in aiclk_max)
        if fmax > 0:
            return [(ts, v < fmax * AICLK_THROTTLED) for ts, v in aiclk]
    return []
