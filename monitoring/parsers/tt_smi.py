"""Tenstorrent tt-smi snapshot JSON and tt-umd Ethernet link status lines."""

from __future__ import annotations

import json
import re
from datetime import datetime, tzinfo
from typing import Any

from . import metrics as m
from .model import (
    CardIdentity,
    Event,
    ParseError,
    ParseProblem,
    ParseResult,
    Sample,
    ensure_utc,
    line_of,
    make_labels,
    normalize_bus_id,
)

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")

# telemetry key -> metric (fan_speed, power and board_power are handled apart)
_TELEMETRY: dict[str, str] = {
    "voltage": "voltage_v",
    "current": "current_a",
    "aiclk": "aiclk_mhz",
    "asic_temperature": "temperature_c",
    "heartbeat": "heartbeat",
}
# limits key -> metric; board_power_limit is preferred over tdp_limit for power_limit_w
_LIMITS: dict[str, str] = {
    "tdc_limit": "current_limit_a",
    "thm_limit": "thermal_limit_c",
    "asic_fmax": "aiclk_max_mhz",
}
# Ethernet cores per chip, for decoding ETH_LIVE_STATUS (see _eth_ports)
_ETH_CORES_WORMHOLE = 16
_ETH_CORES_BLACKHOLE = 14


def _missing(v: object) -> bool:
    return v is None or (isinstance(v, str) and v.strip().upper() in ("", "N/A", "NA", "NONE"))


def _num(v: object) -> float:
    if isinstance(v, bool):
        raise ValueError("boolean where a number was expected")
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str):
        t = v.strip()
        if t.lower().startswith("0x"):
            return float(int(t, 16))
        return float(t)
    raise ValueError(f"unexpected {type(v).__name__}")


def extract_json_object(text: str, want: tuple[str, ...] = ()) -> dict[str, Any]:
    """The first ``{`` that starts a JSON object (having one of the ``want`` keys, if given),
    ignoring ANSI colour and progress lines before it."""
    clean = _ANSI_RE.sub("", text)
    decoder = json.JSONDecoder()
    first_error: ParseError | None = None
    pos = clean.find("{")
    while pos != -1:
        try:
            obj, _end = decoder.raw_decode(clean, pos)
        except json.JSONDecodeError as exc:
            if first_error is None:
                first_error = ParseError(f"invalid JSON: {exc.msg}", line_of(clean, exc.pos))
        else:
            # a nested object of a truncated document parses too: only take a snapshot-shaped one
            if isinstance(obj, dict) and (not want or any(k in obj for k in want)):
                return obj
        pos = clean.find("{", pos + 1)
    if first_error is not None:
        raise first_error
    raise ParseError("no JSON object found", 1)


def _parse_time(raw: object, tz: tzinfo | None) -> datetime | None:
    if not isinstance(raw, str):
        return None
    try:
        t = datetime.fromisoformat(raw.strip())
    except ValueError:
        return None
    if t.tzinfo is None and tz is not None:
        return t.replace(tzinfo=tz)
    return ensure_utc(t)


def _version(raw: object) -> tuple[int, ...] | None:
    if not isinstance(raw, str):
        return None
    mt = re.match(r"\s*v?(\d+)\.(\d+)", raw)
    return (int(mt.group(1)), int(mt.group(2))) if mt else None


def parse_tt_smi_snapshot(
    text: str,
    *,
    node: str | None = None,
    ts: datetime | None = None,
    tz: tzinfo | None = None,
    fan_units: str | None = None,
    version: str | None = None,
) -> ParseResult:
    """Parse ``tt-smi -s`` JSON.

    Timestamp: ``ts`` if given (the collector's clock), else the snapshot ``time`` (local
    time without zone: taken in ``tz``, UTC when not given).  Card key: the normalised PCI
    ``bus_id``; remote chips (no bus id, e.g. ``n300 R``) get ``tt:<board_id>:R`` (or
    ``tt:chip<N>``).  ``fan_speed`` is RPM from v5.3 and percent before: ``fan_units``
    ('rpm'/'pct') forces the unit, else a ``version`` hint (the producing tool's version
    as the collector knows it) decides, else a value > 100 is RPM (ASSUMPTION: RPM readings
    of 100 or less, i.e. a stopped fan, read as percent - harmless for 0).
    """
    doc = extract_json_object(text, ("device_info", "host_info", "time"))
    devices = doc.get("device_info")
    if not isinstance(devices, list):
        raise ParseError("tt-smi snapshot without a device_info list", 1)
    host = doc.get("host_info") if isinstance(doc.get("host_info"), dict) else {}
    assert isinstance(host, dict)
    node = node or (host.get("Hostname") if isinstance(host.get("Hostname"), str) else None)
    when = ensure_utc(ts) or _parse_time(doc.get("time"), tz)
    driver = host.get("Driver") if isinstance(host.get("Driver"), str) else None
    if fan_units is None:
        ver = _version(version)
        if ver is not None:
            fan_units = "rpm" if ver >= (5, 3) else "pct"
    result = ParseResult()
    for index, dev in enumerate(devices):
        if not isinstance(dev, dict):
            result.problems.append(
                ParseProblem(None, f"device_info[{index}]", repr(dev)[:200], "not an object")
            )
            continue
        _parse_device(result, dev, index, node, when, driver, fan_units)
    return result


def _parse_device(
    result: ParseResult,
    dev: dict[str, Any],
    index: int,
    node: str | None,
    when: datetime | None,
    driver: str | None,
    fan_units: str | None,
) -> None:
    board = dev.get("board_info") if isinstance(dev.get("board_info"), dict) else {}
    tele = dev.get("telemetry") if isinstance(dev.get("telemetry"), dict) else {}
    limits = dev.get("limits") if isinstance(dev.get("limits"), dict) else {}
    fws = dev.get("firmwares") if isinstance(dev.get("firmwares"), dict) else {}
    smbus = dev.get("smbus_telem") if isinstance(dev.get("smbus_telem"), dict) else {}
    assert isinstance(board, dict) and isinstance(tele, dict) and isinstance(limits, dict)
    assert isinstance(fws, dict) and isinstance(smbus, dict)
    raw_type, raw_id = board.get("board_type"), board.get("board_id")
    board_type = raw_type.strip() if isinstance(raw_type, str) and not _missing(raw_type) else None
    board_id = raw_id.strip() if isinstance(raw_id, str) and not _missing(raw_id) else None
    bus = normalize_bus_id(board.get("bus_id")) if isinstance(board.get("bus_id"), str) else None
    side = board_type.split()[-1] if board_type and board_type.split()[-1] in ("L", "R") else None
    if bus:
        card = bus
    elif board_id:
        card = f"tt:{board_id}:{side or index}"
    else:
        card = f"tt:chip{index}"
    where = f"device_info[{index}]"
    labels = make_labels({"board_type": board_type})

    def add(metric: str, value: float, extra: dict[str, str] | None = None) -> None:
        lab = make_labels(dict(labels) | (extra or {}))
        result.samples.append(Sample(metric, value, m.unit_of(metric), when, node, card, lab))

    def val(section: str, d: dict[str, Any], key: str) -> float | None:
        raw = d.get(key)
        if _missing(raw):
            return None
        try:
            return _num(raw)
        except ValueError as exc:
            result.problems.append(ParseProblem(None, f"{where}.{section}.{key}", str(raw), str(exc)))
            return None

    for key, metric in _TELEMETRY.items():
        v = val("telemetry", tele, key)
        if v is not None:
            add(metric, v)
    asic_power = val("telemetry", tele, "power")
    board_power = val("telemetry", tele, "board_power")
    if asic_power is not None:
        add("asic_power_w", asic_power)
    if board_power is not None or asic_power is not None:
        add("power_w", board_power if board_power is not None else asic_power or 0.0)
    fan = val("telemetry", tele, "fan_speed")
    if fan is not None:
        units = fan_units or ("rpm" if fan > 100 else "pct")
        add("fan_rpm" if units == "rpm" else "fan_pct", fan)
    # limits: strings, or integer 0 = unknown
    for key, metric in _LIMITS.items():
        v = val("limits", limits, key)
        if v:
            add(metric, v)
    plimit = val("limits", limits, "board_power_limit") or val("limits", limits, "tdp_limit")
    if plimit:
        add("power_limit_w", plimit)
    dram = board.get("dram_status")
    if isinstance(dram, bool):
        add("dram_ok", 1.0 if dram else 0.0)
    gen = val("board_info", board, "pcie_speed")
    if gen:
        add("pcie_link_gen", gen)
    width = val("board_info", board, "pcie_width")
    if width:
        add("pcie_link_width", width)
    live = smbus.get("ETH_LIVE_STATUS")
    if not _missing(live):
        try:
            status = int(_num(live))
        except ValueError:
            result.problems.append(
                ParseProblem(None, f"{where}.smbus_telem.ETH_LIVE_STATUS", str(live), "not hex")
            )
        else:
            for port, up in _eth_ports(status, board_type).items():
                add("link_up", up, {"port": str(port)})
    firmware = {k: str(v).strip() for k, v in fws.items() if not _missing(v) and isinstance(v, str | int)}
    result.cards.append(
        CardIdentity(
            card=card,
            vendor="tenstorrent",
            bus_id=bus,
            index=index,
            name=board_type,
            serial=board_id,
            board_type=board_type,
            board_id=board_id,
            firmware=make_labels(firmware),
            driver_version=driver,
            node=node,
        )
    )


def _eth_ports(status: int, board_type: str | None) -> dict[int, float]:
    """Decode ETH_LIVE_STATUS.

    ASSUMPTION (layout is firmware dependent and undocumented): the low 16 bits carry one
    bit per Ethernet core, bit N = core N, 1 = link up.  Wormhole has 16 cores, Blackhole
    (board types ``p*``) 14; higher bits are ignored.
    """
    n = _ETH_CORES_BLACKHOLE if board_type and board_type.lower().startswith("p") else _ETH_CORES_WORMHOLE
    low = status & 0xFFFF
    return {port: 1.0 if low >> port & 1 else 0.0 for port in range(n)}


_LINK_RE = re.compile(
    r"(?:chip\s*(?P<chip>\d+)\D{0,20}?)?eth(?:ernet)?\s+channel\s+(?P<chan>\d+)"
    r".*?\blink\s+(?P<state>UP|DOWN)\b"
    r"(?:.*?\bretrain(?:s|_count)?\s*[:=]\s*(?P<retrain>\d+))?"
    r"(?:.*?connected to chip\s+(?P<peer>\d+))?",
    re.IGNORECASE,
)


def parse_tt_link_status(
    text: str,
    *,
    node: str | None = None,
    ts: datetime | None = None,
    card: str | None = None,
) -> ParseResult:
    """``eth channel 8 ... link UP ..., retrain: 0, connected to chip 6`` / ``link DOWN``.

    One ``link_up`` (and ``link_retrain_total`` when printed) per channel, label ``port``
    (plus ``chip`` when the line names it, ``peer_chip`` when connected); a DOWN link also
    yields a ``link_down`` warning event.
    """
    ts = ensure_utc(ts)
    result = ParseResult()
    for lineno, line in enumerate(_ANSI_RE.sub("", text).splitlines(), 1):
        mt = _LINK_RE.search(line)
        if not mt:
            continue
        lab = make_labels({"port": mt.group("chan"), "chip": mt.group("chip"), "peer_chip": mt.group("peer")})
        up = mt.group("state").upper() == "UP"
        result.samples.append(Sample("link_up", 1.0 if up else 0.0, m.BOOL, ts, node, card, lab))
        if mt.group("retrain") is not None:
            result.samples.append(
                Sample("link_retrain_total", float(mt.group("retrain")), m.COUNT, ts, node, card, lab)
            )
        if not up:
            result.events.append(
                Event(
                    "link_down",
                    ts,
                    node,
                    card,
                    "warning",
                    line.strip(),
                    {"port": int(mt.group("chan")), "chip": mt.group("chip"), "line": lineno},
                )
            )
    return result


def heartbeat_events(previous: dict[str, float], result: ParseResult) -> list[Event]:
    """``heartbeat_stall`` (critical) for cards whose heartbeat stands where it was in ``previous``
    (a counter that went back to a lower value was restarted with the card's firmware: no stall)."""
    events: list[Event] = []
    for s in result.samples:
        if s.metric != "heartbeat" or s.card is None or s.card not in previous:
            continue
        if s.value == previous[s.card]:  # lower: the firmware restarted (a card reset), not a stall
            events.append(
                Event(
                    "heartbeat_stall",
                    s.ts,
                    s.node,
                    s.card,
                    "critical",
                    f"firmware heartbeat stuck at {s.value:g} (was {previous[s.card]:g})",
                    {"heartbeat": s.value, "previous": previous[s.card]},
                )
            )
    return events
