"""What each health check kind concludes from a node's facts: pure functions, no database.

A rule returns a :class:`Result` (passed or not, with the evidence in words) or None when the node
gives it nothing to judge (no such cards, no data of that kind yet): a None leaves the node's
standing and its damping streak as they are.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from monitoring.health import probes

#: (labels, epoch seconds, value) of one series' latest value
Point = tuple[str, float, float]


@dataclass
class CardFacts:
    id: int
    slot: str
    model_id: int
    vendor: str
    bus_id: str


@dataclass
class NodeFacts:
    """What the portal knows of one node, read in bulk by :mod:`monitoring.health.services`."""

    id: int
    cards: list[CardFacts] = field(default_factory=list)
    #: (card id or None, metric) -> latest points (several where labels differ)
    latest: dict[tuple[int | None, str], list[Point]] = field(default_factory=dict)
    #: the Xid events' (ts, xid, card id) of the window the checks look at
    xids: list[tuple[dt.datetime, int, int | None]] = field(default_factory=list)
    #: card id -> (samples, lowest, highest) of the heartbeat in its window
    heartbeats: dict[int, tuple[int, float, float]] = field(default_factory=dict)
    #: probe key -> (exit code, stdout, ts)
    probes: dict[str, tuple[int, str, dt.datetime]] = field(default_factory=dict)

    #: card id -> epoch seconds of its newest reading of any metric read
    card_seen: dict[int, float] = field(default_factory=dict)
    #: the evaluation's time in epoch seconds
    now_s: float = 0.0

    def value(self, card_id: int | None, metric: str, max_age_s: float) -> float | None:
        """The highest fresh latest value of ``metric`` (of a card, or of the node itself)."""
        oldest = self.now_s - max_age_s
        best = None
        for _labels, ts, v in self.latest.get((card_id, metric), ()):
            if ts >= oldest and (best is None or v > best):
                best = v
        return best

    def fresh(self, ts: float, max_age_s: float) -> bool:
        return self.now_s - ts <= max_age_s


@dataclass(frozen=True)
class Result:
    ok: bool
    message: str


@dataclass(frozen=True)
class Param:
    name: str
    kind: type
    default: Any
    help: Any


@dataclass(frozen=True)
class Rule:
    evaluate: Callable[[Mapping[str, Any], NodeFacts, Sequence[CardFacts], dt.datetime], Result | None]
    params: tuple[Param, ...] = ()
    #: probe keys (from the parameters) the rule reads; empty: stored telemetry only
    probes: Callable[[Mapping[str, Any]], list[str]] | None = None


MAX_AGE = Param("max_age_s", int, 300, gettext_lazy("Readings older than this many seconds do not count."))


def _slots(cards: Sequence[CardFacts]) -> str:
    return ", ".join(c.slot for c in cards)


def _cards_enumerated(
    p: Mapping[str, Any], node: NodeFacts, cards: Sequence[CardFacts], now: dt.datetime
) -> Result | None:
    if not cards:
        return None
    age = p["max_age_s"]
    missing = [c for c in cards if not node.fresh(node.card_seen.get(c.id, 0.0), age)]
    if missing:
        return Result(False, _("%(n)s of %(total)s cards not reporting: %(slots)s") % {
            "n": len(missing), "total": len(cards), "slots": _slots(missing)})  # fmt: skip
    return Result(True, _("all %(total)s cards report") % {"total": len(cards)})


def _pcie_link(
    p: Mapping[str, Any], node: NodeFacts, cards: Sequence[CardFacts], now: dt.datetime
) -> Result | None:
    bad, judged = [], 0
    for c in cards:
        gen = node.value(c.id, "pcie_link_gen", p["max_age_s"])
        width = node.value(c.id, "pcie_link_width", p["max_age_s"])
        if gen is None and width is None:
            continue
        judged += 1
        want_gen = p["min_gen"] or node.value(c.id, "pcie_link_gen_max", p["max_age_s"])
        want_width = p["min_width"] or node.value(c.id, "pcie_link_width_max", p["max_age_s"])
        if (want_gen and gen is not None and gen < want_gen) or (
            want_width and width is not None and width < want_width
        ):
            bad.append(
                f"{c.slot} Gen{gen or 0:g} x{width or 0:g} < Gen{want_gen or 0:g} x{want_width or 0:g}"
            )
    if not judged:
        return None
    if bad:
        return Result(False, _("PCIe link below what is expected: %(cards)s") % {"cards": "; ".join(bad)})
    return Result(True, _("PCIe links as expected on %(n)s cards") % {"n": judged})


def _ecc(
    p: Mapping[str, Any], node: NodeFacts, cards: Sequence[CardFacts], now: dt.datetime
) -> Result | None:
    bad, judged = [], 0
    ids = {c.id for c in cards}
    for c in cards:
        value = node.value(c.id, "ecc_uncorrected_total", p["max_age_s"])
        reset = node.value(c.id, "reset_required", p["max_age_s"])
        if value is None and reset is None:
            continue
        judged += 1
        if value is not None and value > p["max_uncorrected"]:
            bad.append(_("%(slot)s: %(n)g uncorrected ECC errors") % {"slot": c.slot, "n": value})
        if reset:
            bad.append(_("%(slot)s: the driver asks for a reset") % {"slot": c.slot})
    # Xid 48 (double-bit ECC), 63 / 64 (page retirement / row remapping recorded / failed)
    remaps = [x for ts, x, cid in node.xids if x in (48, 63, 64) and (cid in ids or cid is None)
              and (now - ts).total_seconds() <= p["window_minutes"] * 60]  # fmt: skip
    if remaps:
        bad.append(
            _("Xid %(xids)s (ECC, retired or remapped rows)")
            % {"xids": ", ".join(map(str, sorted(set(remaps))))}
        )
    if not judged and not remaps:
        return None
    if bad:
        return Result(False, "; ".join(bad))
    return Result(True, _("no uncorrected ECC errors on %(n)s cards") % {"n": judged})


def _xid(p: Mapping[str, Any], node: NodeFacts, cards: Sequence[CardFacts], now: dt.datetime) -> Result:
    ignore = {int(x) for x in p["ignore"] if str(x).isdigit()}
    ids = {c.id for c in cards}
    recent = sorted(
        {x for ts, x, cid in node.xids
         if (now - ts).total_seconds() <= p["minutes"] * 60 and x not in ignore and (cid in ids or cid is None)}
    )  # fmt: skip
    if recent:
        return Result(False, _("Xid %(xids)s in the last %(m)s minutes") % {
            "xids": ", ".join(map(str, recent)), "m": p["minutes"]})  # fmt: skip
    return Result(True, _("no Xid in the last %(m)s minutes") % {"m": p["minutes"]})


def _temperature(
    p: Mapping[str, Any], node: NodeFacts, cards: Sequence[CardFacts], now: dt.datetime
) -> Result | None:
    bad, judged = [], 0
    for c in cards:
        temp = node.value(c.id, "temperature_c", p["max_age_s"])
        limit = p["limit_c"] or node.value(c.id, "thermal_limit_c", p["max_age_s"])
        if temp is None or not limit:
            continue
        judged += 1
        if limit - temp < p["headroom_c"]:
            bad.append(f"{c.slot} {temp:.0f}/{limit:.0f} °C")
    if not judged:
        return None
    if bad:
        return Result(False, _("less than %(h)s °C below the limit: %(cards)s") % {
            "h": p["headroom_c"], "cards": "; ".join(bad)})  # fmt: skip
    return Result(
        True, _("%(n)s cards at least %(h)s °C below their limit") % {"n": judged, "h": p["headroom_c"]}
    )


def _tt_heartbeat(
    p: Mapping[str, Any], node: NodeFacts, cards: Sequence[CardFacts], now: dt.datetime
) -> Result | None:
    tt = [c for c in cards if c.vendor.lower() == "tenstorrent"]
    if not tt:
        return None
    bad = []
    for c in tt:
        count, low, high = node.heartbeats.get(c.id, (0, 0.0, 0.0))
        if count < 2 or high <= low:
            bad.append(_("%(slot)s: heartbeat not rising") % {"slot": c.slot})
        dram = node.value(c.id, "dram_ok", p["max_age_s"])
        if dram is not None and dram < 1:
            bad.append(_("%(slot)s: DRAM not trained") % {"slot": c.slot})
    if bad:
        return Result(False, "; ".join(bad))
    return Result(True, _("heartbeat rising and DRAM trained on %(n)s cards") % {"n": len(tt)})


def _link_up(
    p: Mapping[str, Any], node: NodeFacts, cards: Sequence[CardFacts], now: dt.datetime
) -> Result | None:
    down, judged = [], 0
    for cid in [None, *(c.id for c in cards)]:
        for labels, ts, value in node.latest.get((cid, "link_up"), ()):
            if not node.fresh(ts, p["max_age_s"]):
                continue
            judged += 1
            if value < 1:
                slot = next((c.slot for c in cards if c.id == cid), "")
                down.append(f"{slot} {labels}".strip())
    min_bps = p["min_gbps"] * 1e9 / 8
    for labels, ts, value in node.latest.get((None, "net_speed_bytes_per_s"), ()):
        device = labels.partition("device=")[2].split(",")[0]
        if p["devices"] and device not in p["devices"] or not node.fresh(ts, p["max_age_s"]):
            continue
        judged += 1
        if min_bps and value < min_bps:
            down.append(_("%(dev)s at %(g)g Gbit/s") % {"dev": device, "g": value * 8 / 1e9})
    if not judged:
        return None
    if down:
        return Result(False, _("links down or slow: %(links)s") % {"links": "; ".join(down)})
    return Result(True, _("%(n)s links up") % {"n": judged})


# -- probe rules ----------------------------------------------------------------------------------
def _probe(node: NodeFacts, key: str, now: dt.datetime, max_age_s: int) -> tuple[int, str] | None:
    found = node.probes.get(key)
    if found is None or (now - found[2]).total_seconds() > max_age_s:
        return None
    return found[0], found[1]


def _daemons(
    p: Mapping[str, Any], node: NodeFacts, cards: Sequence[CardFacts], now: dt.datetime
) -> Result | None:
    out = _probe(node, "ps", now, p["max_age_s"])
    if out is None:
        return None
    running = probes.running_processes(out[1])
    missing = [d for d in p["daemons"] if d[:15] not in running]
    if missing:
        return Result(False, _("not running: %(d)s") % {"d": ", ".join(missing)})
    return Result(True, _("running: %(d)s") % {"d": ", ".join(p["daemons"])})


def _disk_free(
    p: Mapping[str, Any], node: NodeFacts, cards: Sequence[CardFacts], now: dt.datetime
) -> Result | None:
    out = _probe(node, f"df:{p['path']}", now, p["max_age_s"])
    if out is None:
        return None
    usage = probes.parse_df(out[1]) if out[0] == 0 else None
    if usage is None:
        return Result(False, _("df %(path)s failed (exit %(code)s)") % {"path": p["path"], "code": out[0]})
    args = {"path": usage.mount, "free": f"{usage.free_pct:.1f}", "min": p["min_free_pct"]}
    if usage.free_pct < p["min_free_pct"]:
        return Result(False, _("%(path)s: %(free)s%% free, less than %(min)s%%") % args)
    return Result(True, _("%(path)s: %(free)s%% free") % args)


def _shared_fs(
    p: Mapping[str, Any], node: NodeFacts, cards: Sequence[CardFacts], now: dt.datetime
) -> Result | None:
    out = _probe(node, f"findmnt:{p['path']}", now, p["max_age_s"])
    if out is None:
        return None
    fs = probes.parse_findmnt(out[1]) if out[0] == 0 else None
    if fs is None:
        return Result(False, _("%(path)s is not mounted") % {"path": p["path"]})
    options = fs.get("options", "").split(",")
    if "rw" not in options:
        return Result(
            False,
            _("%(path)s is mounted read-only (%(src)s)") % {"path": p["path"], "src": fs.get("source", "")},
        )
    return Result(
        True, _("%(path)s mounted read-write from %(src)s") % {"path": p["path"], "src": fs.get("source", "")}
    )


def _ib_link(
    p: Mapping[str, Any], node: NodeFacts, cards: Sequence[CardFacts], now: dt.datetime
) -> Result | None:
    out = _probe(node, "ibstat", now, p["max_age_s"])
    if out is None or out[0] in probes.NOT_INSTALLED:
        return None
    ports = probes.parse_ibstat(out[1])
    if p["ports"] and len(ports) < p["ports"]:
        return Result(
            False,
            _("%(n)s InfiniBand ports found, %(want)s expected") % {"n": len(ports), "want": p["ports"]},
        )
    bad = [f"{x.ca}/{x.port} {x.state} {x.rate_gbps:g} Gb/s" for x in ports
           if x.state != "Active" or x.physical_state != "LinkUp" or x.rate_gbps < p["rate_gbps"]]  # fmt: skip
    if bad:
        return Result(False, _("InfiniBand ports not active at %(rate)s Gb/s: %(ports)s") % {
            "rate": p["rate_gbps"], "ports": "; ".join(bad)})  # fmt: skip
    if not ports:
        return None
    return Result(True, _("%(n)s InfiniBand ports active") % {"n": len(ports)})


def _driver_firmware(
    p: Mapping[str, Any], node: NodeFacts, cards: Sequence[CardFacts], now: dt.datetime
) -> Result | None:
    versions: list[probes.CardVersions] = []
    for key in ("nvidia-smi", "tt-smi"):
        out = _probe(node, key, now, p["max_age_s"])
        if out is not None and out[0] == 0:
            versions.extend(probes.parse_versions(key, out[1]))
    if not versions:
        return None
    wanted_fw: Mapping[str, str] = p["firmware"]
    bad = []
    for v in versions:
        if p["driver"] and v.driver != p["driver"]:
            bad.append(
                _("%(card)s driver %(have)s, expected %(want)s")
                % {"card": v.card, "have": v.driver or "?", "want": p["driver"]}
            )
        for component, want in wanted_fw.items():
            have = v.firmware.get(component, "")
            if have != want:
                bad.append(f"{v.card} {component} {have or '?'} ≠ {want}")
    if bad:
        return Result(False, "; ".join(bad))
    return Result(True, _("driver and firmware as expected on %(n)s cards") % {"n": len(versions)})


#: short names of the parameters, for pages (the help says what each means)
PARAM_LABELS = {
    "max_age_s": gettext_lazy("Maximum age (s)"),
    "min_gen": gettext_lazy("Lowest PCIe generation"),
    "min_width": gettext_lazy("Fewest lanes"),
    "max_uncorrected": gettext_lazy("Uncorrected ECC errors allowed"),
    "window_minutes": gettext_lazy("Xid window (min)"),
    "minutes": gettext_lazy("Look back (min)"),
    "ignore": gettext_lazy("Xids ignored"),
    "headroom_c": gettext_lazy("Headroom (°C)"),
    "limit_c": gettext_lazy("Limit (°C)"),
    "window_s": gettext_lazy("Heartbeat window (s)"),
    "min_gbps": gettext_lazy("Slowest interface (Gbit/s)"),
    "devices": gettext_lazy("Interfaces"),
    "driver": gettext_lazy("Driver"),
    "firmware": gettext_lazy("Firmware"),
    "rate_gbps": gettext_lazy("Rate (Gb/s)"),
    "ports": gettext_lazy("Ports"),
    "path": gettext_lazy("Path"),
    "daemons": gettext_lazy("Daemons"),
    "min_free_pct": gettext_lazy("Lowest free share (%)"),
}

PROBE_AGE = Param(
    "max_age_s", int, 600, gettext_lazy("A check command's output older than this does not count.")
)

RULES: dict[str, Rule] = {
    "cards_enumerated": Rule(_cards_enumerated, (MAX_AGE,)),
    "pcie_link": Rule(
        _pcie_link,
        (
            MAX_AGE,
            Param("min_gen", int, 0, gettext_lazy("Lowest PCIe generation; 0: the card's own maximum.")),
            Param(
                "min_width", int, 0, gettext_lazy("Fewest lanes; 0: the card's own maximum (1 on a riser).")
            ),
        ),
    ),  # fmt: skip
    "ecc": Rule(
        _ecc,
        (
            MAX_AGE,
            Param("max_uncorrected", int, 0, gettext_lazy("Uncorrected ECC errors allowed.")),
            Param("window_minutes", int, 60, gettext_lazy("Minutes in which an Xid 48/63/64 counts.")),
        ),
    ),  # fmt: skip
    "xid": Rule(
        _xid,
        (
            Param("minutes", int, 30, gettext_lazy("Minutes to look back.")),
            Param(
                "ignore",
                list,
                [],
                gettext_lazy("Xid codes that do not count (e.g. 13, 31, 43: application faults)."),
            ),
        ),
    ),  # fmt: skip
    "temperature_headroom": Rule(
        _temperature,
        (
            MAX_AGE,
            Param("headroom_c", int, 10, gettext_lazy("Degrees the cards must stay below their limit.")),
            Param("limit_c", int, 0, gettext_lazy("The limit; 0: the card's reported thermal limit.")),
        ),
    ),  # fmt: skip
    "tt_heartbeat": Rule(
        _tt_heartbeat,
        (
            MAX_AGE,
            Param(
                "window_s", int, 120, gettext_lazy("The heartbeat must have risen within this many seconds.")
            ),
        ),
    ),  # fmt: skip
    "link_up": Rule(
        _link_up,
        (
            MAX_AGE,
            Param("min_gbps", int, 0, gettext_lazy("Slowest acceptable interface speed in Gbit/s; 0: any.")),
            Param("devices", list, [], gettext_lazy("Interfaces whose speed counts; empty: all.")),
        ),
    ),  # fmt: skip
    "driver_firmware": Rule(
        _driver_firmware,
        (
            PROBE_AGE,
            Param(
                "driver",
                str,
                "",
                gettext_lazy("Expected driver version (nvidia-smi driver_version, tt-smi Driver)."),
            ),
            Param(
                "firmware",
                dict,
                {},
                gettext_lazy('Expected firmware per component, e.g. {"fw_bundle_version": "18.7.0.0"}.'),
            ),
        ),
        probes=lambda p: ["nvidia-smi", "tt-smi"],
    ),  # fmt: skip
    "ib_link": Rule(
        _ib_link,
        (
            PROBE_AGE,
            Param("rate_gbps", int, 0, gettext_lazy("Rate each port must run at (ibstat Rate).")),
            Param("ports", int, 0, gettext_lazy("Ports expected; 0: any number.")),
        ),
        probes=lambda p: ["ibstat"],
    ),  # fmt: skip
    "shared_fs": Rule(
        _shared_fs,
        (
            PROBE_AGE,
            Param("path", str, "/shared", gettext_lazy("Mount point of the shared file system.")),
        ),
        probes=lambda p: [f"findmnt:{p['path']}"],
    ),  # fmt: skip
    "daemons": Rule(
        _daemons,
        (
            PROBE_AGE,
            Param("daemons", list, ["slurmd", "munged"], gettext_lazy("Process names that must run.")),
        ),
        probes=lambda p: ["ps"],
    ),  # fmt: skip
    "disk_free": Rule(
        _disk_free,
        (
            PROBE_AGE,
            Param("path", str, "/", gettext_lazy("Path whose file system is measured.")),
            Param("min_free_pct", int, 10, gettext_lazy("Lowest free share in percent.")),
        ),
        probes=lambda p: [f"df:{p['path']}"],
    ),  # fmt: skip
}


def params_clean(kind: str, raw: Any) -> dict[str, Any]:
    """The check's parameters with defaults filled in; ValidationError({"params": ...}) when wrong."""
    rule = RULES.get(kind)
    if rule is None:
        raise ValidationError({"kind": [_("Unknown check kind.")]})
    if not isinstance(raw, dict):
        raise ValidationError({"params": [_("Parameters must be a JSON object.")]})
    known = {p.name: p for p in rule.params}
    errors = [_("Unknown parameter: %(name)s") % {"name": name} for name in sorted(set(raw) - set(known))]
    out: dict[str, Any] = {}
    for name, param in known.items():
        value = raw.get(name, param.default)
        ok = isinstance(value, param.kind) and not isinstance(value, bool)
        if ok and param.kind is int:
            ok = 0 <= value <= 10**9
        if ok and param.kind is str and name == "path":
            ok = value.startswith("/") and value.isprintable() and "\x00" not in value and len(value) < 180
        if ok and param.kind is list:
            ok = all(
                isinstance(x, str | int) and not isinstance(x, bool) and str(x).isprintable() for x in value
            )
        if ok and param.kind is dict:
            ok = all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
        if not ok:
            errors.append(_("%(name)s: %(help)s") % {"name": name, "help": param.help})
        out[name] = value
    if errors:
        raise ValidationError({"params": errors})
    return out


def rule_probes(kind: str, params: Mapping[str, Any]) -> list[str]:
    rule = RULES[kind]
    return rule.probes(params) if rule.probes else []
