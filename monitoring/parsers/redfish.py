"""Redfish Chassis telemetry: legacy Thermal/Power, ThermalSubsystem/PowerSubsystem, EnvironmentMetrics.

Resources are recognised by ``@odata.type`` (``#Thermal.v1_7_0.Thermal`` -> ``Thermal``) or,
failing that, by their keys.  Collections (``Members``) and expanded sub-resources are walked.
``null``/missing readings are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from . import metrics as m
from .model import Event, ParseError, ParseProblem, ParseResult, Sample, ensure_utc, make_labels

_THRESHOLD_KEYS = {
    "UpperThresholdNonCritical": "unc",
    "UpperThresholdCritical": "ucr",
    "UpperThresholdFatal": "unr",
    "LowerThresholdNonCritical": "lnc",
    "LowerThresholdCritical": "lcr",
    "LowerThresholdFatal": "lnr",
}
_HEALTH = {"Critical": "critical", "Warning": "warning"}


def _type_name(doc: Mapping[str, Any]) -> str | None:
    t = doc.get("@odata.type")
    if isinstance(t, str) and t.startswith("#"):
        return t[1:].split(".")[0]
    return None


def _number(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


class _Ctx:
    def __init__(self, node: str | None, ts: datetime | None) -> None:
        self.node = node
        self.ts = ts
        self.result = ParseResult()

    def add(self, metric: str, value: object, sensor: str | None, where: str, **extra: object) -> None:
        if value is None:
            return
        v = _number(value)
        if v is None:
            self.result.problems.append(ParseProblem(None, where, repr(value), "not a number"))
            return
        labels = make_labels({"sensor": sensor, **{k: x for k, x in extra.items() if x is not None}})
        self.result.samples.append(Sample(metric, v, m.unit_of(metric), self.ts, self.node, None, labels))

    def health(self, item: Mapping[str, Any], name: str, where: str) -> None:
        status = item.get("Status")
        if not isinstance(status, dict):
            return
        sev = _HEALTH.get(str(status.get("Health")))
        if sev is None or status.get("State") in ("Absent", "Disabled"):
            return
        self.result.events.append(
            Event(
                kind="bmc_sensor",
                ts=self.ts,
                node=self.node,
                card=None,
                severity=sev,  # type: ignore[arg-type]
                message=f"{name}: health {status.get('Health')}",
                data={"sensor": name, "path": where},
            )
        )


def _absent(item: Mapping[str, Any]) -> bool:
    status = item.get("Status")
    return isinstance(status, dict) and status.get("State") == "Absent"


def _name(item: Mapping[str, Any], fallback: str) -> str:
    for key in ("Name", "FanName", "DeviceName", "MemberId", "Id"):
        v = item.get(key)
        if isinstance(v, str) and v:
            return v
    return fallback


def _items(v: object) -> list[dict[str, Any]]:
    """A list of objects, or an expanded collection's Members."""
    if isinstance(v, dict):
        v = v.get("Members")
    if not isinstance(v, list):
        return []
    return [x for x in v if isinstance(x, dict)]


def _is_inlet(name: str, context: object) -> bool:
    n = name.lower()
    return context in ("Intake", "Ambient") or "inlet" in n or "intake" in n or "ambient" in n


def _thermal(ctx: _Ctx, doc: Mapping[str, Any]) -> None:
    for i, t in enumerate(_items(doc.get("Temperatures"))):
        if _absent(t):
            continue
        name = _name(t, f"Temperature{i}")
        where = f"Temperatures[{i}].ReadingCelsius"
        metric = "inlet_temperature_c" if _is_inlet(name, t.get("PhysicalContext")) else "temperature_c"
        thresholds = {
            short: t.get(key) for key, short in _THRESHOLD_KEYS.items() if _number(t.get(key)) is not None
        }
        ctx.add(metric, t.get("ReadingCelsius"), name, where, **thresholds)
        ctx.health(t, name, where)
    for i, f in enumerate(_items(doc.get("Fans"))):
        if _absent(f):
            continue
        name = _name(f, f"Fan{i}")
        unit = str(f.get("ReadingUnits") or "RPM")
        ctx.add("fan_pct" if unit == "Percent" else "fan_rpm", f.get("Reading"), name, f"Fans[{i}].Reading")
        ctx.health(f, name, f"Fans[{i}]")


def _power(ctx: _Ctx, doc: Mapping[str, Any]) -> None:
    for i, pc in enumerate(_items(doc.get("PowerControl"))):
        name = _name(pc, f"PowerControl{i}")
        ctx.add("node_power_w", pc.get("PowerConsumedWatts"), name, f"PowerControl[{i}].PowerConsumedWatts")
        ctx.add(
            "node_power_capacity_w",
            pc.get("PowerCapacityWatts"),
            name,
            f"PowerControl[{i}].PowerCapacityWatts",
        )
    for i, ps in enumerate(_items(doc.get("PowerSupplies"))):
        if _absent(ps):
            continue
        _power_supply(ctx, ps, f"PowerSupplies[{i}]", _name(ps, f"PSU{i}"))
    for i, v in enumerate(_items(doc.get("Voltages"))):
        if _absent(v):
            continue
        ctx.add("voltage_v", v.get("ReadingVolts"), _name(v, f"Voltage{i}"), f"Voltages[{i}].ReadingVolts")


def _power_supply(ctx: _Ctx, ps: Mapping[str, Any], where: str, name: str) -> None:
    ctx.add("psu_capacity_w", ps.get("PowerCapacityWatts"), name, f"{where}.PowerCapacityWatts")
    ctx.add("psu_output_power_w", ps.get("LastPowerOutputWatts"), name, f"{where}.LastPowerOutputWatts")
    ctx.add("psu_input_power_w", ps.get("PowerInputWatts"), name, f"{where}.PowerInputWatts")
    ctx.health(ps, name, where)
    metrics = ps.get("Metrics")
    if isinstance(metrics, dict) and len(metrics) > 1:  # expanded, not just an @odata.id link
        _psu_metrics(ctx, metrics, f"{where}.Metrics", name)


def _reading(obj: object) -> object:
    return obj.get("Reading") if isinstance(obj, dict) else None


def _psu_metrics(ctx: _Ctx, doc: Mapping[str, Any], where: str, name: str) -> None:
    ctx.add("psu_input_power_w", _reading(doc.get("InputPowerWatts")), name, f"{where}.InputPowerWatts")
    ctx.add("psu_output_power_w", _reading(doc.get("OutputPowerWatts")), name, f"{where}.OutputPowerWatts")
    ctx.add("voltage_v", _reading(doc.get("InputVoltage")), f"{name} input", f"{where}.InputVoltage")
    ctx.add("energy_j", _kwh_to_j(_reading(doc.get("EnergykWh"))), name, f"{where}.EnergykWh")


def _kwh_to_j(v: object) -> object:
    n = _number(v)
    return None if n is None else n * 3.6e6


def _power_subsystem(ctx: _Ctx, doc: Mapping[str, Any]) -> None:
    ctx.add("node_power_capacity_w", doc.get("CapacityWatts"), _name(doc, "PowerSubsystem"), "CapacityWatts")
    for i, ps in enumerate(_items(doc.get("PowerSupplies"))):
        if not _absent(ps):
            _power_supply(ctx, ps, f"PowerSupplies[{i}]", _name(ps, f"PSU{i}"))


def _thermal_subsystem(ctx: _Ctx, doc: Mapping[str, Any]) -> None:
    for i, fan in enumerate(_items(doc.get("Fans"))):
        if not _absent(fan):
            _fan(ctx, fan, f"Fans[{i}]", _name(fan, f"Fan{i}"))
    tm = doc.get("ThermalMetrics")
    if isinstance(tm, dict) and len(tm) > 1:
        _thermal_metrics(ctx, tm)


def _fan(ctx: _Ctx, fan: Mapping[str, Any], where: str, name: str) -> None:
    sp = fan.get("SpeedPercent")
    if isinstance(sp, dict):
        ctx.add("fan_pct", sp.get("Reading"), name, f"{where}.SpeedPercent.Reading")
        ctx.add("fan_rpm", sp.get("SpeedRPM"), name, f"{where}.SpeedPercent.SpeedRPM")
    ctx.health(fan, name, where)


def _thermal_metrics(ctx: _Ctx, doc: Mapping[str, Any]) -> None:
    summary = doc.get("TemperatureSummaryCelsius")
    if isinstance(summary, dict):
        for key in ("Intake", "Internal", "Exhaust", "Ambient"):
            metric = "inlet_temperature_c" if key in ("Intake", "Ambient") else "temperature_c"
            ctx.add(metric, _reading(summary.get(key)), key, f"TemperatureSummaryCelsius.{key}")
    for i, r in enumerate(_items(doc.get("TemperatureReadingsCelsius"))):
        uri = r.get("DataSourceUri")
        fallback = uri.rstrip("/").rsplit("/", 1)[-1] if isinstance(uri, str) and uri else f"Temperature{i}"
        sensor = _name(r, fallback)
        metric = "inlet_temperature_c" if _is_inlet(sensor, r.get("PhysicalContext")) else "temperature_c"
        ctx.add(metric, r.get("Reading"), sensor, f"TemperatureReadingsCelsius[{i}].Reading")


def _environment(ctx: _Ctx, doc: Mapping[str, Any]) -> None:
    name = _name(doc, "EnvironmentMetrics")
    ctx.add("node_power_w", _reading(doc.get("PowerWatts")), name, "PowerWatts")
    ctx.add("temperature_c", _reading(doc.get("TemperatureCelsius")), name, "TemperatureCelsius")
    ctx.add("energy_j", _kwh_to_j(_reading(doc.get("EnergykWh"))), name, "EnergykWh")
    ctx.add("energy_j", _reading(doc.get("EnergyJoules")), f"{name} joules", "EnergyJoules")
    for i, f in enumerate(_items(doc.get("FanSpeedsPercent"))):
        ctx.add("fan_pct", f.get("Reading"), _name(f, f"Fan{i}"), f"FanSpeedsPercent[{i}].Reading")


def _sensor(ctx: _Ctx, doc: Mapping[str, Any]) -> None:
    name = _name(doc, "Sensor")
    rtype = doc.get("ReadingType")
    metric = {
        "Temperature": "temperature_c",
        "Power": "node_power_w",
        "Voltage": "voltage_v",
        "Current": "current_a",
        "EnergyJoules": "energy_j",
    }.get(str(rtype))
    if rtype == "Rotational":
        metric = "fan_rpm" if doc.get("ReadingUnits") == "RPM" else "fan_pct"
    if metric == "temperature_c" and _is_inlet(name, doc.get("PhysicalContext")):
        metric = "inlet_temperature_c"
    if metric is not None:
        ctx.add(metric, doc.get("Reading"), name, "Reading")
        ctx.health(doc, name, "Status")


_HANDLERS = {
    "Thermal": _thermal,
    "Power": _power,
    "PowerSubsystem": _power_subsystem,
    "ThermalSubsystem": _thermal_subsystem,
    "ThermalMetrics": _thermal_metrics,
    "EnvironmentMetrics": _environment,
    "PowerSupplyMetrics": lambda ctx, d: _psu_metrics(ctx, d, "", _name(d, "PSU")),
    "PowerSupply": lambda ctx, d: _power_supply(ctx, d, "", _name(d, "PSU")),
    "Fan": lambda ctx, d: _fan(ctx, d, "", _name(d, "Fan")),
    "Sensor": _sensor,
}


def _detect(doc: Mapping[str, Any]) -> str | None:
    t = _type_name(doc)
    if t in _HANDLERS:
        return t
    if "Temperatures" in doc or ("Fans" in doc and isinstance(doc["Fans"], list)):
        return "Thermal"
    if "PowerControl" in doc or ("PowerSupplies" in doc and isinstance(doc["PowerSupplies"], list)):
        return "Power"
    if "CapacityWatts" in doc:
        return "PowerSubsystem"
    if "TemperatureSummaryCelsius" in doc or "TemperatureReadingsCelsius" in doc:
        return "ThermalMetrics"
    if "InputPowerWatts" in doc:
        return "PowerSupplyMetrics"
    if "PowerWatts" in doc or "TemperatureCelsius" in doc:
        return "EnvironmentMetrics"
    return None


def _walk(ctx: _Ctx, doc: Mapping[str, Any], depth: int = 0) -> None:
    kind = _detect(doc)
    if kind is not None:
        _HANDLERS[kind](ctx, doc)
        return
    if depth < 4:
        for member in _items(doc.get("Members")):
            _walk(ctx, member, depth + 1)


def parse_redfish(
    doc: Mapping[str, Any] | str, *, node: str | None = None, ts: datetime | None = None
) -> ParseResult:
    """One Redfish resource (dict or JSON text) -> node-level samples and health events."""
    if isinstance(doc, str):
        try:
            loaded = json.loads(doc)
        except json.JSONDecodeError as exc:
            raise ParseError(f"invalid JSON: {exc.msg}", exc.lineno)
        except RecursionError:
            raise ParseError("invalid JSON: nested too deeply", 1) from None
        if not isinstance(loaded, dict):
            raise ParseError("Redfish document is not a JSON object", 1)
        doc = loaded
    ctx = _Ctx(node, ensure_utc(ts))
    try:
        _walk(ctx, doc)
    except RecursionError:
        raise ParseError("Redfish document nested too deeply", 1) from None
    return ctx.result
