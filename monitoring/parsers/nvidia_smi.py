"""nvidia-smi: ``--query-gpu`` CSV and ``-q -x`` XML."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET  # noqa: S405 - DOCTYPE/ENTITY refused before parsing
from collections.abc import Callable, Sequence
from datetime import datetime

from . import metrics as m
from .model import (
    CardIdentity,
    ParseError,
    ParseProblem,
    ParseResult,
    ParseWarning,
    Sample,
    ensure_utc,
    line_of,
    make_labels,
)
from .model import normalize_bus_id as _bus

DEFAULT_QUERY_FIELDS: tuple[str, ...] = (
    "index",
    "uuid",
    "pci.bus_id",
    "name",
    "temperature.gpu",
    "temperature.memory",
    "power.draw",
    "power.limit",
    "utilization.gpu",
    "utilization.memory",
    "memory.total",
    "memory.used",
    "clocks.sm",
    "clocks.mem",
    "pcie.link.gen.current",
    "pcie.link.width.current",
    "fan.speed",
    "ecc.errors.corrected.volatile.total",
    "ecc.errors.uncorrected.volatile.total",
    # the old name: accepted by every driver (<535 does not know clocks_event_reasons.*);
    # 535.113+ prints the new name in the header; both names map to the same field.
    "clocks_throttle_reasons.active",
)


def nvidia_smi_argv(fields: Sequence[str] = DEFAULT_QUERY_FIELDS, *, units: bool = False) -> list[str]:
    """argv for the CSV query; parse its stdout with ``parse_nvidia_smi_csv(out, fields)``."""
    fmt = "csv,noheader" if units else "csv,noheader,nounits"
    return ["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=" + fmt]


# ---------------------------------------------------------------------------------------
# value helpers

_NUM_RE = re.compile(r"^\s*([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z%/]*)\s*$")
_MISSING = {
    "n/a",
    "not supported",
    "unknown error",
    "not available",
    "",
    "na",
    "requested functionality has been deprecated",
    "insufficient permissions",
    "gpu is lost",
}
_UNIT_SCALE = {
    "": 1.0,
    "w": 1.0,
    "mw": 0.001,
    "%": 1.0,
    "mhz": 1.0,
    "c": 1.0,
    "x": 1.0,
    "mib": 1.0,
    "gib": 1024.0,
    "kib": 1.0 / 1024.0,
    "j": 1.0,
    "v": 1.0,
    "mv": 0.001,
}


def is_missing(raw: str) -> bool:
    """Bracketed tokens (``[N/A]``, ``[Not Supported]``, ``[Unknown Error]``...) and bare ``N/A``."""
    t = raw.strip()
    if t.startswith("[") and t.endswith("]"):
        return True
    return t.lower() in _MISSING


def parse_number(raw: str) -> float:
    """``68.40 W`` / ``3 MiB`` / ``16x`` / ``0 %`` -> float (MiB-family scaled to MiB). ValueError if not."""
    mt = _NUM_RE.match(raw)
    if not mt:
        raise ValueError(f"not a number: {raw!r}")
    unit = mt.group(2).lower()
    if unit not in _UNIT_SCALE:
        raise ValueError(f"unknown unit {mt.group(2)!r}")
    return float(mt.group(1)) * _UNIT_SCALE[unit]


def parse_hex_mask(raw: str) -> int:
    t = raw.strip()
    if t.lower().startswith("0x"):
        return int(t[2:], 16)
    return int(t, 10)


# ---------------------------------------------------------------------------------------
# CSV

_Conv = Callable[[float], float]
_ident: _Conv = float

# field -> (metric, converter, labels)
_NUMERIC_FIELDS: dict[str, tuple[str, _Conv, tuple[tuple[str, str], ...]]] = {
    "temperature.gpu": ("temperature_c", _ident, ()),
    "temperature.memory": ("memory_temperature_c", _ident, ()),
    "power.draw": ("power_w", _ident, ()),
    "power.draw.average": ("power_w", _ident, ()),
    "power.draw.instant": ("power_instant_w", _ident, ()),
    "power.limit": ("power_limit_w", _ident, ()),
    "enforced.power.limit": ("enforced_power_limit_w", _ident, ()),
    "utilization.gpu": ("utilization_pct", _ident, ()),
    "utilization.memory": ("memory_utilization_pct", _ident, ()),
    "memory.total": ("memory_total_bytes", m.mib_to_bytes, ()),
    "memory.used": ("memory_used_bytes", m.mib_to_bytes, ()),
    "memory.free": ("memory_free_bytes", m.mib_to_bytes, ()),
    "clocks.sm": ("sm_clock_mhz", _ident, ()),
    "clocks.current.sm": ("sm_clock_mhz", _ident, ()),
    "clocks.mem": ("mem_clock_mhz", _ident, ()),
    "clocks.current.memory": ("mem_clock_mhz", _ident, ()),
    "clocks.gr": ("graphics_clock_mhz", _ident, ()),
    "clocks.current.graphics": ("graphics_clock_mhz", _ident, ()),
    "pcie.link.gen.current": ("pcie_link_gen", _ident, ()),
    "pcie.link.gen.gpucurrent": ("pcie_link_gen", _ident, ()),
    "pcie.link.gen.max": ("pcie_link_gen_max", _ident, ()),
    "pcie.link.gen.gpumax": ("pcie_link_gen_max", _ident, ()),
    "pcie.link.width.current": ("pcie_link_width", _ident, ()),
    "pcie.link.width.max": ("pcie_link_width_max", _ident, ()),
    "fan.speed": ("fan_pct", _ident, ()),
    "ecc.errors.corrected.volatile.total": ("ecc_corrected_total", _ident, (("scope", "volatile"),)),
    "ecc.errors.uncorrected.volatile.total": ("ecc_uncorrected_total", _ident, (("scope", "volatile"),)),
    "ecc.errors.corrected.aggregate.total": ("ecc_corrected_total", _ident, (("scope", "aggregate"),)),
    "ecc.errors.uncorrected.aggregate.total": ("ecc_uncorrected_total", _ident, (("scope", "aggregate"),)),
}
_MASK_FIELDS = {"clocks_event_reasons.active", "clocks_throttle_reasons.active"}
_IDENTITY_FIELDS = {
    "index",
    "uuid",
    "pci.bus_id",
    "gpu_bus_id",
    "name",
    "gpu_name",
    "serial",
    "gpu_serial",
    "driver_version",
    "vbios_version",
    "gpu_uuid",
    "timestamp",
    "pstate",
    "reset_status.reset_required",
}
_HEADER_TOKEN_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*)(?:\s*\[[^\]]*\])?$")
_EVENT = "clocks_event_reasons."
_THROTTLE = "clocks_throttle_reasons."


def _canonical_field(f: str) -> str:
    """Lower case, unit suffix dropped, ``clocks_throttle_reasons.*`` -> ``clocks_event_reasons.*``."""
    f = f.strip().lower()
    mt = _HEADER_TOKEN_RE.match(f)
    if mt:
        f = mt.group(1)
    if f.startswith(_THROTTLE):
        return _EVENT + f[len(_THROTTLE) :]
    return f


def _is_known(key: str) -> bool:
    """``key`` (canonical) is a field the portal reads."""
    if key in _NUMERIC_FIELDS or key in _MASK_FIELDS or key in _IDENTITY_FIELDS:
        return True
    return key.startswith(_EVENT) and key[len(_EVENT) :] in m.THROTTLE_BITS


def _header_fields(cols: list[str], fields: Sequence[str]) -> list[str] | None:
    """The field names of a ``--format=csv`` header line, or None if ``cols`` is a data row.

    Every column must be a field name (``power.draw`` or ``power.draw [W]``) and at least one a
    name the portal knows, one that was asked for, or a dotted query name.
    """
    names = []
    for c in cols:
        mt = _HEADER_TOKEN_RE.match(c)
        if not mt:
            return None
        names.append(mt.group(1).lower())
    wanted = {_canonical_field(f) for f in fields}
    keys = [_canonical_field(n) for n in names]
    if any(k in wanted or _is_known(k) or "." in k for k in keys):
        return names
    return None


_SMI_FAILURES = (
    "nvidia-smi has failed",
    "is not a valid field to query",
    "couldn't communicate with the nvidia driver",
    "unable to determine the device handle",
    "failed to initialize nvml",
)
_ID_KEYS = {"index", "uuid", "gpu_uuid", "pci.bus_id", "gpu_bus_id"}


def parse_nvidia_smi_csv(
    text: str,
    fields: Sequence[str] = DEFAULT_QUERY_FIELDS,
    *,
    node: str | None = None,
    ts: datetime | None = None,
) -> ParseResult:
    """Parse ``nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]``.

    With a header line (``--format=csv``) columns are mapped by the header's names: any subset
    and order of query fields, unit suffixes (``power.draw [W]``), old and new names of one field
    (``clocks_throttle_reasons.*`` / ``clocks_event_reasons.*``).  Columns the portal does not
    read are skipped and listed in ``warnings``.  Without a header, columns are mapped by the
    order of ``fields``.  Units are stripped from values, bracketed tokens are missing values.
    A row with the wrong column count or a bad value is reported in ``problems``; if no line at
    all is a usable row, ParseError.
    """
    result = ParseResult()
    ts = ensure_utc(ts)
    fields = [f.strip() for f in fields]
    if not fields:
        raise ParseError("no fields requested")
    first_content = True
    header = False
    good_rows = 0
    row_number = 0
    first_bad: tuple[int, str] | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        low = line.strip().lower()
        if low.startswith("no devices were found"):
            continue
        if any(f in low for f in _SMI_FAILURES):
            raise ParseError(f"nvidia-smi reported an error: {line.strip()}", lineno)
        cols = [c.strip() for c in line.split(",")]
        if first_content:
            first_content = False
            named = _header_fields(cols, fields)
            if named is not None:
                fields, header = named, True
                _header_warnings(result, fields)
                continue
        if len(cols) != len(fields):
            reason = f"expected {len(fields)} columns, got {len(cols)}"
            if not header:
                reason += " (no header line: the default field list is assumed)"
            result.problems.append(ParseProblem(lineno, None, line, reason))
            if first_bad is None:
                first_bad = (lineno, reason)
            continue
        if _parse_csv_row(result, lineno, line, fields, cols, node, ts, row_number):
            good_rows += 1
        elif first_bad is None:
            first_bad = (lineno, "no usable value in row")
        row_number += 1
    if good_rows == 0 and first_bad is not None:
        raise ParseError(f"not nvidia-smi CSV output: {first_bad[1]}", first_bad[0])
    return result


def _header_warnings(result: ParseResult, fields: Sequence[str]) -> None:
    """Unknown and repeated columns of a header, and a header without a card id column."""
    seen: dict[str, str] = {}
    for f in fields:
        key = _canonical_field(f)
        if not _is_known(key):
            result.warnings.append(ParseWarning("unknown_field", f))
            continue
        metric = _NUMERIC_FIELDS[key][0] + repr(_NUMERIC_FIELDS[key][2]) if key in _NUMERIC_FIELDS else key
        if metric in seen:
            result.warnings.append(ParseWarning("duplicate_field", f))
        seen.setdefault(metric, f)
    if not _ID_KEYS & {_canonical_field(f) for f in fields}:
        result.warnings.append(ParseWarning("no_card_id"))


def _parse_csv_row(
    result: ParseResult,
    lineno: int,
    line: str,
    fields: Sequence[str],
    cols: list[str],
    node: str | None,
    ts: datetime | None,
    row_number: int = 0,
) -> bool:
    """Append one row's samples; True if at least one value was usable."""
    values: dict[str, str] = {}
    for f, c in zip(fields, cols, strict=True):
        values.setdefault(_canonical_field(f), c)
    uuid = values.get("uuid") or values.get("gpu_uuid")
    uuid = None if uuid is None or is_missing(uuid) else uuid
    bus = _bus(values.get("pci.bus_id") or values.get("gpu_bus_id"))
    index: int | None = None
    raw_index = values.get("index")
    if raw_index is not None and not is_missing(raw_index):
        try:
            index = int(raw_index)
        except ValueError:
            result.problems.append(ParseProblem(lineno, "index", raw_index, "index is not an integer"))
    elif raw_index is None and uuid is None and bus is None and not _ID_KEYS & values.keys():
        index = row_number  # nvidia-smi prints GPUs in index order
    row_ts = ts
    raw_ts = values.get("timestamp")
    if raw_ts and row_ts is None:
        try:
            row_ts = ensure_utc(datetime.strptime(raw_ts, "%Y/%m/%d %H:%M:%S.%f"))
        except ValueError:
            result.problems.append(ParseProblem(lineno, "timestamp", raw_ts, "unparseable timestamp"))
    card = uuid or bus or (f"index:{index}" if index is not None else None)
    base_labels: tuple[tuple[str, str], ...] = (("index", str(index)),) if index is not None else ()
    usable = uuid is not None or bus is not None or index is not None
    added: set[tuple[str, tuple[tuple[str, str], ...]]] = set()

    def add(metric: str, value: float, extra: tuple[tuple[str, str], ...] = ()) -> None:
        if (metric, extra) in added:  # a repeated column: the first one wins
            return
        added.add((metric, extra))
        result.samples.append(
            Sample(metric, value, m.unit_of(metric), row_ts, node, card, make_labels(base_labels + extra))
        )

    for f, raw in zip(fields, cols, strict=True):
        key = _canonical_field(f)
        if is_missing(raw):
            if key in _NUMERIC_FIELDS or key in _MASK_FIELDS:
                usable = True
            continue
        try:
            if key in _NUMERIC_FIELDS:
                metric, conv, extra = _NUMERIC_FIELDS[key]
                add(metric, conv(parse_number(raw)), extra)
            elif key == "clocks_event_reasons.active":
                mask = parse_hex_mask(raw)
                add("throttle_reasons", float(mask))
                for name, v in m.throttle_flags(mask).items():
                    add(name, v)
            elif key.startswith(_EVENT) and key[len(_EVENT) :] in m.THROTTLE_BITS:
                add("throttle_" + key[len(_EVENT) :], _active(raw))
            elif key == "pstate":
                if not re.fullmatch(r"P[0-9]{1,2}", raw):
                    raise ValueError("not a P-state")
                add("pstate", float(raw[1:]))
            elif key == "reset_status.reset_required":
                add("reset_required", _yes_no(raw))
            else:
                continue
            usable = True
        except ValueError as exc:
            result.problems.append(ParseProblem(lineno, f, raw, str(exc)))
    if card is not None:
        gpu_name = values.get("name") or values.get("gpu_name")
        serial = values.get("serial") or values.get("gpu_serial")
        result.cards.append(
            CardIdentity(
                card=card,
                vendor="nvidia",
                uuid=uuid,
                bus_id=bus,
                index=index,
                name=None if gpu_name is None or is_missing(gpu_name) else gpu_name,
                serial=None if serial is None or is_missing(serial) else serial,
                driver_version=_present(values.get("driver_version")),
                vbios_version=_present(values.get("vbios_version")),
                node=node,
            )
        )
    return usable


def _present(raw: str | None) -> str | None:
    return None if raw is None or is_missing(raw) else raw.strip()


def _active(raw: str) -> float:
    t = raw.strip().lower()
    if t == "active":
        return 1.0
    if t == "not active":
        return 0.0
    raise ValueError("expected Active / Not Active")


def _yes_no(raw: str) -> float:
    t = raw.strip().lower()
    if t in ("yes", "true", "1"):
        return 1.0
    if t in ("no", "false", "0"):
        return 0.0
    raise ValueError("expected Yes / No")


# ---------------------------------------------------------------------------------------
# XML

_ENTITY_RE = re.compile(r"<!\s*ENTITY", re.IGNORECASE)
_DOCTYPE_RE = re.compile(r"<!\s*DOCTYPE\b[^>\[]*(?P<subset>\[)?", re.IGNORECASE)
# what nvidia-smi itself prints: an external reference that ElementTree never fetches
_PLAIN_DOCTYPE_RE = re.compile(
    r"<!DOCTYPE\s+[A-Za-z_][\w.-]*\s+(?:SYSTEM\s+\"[^\"<>\[\]]*\"|PUBLIC\s+\"[^\"<>\[\]]*\"\s+\"[^\"<>\[\]]*\")\s*>"
)


def reject_dtd(text: str) -> None:
    """Refuse entity declarations and DOCTYPEs with an internal subset (entity expansion).

    The one DOCTYPE form real ``nvidia-smi -q -x`` output carries,
    ``<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">``, declares nothing and is
    allowed (expat does not load external DTDs).
    """
    ent = _ENTITY_RE.search(text)
    if ent:
        raise ParseError("refusing XML with <!ENTITY> (entity expansion risk)", line_of(text, ent.start()))
    for mt in _DOCTYPE_RE.finditer(text):
        if mt.group("subset") or not _PLAIN_DOCTYPE_RE.match(text, mt.start()):
            raise ParseError(
                "refusing XML with a <!DOCTYPE> internal subset (entity expansion risk)",
                line_of(text, mt.start()),
            )


def parse_xml_document(text: str) -> ET.Element:
    reject_dtd(text)
    try:
        return ET.fromstring(text)  # noqa: S314 - DTDs refused above
    except ET.ParseError as exc:
        line = exc.position[0] if getattr(exc, "position", None) else None
        raise ParseError(f"not well-formed XML: {exc}", line)


def _text(el: ET.Element | None, path: str) -> str | None:
    if el is None:
        return None
    node = el.find(path)
    if node is None or node.text is None:
        return None
    return node.text.strip()


_XML_SIMPLE: tuple[tuple[str, str, _Conv], ...] = (
    ("temperature/gpu_temp", "temperature_c", _ident),
    ("temperature/memory_temp", "memory_temperature_c", _ident),
    ("utilization/gpu_util", "utilization_pct", _ident),
    ("utilization/memory_util", "memory_utilization_pct", _ident),
    ("fb_memory_usage/total", "memory_total_bytes", m.mib_to_bytes),
    ("fb_memory_usage/used", "memory_used_bytes", m.mib_to_bytes),
    ("fb_memory_usage/free", "memory_free_bytes", m.mib_to_bytes),
    ("clocks/sm_clock", "sm_clock_mhz", _ident),
    ("clocks/mem_clock", "mem_clock_mhz", _ident),
    ("clocks/graphics_clock", "graphics_clock_mhz", _ident),
    ("pci/pci_gpu_link_info/pcie_gen/current_link_gen", "pcie_link_gen", _ident),
    ("pci/pci_gpu_link_info/pcie_gen/max_link_gen", "pcie_link_gen_max", _ident),
    ("pci/pci_gpu_link_info/link_widths/current_link_width", "pcie_link_width", _ident),
    ("pci/pci_gpu_link_info/link_widths/max_link_width", "pcie_link_width_max", _ident),
    ("pci/replay_counter", "pcie_replay_total", _ident),
    ("fan_speed", "fan_pct", _ident),
)
# first present path wins (new layouts first)
_XML_FALLBACKS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "power_w",
        (
            "gpu_power_readings/average_power_draw",
            "gpu_power_readings/power_draw",
            "power_readings/average_power_draw",
            "power_readings/power_draw",
        ),
    ),
    ("power_instant_w", ("gpu_power_readings/instant_power_draw", "power_readings/instant_power_draw")),
    (
        "power_limit_w",
        (
            "gpu_power_readings/current_power_limit",
            "gpu_power_readings/power_limit",
            "power_readings/current_power_limit",
            "power_readings/power_limit",
        ),
    ),
    (
        "enforced_power_limit_w",
        ("gpu_power_readings/enforced_power_limit", "power_readings/enforced_power_limit"),
    ),
)


def parse_nvidia_smi_xml(text: str, *, node: str | None = None, ts: datetime | None = None) -> ParseResult:
    """Parse ``nvidia-smi -q -x`` (drivers 470 .. 570+ layouts)."""
    root = parse_xml_document(text)
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"root element is <{root.tag}>, expected <nvidia_smi_log>", 1)
    ts = ensure_utc(ts)
    result = ParseResult()
    driver = _present(_text(root, "driver_version"))
    cuda = _present(_text(root, "cuda_version"))
    if ts is None:
        raw_ts = _text(root, "timestamp")
        if raw_ts:
            try:
                ts = ensure_utc(datetime.strptime(raw_ts, "%a %b %d %H:%M:%S %Y"))
            except ValueError:
                result.problems.append(ParseProblem(None, "timestamp", raw_ts, "unparseable timestamp"))
    for index, gpu in enumerate(root.findall("gpu")):
        _parse_xml_gpu(result, gpu, index, node, ts, driver, cuda)
    return result


def _parse_xml_gpu(
    result: ParseResult,
    gpu: ET.Element,
    index: int,
    node: str | None,
    ts: datetime | None,
    driver: str | None,
    cuda: str | None,
) -> None:
    uuid = _present(_text(gpu, "uuid"))
    bus = _bus(gpu.get("id")) or _bus(_text(gpu, "pci/pci_bus_id"))
    card = uuid or bus or f"index:{index}"
    labels = make_labels({"index": index})

    def add(metric: str, value: float, extra: tuple[tuple[str, str], ...] = ()) -> None:
        result.samples.append(
            Sample(metric, value, m.unit_of(metric), ts, node, card, make_labels(labels + extra))
        )

    def number(path: str) -> float | None:
        raw = _text(gpu, path)
        if raw is None or is_missing(raw):
            return None
        try:
            return parse_number(raw)
        except ValueError as exc:
            result.problems.append(ParseProblem(None, f"gpu[{index}]/{path}", raw, str(exc)))
            return None

    for path, metric, conv in _XML_SIMPLE:
        v = number(path)
        if v is not None:
            add(metric, conv(v))
    for metric, paths in _XML_FALLBACKS:
        for path in paths:
            if gpu.find(path) is None:
                continue
            v = number(path)
            if v is not None:
                add(metric, v)
                break
    pstate = _text(gpu, "performance_state")
    if pstate and re.fullmatch(r"P[0-9]{1,2}", pstate):
        add("pstate", float(pstate[1:]))
    reset = _text(gpu, "gpu_reset_status/reset_required")
    if reset and not is_missing(reset):
        try:
            add("reset_required", _yes_no(reset))
        except ValueError as exc:
            result.problems.append(
                ParseProblem(None, f"gpu[{index}]/gpu_reset_status/reset_required", reset, str(exc))
            )
    _xml_ecc(gpu, number, add)
    _xml_throttle(result, gpu, index, add)
    result.cards.append(
        CardIdentity(
            card=card,
            vendor="nvidia",
            uuid=uuid,
            bus_id=bus,
            index=index,
            name=_present(_text(gpu, "product_name")),
            serial=_present(_text(gpu, "serial")),
            board_id=_present(_text(gpu, "board_id")),
            driver_version=driver,
            cuda_version=cuda,
            vbios_version=_present(_text(gpu, "vbios_version")),
            node=node,
            firmware=make_labels(
                {
                    "vbios": _present(_text(gpu, "vbios_version")),
                    "inforom_img": _present(_text(gpu, "inforom_version/img_version")),
                    "gsp": _present(_text(gpu, "gsp_firmware_version")),
                }
            ),
        )
    )


def _xml_ecc(
    gpu: ET.Element,
    number: Callable[[str], float | None],
    add: Callable[[str, float, tuple[tuple[str, str], ...]], None],
) -> None:
    for scope in ("volatile", "aggregate"):
        base = f"ecc_errors/{scope}"
        if gpu.find(base) is None:
            continue
        lab = (("scope", scope),)
        if gpu.find(f"{base}/single_bit") is not None:  # <= 525 layout
            sets = {
                "ecc_corrected_total": [f"{base}/single_bit/total"],
                "ecc_uncorrected_total": [f"{base}/double_bit/total"],
            }
        else:  # 535+ layout
            unc_sram = (
                (f"{base}/sram_uncorrectable",)
                if gpu.find(f"{base}/sram_uncorrectable") is not None
                else (f"{base}/sram_uncorrectable_parity", f"{base}/sram_uncorrectable_secded")
            )
            sets = {
                "ecc_corrected_total": [f"{base}/sram_correctable", f"{base}/dram_correctable"],
                "ecc_uncorrected_total": [*unc_sram, f"{base}/dram_uncorrectable"],
            }
        for metric, paths in sets.items():
            vals = [v for v in (number(p) for p in paths) if v is not None]
            if vals:
                add(metric, float(sum(vals)), lab)


def _xml_throttle(
    result: ParseResult,
    gpu: ET.Element,
    index: int,
    add: Callable[[str, float, tuple[tuple[str, str], ...]], None],
) -> None:
    block = gpu.find("clocks_event_reasons")
    if block is None:
        block = gpu.find("clocks_throttle_reasons")
    if block is None:
        return
    mask = 0
    seen = 0
    for child in block:
        name = re.sub(r"^clocks_(event|throttle)_reasons?_", "", child.tag)
        raw = (child.text or "").strip()
        if name not in m.THROTTLE_BITS or is_missing(raw):
            continue
        try:
            active = _active(raw)
        except ValueError as exc:
            result.problems.append(ParseProblem(None, f"gpu[{index}]/{block.tag}/{child.tag}", raw, str(exc)))
            continue
        seen += 1
        add("throttle_" + name, active, ())
        if active:
            mask |= m.THROTTLE_BITS[name]
    if seen:
        add("throttle_reasons", float(mask), ())
