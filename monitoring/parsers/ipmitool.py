"""ipmitool: ``sdr``, ``-c sdr`` (CSV), ``sensor`` and ``chassis power status``."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import replace
from datetime import datetime

from . import metrics as m
from .model import Event, Labels, ParseError, ParseProblem, ParseResult, Sample, ensure_utc, make_labels

_NO_READING = {"no reading", "disabled", "na", "n/a", "not readable", "", "unknown"}
_STATUS_SEVERITY = {"cr": "critical", "nr": "critical", "nc": "warning"}
_THRESHOLDS = ("lnr", "lcr", "lnc", "unc", "ucr", "unr")


def classify_sensor(name: str, unit: str) -> tuple[str, float] | None:
    """(canonical metric, scale) for a sensor name + ipmitool unit, or None to skip it."""
    n = name.lower()
    u = unit.strip().lower()
    if u in ("degrees c", "degrees f"):
        metric = (
            "inlet_temperature_c" if re.search(r"inlet|intake|ambient|front panel", n) else "temperature_c"
        )
        return metric, 1.0
    if u == "rpm":
        return "fan_rpm", 1.0
    if u == "percent":
        return ("fan_pct", 1.0) if "fan" in n else None
    if u == "volts":
        return "voltage_v", 1.0
    if u == "amps":
        return "current_a", 1.0
    if u == "watts":
        if re.search(r"\bps\s*\d|psu|power supply", n):
            if re.search(r"out", n):
                return "psu_output_power_w", 1.0
            return "psu_input_power_w", 1.0
        return "node_power_w", 1.0
    return None


def _reading(raw: str) -> tuple[float, str] | None | str:
    """'45 degrees C' -> (45.0, 'degrees C'); missing -> None; unparseable -> reason string."""
    t = raw.strip()
    if t.lower() in _NO_READING:
        return None
    if t.lower().startswith("0x"):
        return None  # discrete sensor state, not a measurement
    mt = re.fullmatch(r"([-+]?[0-9]+(?:\.[0-9]+)?)\s*(?:\(\+/-\s*[0-9.]+\)\s*)?(.*)", t)
    if not mt:
        return f"unreadable value {t!r}"
    return float(mt.group(1)), mt.group(2).strip()


def _emit(
    result: ParseResult,
    lineno: int,
    raw_line: str,
    name: str,
    value: float,
    unit: str,
    status: str,
    node: str | None,
    ts: datetime | None,
    extra: Labels = (),
) -> None:
    kind = classify_sensor(name, unit)
    if kind is not None:
        metric, scale = kind
        v = value * scale
        if unit.strip().lower() == "degrees f":
            v = m.fahrenheit_to_c(v)
        labels = make_labels((("sensor", name), *extra))
        result.samples.append(Sample(metric, v, m.unit_of(metric), ts, node, None, labels))


def _status_event(
    result: ParseResult,
    name: str,
    reading: str,
    status: str,
    node: str | None,
    ts: datetime | None,
    lineno: int,
) -> None:
    sev = _STATUS_SEVERITY.get(status.strip().lower())
    if sev is None:
        return
    result.events.append(
        Event(
            kind="bmc_sensor",
            ts=ts,
            node=node,
            card=None,
            severity=sev,  # type: ignore[arg-type]
            message=f"{name}: {reading} ({status})",
            data={"sensor": name, "reading": reading, "status": status.strip().lower(), "line": lineno},
        )
    )


def parse_ipmitool_sdr(text: str, *, node: str | None = None, ts: datetime | None = None) -> ParseResult:
    """``ipmitool sdr`` (``name | reading | status``) or ``ipmitool -c sdr`` (CSV)."""
    ts = ensure_utc(ts)
    lines = [(i, ln) for i, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    result = ParseResult()
    if not lines:
        return result
    piped = sum(1 for _, ln in lines if "|" in ln)
    if piped:
        good = 0
        for lineno, line in lines:
            cols = [c.strip() for c in line.split("|")]
            if len(cols) < 3:
                result.problems.append(ParseProblem(lineno, None, line, "expected 'name | reading | status'"))
                continue
            name, raw, status = cols[0], cols[1], cols[2]
            good += 1
            r = _reading(raw)
            if isinstance(r, str):
                result.problems.append(ParseProblem(lineno, name, raw, r))
            elif r is not None:
                _emit(result, lineno, line, name, r[0], r[1], status, node, ts)
            _status_event(result, name, raw, status, node, ts, lineno)
        if good == 0:
            raise ParseError("not ipmitool sdr output", lines[0][0])
        return _number_duplicates(result)
    return _number_duplicates(_parse_sdr_csv(text, lines, node, ts))


def _parse_sdr_csv(
    text: str, lines: list[tuple[int, str]], node: str | None, ts: datetime | None
) -> ParseResult:
    result = ParseResult()
    good = 0
    for lineno, line in lines:
        try:
            cols = next(csv.reader(io.StringIO(line)))
        except (csv.Error, StopIteration):
            cols = []
        if len(cols) < 4:
            result.problems.append(ParseProblem(lineno, None, line, "expected 'name,value,units,status'"))
            continue
        name, raw, unit, status = (c.strip() for c in cols[:4])
        good += 1
        if unit.lower() == "discrete" or raw.lower().startswith("0x") or raw.lower() in _NO_READING:
            _status_event(result, name, raw, status, node, ts, lineno)
            continue
        try:
            value = float(raw)
        except ValueError:
            result.problems.append(ParseProblem(lineno, name, raw, f"unreadable value {raw!r}"))
        else:
            _emit(result, lineno, line, name, value, unit, status, node, ts)
        _status_event(result, name, f"{raw} {unit}".strip(), status, node, ts, lineno)
    if good == 0:
        raise ParseError("not ipmitool sdr output", lines[0][0])
    return result


def parse_ipmitool_sensor(text: str, *, node: str | None = None, ts: datetime | None = None) -> ParseResult:
    """``ipmitool sensor``: ``name | value | unit | status | lnr | lcr | lnc | unc | ucr | unr``.

    ``na`` = missing; present thresholds are kept as labels (``lcr``, ``ucr``...).
    """
    ts = ensure_utc(ts)
    result = ParseResult()
    good = 0
    first: int | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        first = first or lineno
        cols = [c.strip() for c in line.split("|")]
        if len(cols) < 4:
            result.problems.append(
                ParseProblem(lineno, None, line, "expected at least 4 '|' separated columns")
            )
            continue
        good += 1
        name, raw, unit, status = cols[:4]
        thresholds = tuple((k, v) for k, v in zip(_THRESHOLDS, cols[4:10], strict=False) if v.lower() != "na")
        if unit.lower() != "discrete" and raw.lower() not in _NO_READING and not raw.lower().startswith("0x"):
            try:
                value = float(raw)
            except ValueError:
                result.problems.append(ParseProblem(lineno, name, raw, f"unreadable value {raw!r}"))
            else:
                _emit(result, lineno, line, name, value, unit, status, node, ts, thresholds)
        _status_event(result, name, f"{raw} {unit}".strip(), status, node, ts, lineno)
    if good == 0 and first is not None:
        raise ParseError("not ipmitool sensor output", first)
    return _number_duplicates(result)


def _number_duplicates(result: ParseResult) -> ParseResult:
    """Sensors sharing a name (two ``Temp`` on a Dell = CPU1/CPU2) get ``instance`` 1..n, in order."""
    counts: dict[tuple[str, str | None], int] = {}
    for smp in result.samples:
        key = (smp.metric, smp.label("sensor"))
        counts[key] = counts.get(key, 0) + 1
    seen: dict[tuple[str, str | None], int] = {}
    for i, smp in enumerate(result.samples):
        key = (smp.metric, smp.label("sensor"))
        if counts[key] > 1:
            seen[key] = seen.get(key, 0) + 1
            labels = make_labels((*smp.labels, ("instance", str(seen[key]))))
            result.samples[i] = replace(smp, labels=labels)
    return result


def parse_chassis_power_status(text: str) -> bool | None:
    """``Chassis Power is on`` -> True, ``... off`` -> False, anything else -> None."""
    mt = re.search(r"Chassis Power is (on|off)\b", text, re.IGNORECASE)
    if not mt:
        return None
    return mt.group(1).lower() == "on"
