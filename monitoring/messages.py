"""Alert and event messages for people: rendered from their structured parts (rule, value, limit,
labels, the event's kind and data, how an alert resolved) in the active language, with units and
labels instead of metric keys. ``Alert.message`` keeps the English rendering for scripts and the
API's stable ``message`` field; pages, live fragments and notifications render again for their reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.utils import translation
from django.utils.functional import Promise
from django.utils.translation import gettext, pgettext
from django.utils.translation import gettext_lazy as _

from monitoring.parsers import metrics as m
from portal.templatetags.portal_format import MISSING, bytesize, energy_kwh, number, percent, watts

if TYPE_CHECKING:
    from monitoring.models import Alert, Event

# Rules are read by their stored values ("event", "stall", "lt"), not AlertRule's choice classes, so
# that the data migration that filled Alert.params (0009) renders with the same code.

METRIC_LABELS: dict[str, Promise] = {
    "temperature_c": _("Temperature"),
    "memory_temperature_c": _("Memory temperature"),
    "power_w": _("Card power"),
    "power_instant_w": _("Instantaneous card power"),
    "asic_power_w": _("ASIC power"),
    "power_limit_w": _("Power limit"),
    "enforced_power_limit_w": _("Enforced power limit"),
    "energy_j": _("Energy"),
    "utilization_pct": _("Utilisation"),
    "memory_utilization_pct": _("Memory utilisation"),
    "memory_used_bytes": _("Memory used"),
    "memory_total_bytes": _("Memory total"),
    "memory_free_bytes": _("Memory free"),
    "sm_clock_mhz": _("SM clock"),
    "mem_clock_mhz": _("Memory clock"),
    "graphics_clock_mhz": _("Graphics clock"),
    "aiclk_mhz": _("AI clock"),
    "aiclk_max_mhz": _("AI clock limit"),
    "fan_rpm": _("Fan speed"),
    "fan_pct": _("Fan duty"),
    "voltage_v": _("Voltage"),
    "current_a": _("Current"),
    "current_limit_a": _("Current limit"),
    "thermal_limit_c": _("Thermal limit"),
    "pcie_link_gen": _("PCIe generation"),
    "pcie_link_gen_max": _("Maximum PCIe generation"),
    "pcie_link_width": _("PCIe link width"),
    "pcie_link_width_max": _("Maximum PCIe link width"),
    "pcie_replay_total": _("PCIe replays"),
    "ecc_corrected_total": _("Corrected ECC errors"),
    "ecc_uncorrected_total": _("Uncorrected ECC errors"),
    "throttle_reasons": _("Clock event reasons"),
    "pstate": _("Performance state"),
    "reset_required": _("Reset required"),
    "heartbeat": _("Firmware heartbeat"),
    "dram_ok": _("DRAM trained"),
    "link_up": _("Link up"),
    "link_retrain_total": _("Link retrains"),
    "xid_last": _("Last Xid"),
    "xid_errors_total": _("Xid errors"),
    "tensor_active_pct": _("Tensor pipes active"),
    "graphics_engine_active_pct": _("Graphics engine active"),
    "sm_active_pct": _("SM active"),
    "dram_active_pct": _("DRAM active"),
    "nvlink_bandwidth_total": _("NVLink bandwidth counter"),
    "nvlink_crc_flit_errors_total": _("NVLink CRC flit errors"),
    "nvlink_crc_data_errors_total": _("NVLink CRC data errors"),
    "nvlink_replay_errors_total": _("NVLink replay errors"),
    "nvlink_recovery_errors_total": _("NVLink recovery errors"),
    "node_power_w": _("Node power"),
    "node_power_capacity_w": _("Node power capacity"),
    "psu_input_power_w": _("PSU input power"),
    "psu_output_power_w": _("PSU output power"),
    "psu_capacity_w": _("PSU capacity"),
    "inlet_temperature_c": _("Inlet temperature"),
    "net_rx_bytes_total": _("Bytes received"),
    "net_tx_bytes_total": _("Bytes sent"),
    "net_speed_bytes_per_s": _("Link speed"),
    "net_util_pct": _("Network utilisation"),
    "disk_reads_total": _("Disk reads"),
    "disk_writes_total": _("Disk writes"),
    "disk_iops": _("Disk IOPS"),
    "throttle_gpu_idle": _("Clocks lowered: GPU idle"),
    "throttle_applications_clocks_setting": _("Clocks lowered: application clocks setting"),
    "throttle_sw_power_cap": _("Clocks lowered: software power cap"),
    "throttle_hw_slowdown": _("Clocks lowered: hardware slowdown"),
    "throttle_sync_boost": _("Clocks lowered: sync boost"),
    "throttle_sw_thermal_slowdown": _("Clocks lowered: software thermal slowdown"),
    "throttle_hw_thermal_slowdown": _("Clocks lowered: hardware thermal slowdown"),
    "throttle_hw_power_brake_slowdown": _("Clocks lowered: hardware power brake"),
    "throttle_display_clock_setting": _("Clocks lowered: display clock setting"),
}

EVENT_KINDS: dict[str, Promise] = {
    "link_down": _("Link down"),
    "link_up": _("Link up"),
    "link_retrain": _("Link retrained"),
    "heartbeat_stall": _("Firmware heartbeat stalled"),
    "xid": _("Xid error"),
    "gpu_fell_off_bus": _("GPU fell off the bus"),
    "pcie_aer": _("PCIe error (AER)"),
    "pcie_downgrade": _("PCIe link downgraded"),
    "nccl_timeout": _("NCCL watchdog timeout"),
    "nccl_net_error": _("NCCL network error"),
    "bmc_sensor": _("BMC sensor"),
}

#: label keys of series and events, as a person reads them ("port 2", "sensor CPU1 Temp")
LABEL_NAMES: dict[str, Promise] = {
    "port": _("port"),
    "channel": _("channel"),
    "chip": _("chip"),
    "peer_chip": _("peer chip"),
    "sensor": _("sensor"),
    "device": _("device"),
    "interface": _("interface"),
    "module": _("module"),
    "scope": _("scope"),
    "xid": _("Xid"),
}


def metric_label(metric: str) -> str:
    label = METRIC_LABELS.get(metric)
    return str(label) if label is not None else metric


def metric_value(metric: str, value: float | None) -> str:
    """A value in its metric's unit, for people: "91 °C", "1.2 kW", "45 %", "3.5 GiB"."""
    if value is None:
        return MISSING
    unit = m.METRICS[metric][0] if metric in m.METRICS else m.COUNT
    places = 0 if float(value).is_integer() or abs(value) >= 100 else 1
    if unit == m.W:
        return watts(value)
    if unit == m.PCT:
        return percent(value, places)
    if unit == m.BYTES:
        return bytesize(value)
    if unit == m.BYTES_PER_S:
        return f"{bytesize(value)}/s"
    if unit == m.J:
        return energy_kwh(value / 3.6e6)
    if unit == m.BOOL:
        return gettext("yes") if value >= 1 else gettext("no")
    suffix = {m.C: " °C", m.MHZ: " MHz", m.RPM: " rpm", m.V: " V", m.A: " A", m.IOPS: " IOPS"}.get(unit, "")
    return f"{number(value, 2 if unit == m.V else places)}{suffix}"


def seconds_text(seconds: int | float) -> str:
    """A rule's duration: "45 s", "10 min", "1 h"."""
    s = int(seconds)
    if s and s % 3600 == 0:
        return gettext("%(n)s h") % {"n": number(s // 3600)}
    if s and s % 60 == 0:
        return gettext("%(n)s min") % {"n": number(s // 60)}
    return gettext("%(n)s s") % {"n": number(s)}


def parse_labels(labels: str) -> dict[str, str]:
    """``"chip=1,port=8"`` -> {"chip": "1", "port": "8"}."""
    return dict(kv.partition("=")[::2] for kv in labels.split(",") if kv)


def labels_text(labels: Mapping[str, Any]) -> str:
    """{"port": "QSFP2", "chip": "0"} -> "port QSFP2, chip 0" (known label names translated)."""
    sep = pgettext("list separator", ", ")
    return sep.join(f"{LABEL_NAMES.get(k, k)} {v}" for k, v in labels.items() if v not in (None, ""))


def aside(text: str, note: str) -> str:
    """ "text (note)", with the language's parentheses."""
    return pgettext("text (note)", "%(text)s (%(note)s)") % {"text": text, "note": note}


def target_labels(target: str) -> dict[str, str]:
    """The labels of an alert target (``n<node>/<card ref>/<labels>``)."""
    parts = target.split("/", 2)
    return parse_labels(parts[2]) if len(parts) == 3 else {}


def rule_subject(rule: Any) -> str:
    """What a rule watches: its metric's label, or its event kind's."""
    if rule.kind == "event":
        name = EVENT_KINDS.get(rule.event_kind)
        return str(name) if name is not None else rule.event_kind
    return metric_label(rule.metric)


def rule_condition(rule: Any) -> str:
    """A threshold rule's condition with its unit ("> 85 °C", "> 90 % of the PSU capacity"); "" else."""
    if rule.kind != "threshold":
        return ""
    op = "<" if rule.op == "lt" else ">"
    if rule.relative_to:
        return f"{op} " + gettext("%(pct)s of the PSU capacity") % {"pct": percent(rule.threshold)}
    return f"{op} {metric_value(rule.metric, rule.threshold)}"


# -- events -------------------------------------------------------------------------------------
def event_parts(kind: str, data: Mapping[str, Any], text: str) -> dict[str, Any]:
    """What an alert keeps of the event it reports (the structured parts and the tool's own text)."""
    return {"kind": kind, "data": dict(data), "text": text}


def _event_labels(data: Mapping[str, Any]) -> dict[str, Any]:
    found = parse_labels(str(data.get("labels", ""))) if data.get("labels") else {}
    for key in ("port", "chip", "interface", "module", "device", "sensor"):
        if key in data and key not in found:
            found[key] = data[key]
    found.pop("peer_chip", None)  # the peer is the other end's business
    if data.get("port_name") and "port" in found:  # a card's channel, on the port it is wired to
        found = {"port": data["port_name"], "channel": found.pop("port"), **found}
    return found


def event_text(kind: str, data: Mapping[str, Any], text: str) -> str:
    """One event for people: its kind, where (port, interface...), what it says.

    Events read from a tool's output (a kernel log line, a tt-smi line: their data holds the
    ``line``) keep the tool's own words after the summary: they are evidence, not prose."""
    name = EVENT_KINDS.get(kind)
    summary = str(name) if name is not None else kind.replace("_", " ")
    where = labels_text(_event_labels(data))
    if kind == "link_retrain" and data.get("count") is not None and data.get("previous") is not None:
        count = float(data["count"]) - float(data["previous"])
        summary += " " + gettext("%(n)s times") % {"n": number(count)}
    elif kind == "heartbeat_stall" and data.get("heartbeat") is not None:
        summary += ": " + gettext("stuck at %(v)s") % {"v": number(data["heartbeat"])}
    elif kind == "xid" and data.get("xid") is not None:
        summary = gettext("Xid %(xid)s") % {"xid": data["xid"]}
        text = text.removeprefix(f"Xid {data['xid']}").lstrip(": ")  # dcgm's "Xid 79: <description>"
    out = aside(summary, where) if where else summary
    derived = kind in {"link_up", "link_down", "link_retrain", "heartbeat_stall"} and "line" not in data
    if text and not derived:
        out += f": {text}"
    return out


def event_message(event: Event) -> str:
    return event_text(event.kind, event.data if isinstance(event.data, dict) else {}, event.message)


# -- alerts -------------------------------------------------------------------------------------
def alert_value(alert: Alert) -> str:
    """The alert's value with its unit ("91 °C"); "—" for event alerts (they have no value)."""
    rule = alert.rule
    if rule.kind == "event" or alert.value is None:
        return MISSING
    return metric_value(rule.metric, alert.value)


def _condition(alert: Alert) -> str:
    rule = alert.rule
    params = alert.params or {}
    labels = labels_text(target_labels(alert.target))
    metric = metric_label(rule.metric)
    if labels:
        metric = aside(metric, labels)
    held = seconds_text(rule.duration_s)
    value = metric_value(rule.metric, alert.value)
    if rule.kind == "stall":
        return gettext("%(metric)s stuck at %(value)s for %(held)s") % {
            "metric": metric,
            "value": number(alert.value),
            "held": held,
        }
    limit = params.get("limit", rule.threshold)
    values = {"metric": metric, "value": value, "limit": metric_value(rule.metric, limit), "held": held}
    if rule.relative_to:
        values["limit"] = aside(
            values["limit"], gettext("%(pct)s of the PSU capacity") % {"pct": percent(rule.threshold)}
        )
    if rule.op == "lt":
        text = gettext("%(metric)s %(value)s below %(limit)s") % values
    else:
        text = gettext("%(metric)s %(value)s above %(limit)s") % values
    if rule.duration_s:
        text += " " + gettext("for %(held)s") % values
    return text


def _resolution(alert: Alert) -> str:
    how = (alert.params or {}).get("resolution")
    if not how:
        return ""
    key = how.get("key")
    if key == "cleared":
        return gettext("condition cleared at %(value)s") % {
            "value": metric_value(alert.rule.metric, how.get("value"))
        }
    if key == "idle":
        return gettext("the node no longer runs a job")
    if key == "quiet":
        return gettext("no new event for %(held)s") % {"held": seconds_text(how.get("duration_s", 0))}
    if key == "by_hand":
        return gettext("resolved by %(user)s") % {"user": how.get("user", "")}
    if key == "event":
        event = how.get("event") or {}
        return gettext("cleared: %(event)s") % {
            "event": event_text(event.get("kind", ""), event.get("data") or {}, event.get("text", ""))
        }
    return ""


def alert_text(alert: Alert) -> str:
    """The alert's message in the active language: the condition (or the event) and how it ended."""
    rule = alert.rule
    params = alert.params or {}
    if not params and alert.message:  # a row written without its parts (by hand, in the admin)
        return alert.message
    if rule.kind == "event":
        event = params.get("event")
        text = (
            event_text(event.get("kind", ""), event.get("data") or {}, event.get("text", ""))
            if event
            else alert.message
        )
    else:
        text = _condition(alert)
    note = _resolution(alert)
    return f"{text} — {note}" if note else text


def alert_message_en(alert: Alert) -> str:
    """The English message stored on the alert (scripts, the API's ``message``)."""
    with translation.override("en"):
        return alert_text(alert)[:2000]
