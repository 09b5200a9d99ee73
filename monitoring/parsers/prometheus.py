"""Prometheus text exposition format 0.0.4, and dcgm-exporter on top of it."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from . import metrics as m
from .model import CardIdentity, Event, ParseResult, Sample, ensure_utc, make_labels, normalize_bus_id
from .model import ParseError as ParseError

METRIC_TYPES = ("counter", "gauge", "histogram", "summary", "untyped")
_SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}
_INT64 = 2**63


@dataclass(frozen=True, slots=True)
class PromSample:
    name: str
    labels: dict[str, str]
    value: float
    timestamp_ms: int | None = None
    type: str = "untyped"
    family: str = ""
    help: str | None = field(default=None, compare=False)


def _is_name_start(c: str) -> bool:
    return ("a" <= c <= "z") or ("A" <= c <= "Z") or c in "_:"


def _is_name_char(c: str) -> bool:
    return _is_name_start(c) or ("0" <= c <= "9")


def _is_label_start(c: str) -> bool:
    return ("a" <= c <= "z") or ("A" <= c <= "Z") or c == "_"


def _is_label_char(c: str) -> bool:
    return _is_label_start(c) or ("0" <= c <= "9")


_FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INT_RE = re.compile(r"[+-]?[0-9]+")
_SPECIAL = {
    "nan": math.nan,
    "+nan": math.nan,
    "-nan": math.nan,
    "inf": math.inf,
    "+inf": math.inf,
    "-inf": -math.inf,
    "infinity": math.inf,
    "+infinity": math.inf,
    "-infinity": -math.inf,
}


def parse_float(tok: str) -> float:
    """A sample value as Go's ParseFloat accepts it (decimal, NaN, +Inf, -Inf)."""
    special = _SPECIAL.get(tok.lower())
    if special is not None:
        return special
    if not _FLOAT_RE.fullmatch(tok):
        raise ValueError(f"invalid value {tok!r}")
    return float(tok)


class _Line:
    """Cursor over one line; every error names the line."""

    def __init__(self, text: str, lineno: int) -> None:
        self.s = text
        self.i = 0
        self.lineno = lineno

    def error(self, msg: str) -> ParseError:
        return ParseError(f"{msg} (column {self.i + 1})", self.lineno)

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def at_end(self) -> bool:
        return self.i >= len(self.s)

    def skip_blanks(self) -> int:
        start = self.i
        while self.i < len(self.s) and self.s[self.i] in " \t":
            self.i += 1
        return self.i - start

    def word(self) -> str:
        start = self.i
        while self.i < len(self.s) and self.s[self.i] not in " \t":
            self.i += 1
        return self.s[start : self.i]

    def metric_name(self) -> str:
        start = self.i
        if not _is_name_start(self.peek()):
            raise self.error("expected a metric name")
        while self.i < len(self.s) and _is_name_char(self.s[self.i]):
            self.i += 1
        return self.s[start : self.i]

    def label_name(self) -> str:
        start = self.i
        if not _is_label_start(self.peek()):
            raise self.error("expected a label name")
        while self.i < len(self.s) and _is_label_char(self.s[self.i]):
            self.i += 1
        return self.s[start : self.i]

    def label_value(self) -> str:
        if self.peek() != '"':
            raise self.error("expected '\"' to open a label value")
        self.i += 1
        out: list[str] = []
        while True:
            if self.at_end():
                raise self.error("unterminated label value")
            c = self.s[self.i]
            self.i += 1
            if c == '"':
                return "".join(out)
            if c == "\\":
                if self.at_end():
                    raise self.error("unterminated escape in label value")
                e = self.s[self.i]
                self.i += 1
                if e == "n":
                    out.append("\n")
                elif e in '\\"':
                    out.append(e)
                else:
                    raise self.error(f"invalid escape sequence \\{e} in label value")
            else:
                out.append(c)

    def labels(self) -> dict[str, str]:
        """After '{': name="value" pairs separated by ',', trailing ',' allowed, up to '}'."""
        labels: dict[str, str] = {}
        while True:
            self.skip_blanks()
            if self.peek() == "}":
                self.i += 1
                return labels
            name = self.label_name()
            self.skip_blanks()
            if self.peek() != "=":
                raise self.error(f"expected '=' after label name {name!r}")
            self.i += 1
            self.skip_blanks()
            value = self.label_value()
            if name in labels:
                raise self.error(f"duplicate label {name!r}")
            labels[name] = value
            self.skip_blanks()
            c = self.peek()
            if c == ",":
                self.i += 1
            elif c == "}":
                self.i += 1
                return labels
            else:
                raise self.error("expected ',' or '}' after a label value")


def unescape_help(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in "\\n":
            out.append("\n" if text[i + 1] == "n" else "\\")
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def format_sample(name: str, labels: Mapping[str, str], value: float, timestamp_ms: int | None = None) -> str:
    """One exposition line (used by tests and fixtures)."""
    body = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels.items())
    line = f"{name}{{{body}}} {format_value(value)}" if labels else f"{name} {format_value(value)}"
    return line if timestamp_ms is None else f"{line} {timestamp_ms}"


def _family_of(name: str, types: Mapping[str, str]) -> tuple[str, str]:
    if name in types:
        return name, types[name]
    for kind, suffixes in _SUFFIXES.items():
        for suf in suffixes:
            if name.endswith(suf) and types.get(name[: -len(suf)]) == kind:
                return name[: -len(suf)], kind
    return name, "untyped"


def parse_prometheus_text(text: str) -> list[PromSample]:
    """Parse the whole exposition; any syntax error -> ParseError naming the line."""
    types: dict[str, str] = {}
    helps: dict[str, str] = {}
    seen_samples: set[str] = set()
    out: list[PromSample] = []
    for lineno, raw in enumerate(text.split("\n"), 1):
        raw = raw.removesuffix("\r")
        cur = _Line(raw, lineno)
        cur.skip_blanks()
        if cur.at_end():
            continue
        if cur.peek() == "#":
            cur.i += 1
            cur.skip_blanks()
            keyword = cur.word()
            if keyword not in ("HELP", "TYPE") or cur.skip_blanks() == 0 and not cur.at_end():
                continue  # plain comment
            if cur.at_end():
                continue  # "# HELP" alone: a comment
            name = cur.metric_name()
            if not cur.at_end() and cur.skip_blanks() == 0:
                raise cur.error(f"invalid metric name in # {keyword}")
            rest = cur.s[cur.i :]
            if keyword == "HELP":
                if name in helps:
                    raise cur.error(f"second HELP line for {name}")
                helps[name] = unescape_help(rest)
            else:
                kind = rest.strip()
                if kind not in METRIC_TYPES:
                    raise cur.error(f"unknown metric type {kind!r}")
                if name in types:
                    raise cur.error(f"second TYPE line for {name}")
                if name in seen_samples:
                    raise cur.error(f"TYPE line for {name} after its samples")
                types[name] = kind
            continue
        name = cur.metric_name()
        cur.skip_blanks()
        labels: dict[str, str] = {}
        if cur.peek() == "{":
            cur.i += 1
            labels = cur.labels()
            cur.skip_blanks()
        elif cur.i > 0 and raw[cur.i - 1] not in " \t":
            raise cur.error("expected a blank or '{' after the metric name")
        tok = cur.word()
        if not tok:
            raise cur.error(f"missing value for {name}")
        try:
            value = parse_float(tok)
        except ValueError as exc:
            raise cur.error(str(exc))
        ts_ms: int | None = None
        cur.skip_blanks()
        if not cur.at_end():
            tok = cur.word()
            if not _INT_RE.fullmatch(tok) or not -_INT64 <= int(tok) < _INT64:
                raise cur.error(f"invalid timestamp {tok!r}")
            ts_ms = int(tok)
            cur.skip_blanks()
            if not cur.at_end():
                raise cur.error("unexpected text after the timestamp")
        family, kind = _family_of(name, types)
        if kind == "histogram" and name == family + "_bucket" and "le" not in labels:
            raise cur.error(f"histogram bucket {name} without an 'le' label")
        seen_samples.add(family)
        out.append(PromSample(name, labels, value, ts_ms, kind, family, helps.get(family)))
    return out


# ---------------------------------------------------------------------------------------
# dcgm-exporter

_Conv = Callable[[float], float]


def _same(v: float) -> float:
    return v


# DCGM field -> (canonical metric, conversion)
DCGM_METRICS: dict[str, tuple[str, _Conv]] = {
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_c", _same),
    "DCGM_FI_DEV_MEMORY_TEMP": ("memory_temperature_c", _same),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", _same),
    "DCGM_FI_DEV_POWER_USAGE_INSTANT": ("power_instant_w", _same),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_w", _same),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_j", m.mj_to_j),
    "DCGM_FI_DEV_GPU_UTIL": ("utilization_pct", _same),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("memory_utilization_pct", _same),
    "DCGM_FI_DEV_FB_USED": ("memory_used_bytes", m.mib_to_bytes),
    "DCGM_FI_DEV_FB_FREE": ("memory_free_bytes", m.mib_to_bytes),
    "DCGM_FI_DEV_FB_TOTAL": ("memory_total_bytes", m.mib_to_bytes),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", _same),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", _same),
    "DCGM_FI_DEV_FAN_SPEED": ("fan_pct", _same),
    "DCGM_FI_DEV_PCIE_LINK_GEN": ("pcie_link_gen", _same),
    "DCGM_FI_DEV_PCIE_LINK_WIDTH": ("pcie_link_width", _same),
    "DCGM_FI_DEV_XID_ERRORS": ("xid_last", _same),
    "DCGM_EXP_XID_ERRORS_COUNT": ("xid_errors_total", _same),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ("pcie_replay_total", _same),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("ecc_corrected_total", _same),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("ecc_uncorrected_total", _same),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("throttle_reasons", _same),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("throttle_reasons", _same),
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": ("nvlink_bandwidth_total", _same),
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": ("nvlink_crc_flit_errors_total", _same),
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": ("nvlink_crc_data_errors_total", _same),
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": ("nvlink_replay_errors_total", _same),
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": ("nvlink_recovery_errors_total", _same),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("graphics_engine_active_pct", m.ratio_to_pct),
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active_pct", m.ratio_to_pct),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_active_pct", m.ratio_to_pct),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_active_pct", m.ratio_to_pct),
    # dcgm-exporter 1.x names
    "dcgm_gpu_temp": ("temperature_c", _same),
    "dcgm_memory_temp": ("memory_temperature_c", _same),
    "dcgm_power_usage": ("power_w", _same),
    "dcgm_total_energy_consumption": ("energy_j", m.mj_to_j),
    "dcgm_gpu_utilization": ("utilization_pct", _same),
    "dcgm_mem_copy_utilization": ("memory_utilization_pct", _same),
    "dcgm_fb_used": ("memory_used_bytes", m.mib_to_bytes),
    "dcgm_fb_free": ("memory_free_bytes", m.mib_to_bytes),
    "dcgm_sm_clock": ("sm_clock_mhz", _same),
    "dcgm_memory_clock": ("mem_clock_mhz", _same),
    "dcgm_xid_errors": ("xid_last", _same),
    "dcgm_pcie_replay_counter": ("pcie_replay_total", _same),
}
# identity labels: they live in ``Sample.node``/``card`` and ``CardIdentity``, not on every sample
_MOVED_LABELS = {
    "UUID",
    "uuid",
    "Hostname",
    "hostname",
    "pci_bus_id",
    "modelName",
    "device",
    "DCGM_FI_DRIVER_VERSION",
    "gpu",
}


def parse_dcgm_exporter(text: str, *, node: str | None = None, ts: datetime | None = None) -> ParseResult:
    """dcgm-exporter /metrics page -> canonical samples; non-DCGM families are ignored.

    ``node`` defaults to the ``Hostname``/``hostname`` label; ``card`` is the UUID, else the
    normalised ``pci_bus_id``.  NaN values mean "no data" and are skipped.
    """
    ts = ensure_utc(ts)
    result = ParseResult()
    cards: dict[str, CardIdentity] = {}
    for ps in parse_prometheus_text(text):
        mapping = DCGM_METRICS.get(ps.name)
        if mapping is None or math.isnan(ps.value):
            continue
        metric, conv = mapping
        lab = ps.labels
        uuid = lab.get("UUID") or lab.get("uuid")
        bus = normalize_bus_id(lab.get("pci_bus_id"))
        card = uuid or bus
        if card is None and "gpu" in lab:
            card = f"index:{lab['gpu']}"
        host = node or lab.get("Hostname") or lab.get("hostname")
        sts = datetime.fromtimestamp(ps.timestamp_ms / 1000, UTC) if ps.timestamp_ms is not None else ts
        keep = make_labels(
            {"index": lab.get("gpu"), **{k: v for k, v in lab.items() if k not in _MOVED_LABELS}}
        )
        value = conv(ps.value)
        result.samples.append(Sample(metric, value, m.unit_of(metric), sts, host, card, keep))
        if metric == "throttle_reasons" and value.is_integer() and value >= 0:
            for name, flag in m.throttle_flags(int(value)).items():
                result.samples.append(Sample(name, flag, m.BOOL, sts, host, card, keep))
        if card is not None and card not in cards:
            index = lab.get("gpu")
            cards[card] = CardIdentity(
                card=card,
                vendor="nvidia",
                uuid=uuid,
                bus_id=bus,
                index=int(index) if index is not None and index.isdigit() else None,
                name=lab.get("modelName"),
                driver_version=lab.get("DCGM_FI_DRIVER_VERSION"),
                node=host,
            )
    result.cards.extend(cards.values())
    return result


# ---------------------------------------------------------------------------------------
# node_exporter

# node_exporter family -> canonical node metric (label device)
NODE_EXPORTER_METRICS: dict[str, str] = {
    "node_network_receive_bytes_total": "net_rx_bytes_total",
    "node_network_transmit_bytes_total": "net_tx_bytes_total",
    "node_network_speed_bytes": "net_speed_bytes_per_s",
    "node_disk_reads_completed_total": "disk_reads_total",
    "node_disk_writes_completed_total": "disk_writes_total",
}
# loopback, container and virtual devices: their traffic is not the node's network or disks
# (dm-* devices map onto physical disks that are counted already)
_VIRTUAL_DEVICES = re.compile(
    r"^(lo|docker.*|veth.*|virbr.*|br-.*|cni.*|flannel.*|cali.*|tunl.*|loop\d+|z?ram\d+|dm-\d+)$"
)


def parse_node_exporter(text: str, *, node: str | None = None, ts: datetime | None = None) -> ParseResult:
    """node_exporter /metrics page -> network byte counters and link speed, disk read/write
    counters (node samples labelled ``device``); other families and virtual devices are ignored.

    A link speed of -1 (node_exporter's "unknown", e.g. a down interface) is skipped, like NaN.
    """
    ts = ensure_utc(ts)
    result = ParseResult()
    for ps in parse_prometheus_text(text):
        metric = NODE_EXPORTER_METRICS.get(ps.name)
        device = ps.labels.get("device", "")
        if metric is None or not device or _VIRTUAL_DEVICES.match(device) or not math.isfinite(ps.value):
            continue
        if metric == "net_speed_bytes_per_s" and ps.value <= 0:
            continue
        sts = datetime.fromtimestamp(ps.timestamp_ms / 1000, UTC) if ps.timestamp_ms is not None else ts
        labels = make_labels({"device": device})
        result.samples.append(Sample(metric, ps.value, m.unit_of(metric), sts, node, None, labels))
    return result


def xid_severity(xid: int) -> str:
    return "critical" if xid in CRITICAL_XIDS else "warning"


# Xids that mean the GPU (or its NVLink / memory) needs attention, not just a crashed app.
CRITICAL_XIDS: frozenset[int] = frozenset(
    {48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 121, 140, *range(144, 151)}
)
XID_DESCRIPTIONS: dict[int, str] = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "preemptive cleanup",
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    140: "unrecovered ECC error",
    **dict.fromkeys(range(144, 151), "NVLink error"),
}


def xid_events(previous_last: Mapping[str, int], result: ParseResult) -> list[Event]:
    """Events for cards whose ``xid_last`` changed since ``previous_last`` (card -> last xid).

    Cards absent from ``previous_last`` are a baseline, not news (the gauge never resets, so a
    non-zero value at first sight may be old): no event.  The same Xid twice in a row cannot
    be seen through this gauge; ``DCGM_EXP_XID_ERRORS_COUNT`` (``xid_errors_total``) can.
    """
    events: list[Event] = []
    for s in result.samples:
        if s.metric != "xid_last" or s.card is None or s.card not in previous_last:
            continue
        xid = int(s.value)
        if xid == previous_last[s.card] or xid == 0:
            continue
        desc = XID_DESCRIPTIONS.get(xid, "")
        events.append(
            Event(
                kind="xid",
                ts=s.ts,
                node=s.node,
                card=s.card,
                severity="critical" if xid in CRITICAL_XIDS else "warning",
                message=f"Xid {xid}" + (f": {desc}" if desc else ""),
                data={"xid": xid, "previous": previous_last[s.card], "source": "dcgm"},
            )
        )
    return events


def last_xids(result: ParseResult) -> dict[str, int]:
    """card -> xid_last, to keep as ``previous_last`` for the next scrape."""
    return {s.card: int(s.value) for s in result.samples if s.metric == "xid_last" and s.card is not None}
