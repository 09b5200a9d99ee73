"""Pure parsers for the tools Rackpilot reads (no Django here).

Every ``parse_*`` returns a :class:`ParseResult` of vendor-neutral :class:`Sample` /
:class:`Event` / :class:`CardIdentity` objects using the canonical metric names of
:data:`METRICS`.  Use :func:`parse` to dispatch on a format name.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from .ipmitool import parse_chassis_power_status, parse_ipmitool_sdr, parse_ipmitool_sensor
from .kernel_logs import parse_log_events
from .metrics import METRICS, THROTTLE_BITS
from .model import (
    CardIdentity,
    Event,
    Labels,
    ParseError,
    ParseProblem,
    ParseResult,
    ParseWarning,
    Sample,
    make_labels,
    normalize_bus_id,
)
from .nvidia_smi import DEFAULT_QUERY_FIELDS, nvidia_smi_argv, parse_nvidia_smi_csv, parse_nvidia_smi_xml
from .prometheus import (
    DCGM_METRICS,
    NODE_EXPORTER_METRICS,
    PromSample,
    last_xids,
    parse_dcgm_exporter,
    parse_node_exporter,
    parse_prometheus_text,
    xid_events,
)
from .redfish import parse_redfish
from .tt_smi import heartbeat_events, parse_tt_link_status, parse_tt_smi_snapshot

Parser = Callable[..., ParseResult]


def _nvidia_csv(text: str, *, node: str | None = None, ts: datetime | None = None) -> ParseResult:
    """The CSV produced by :func:`nvidia_smi_argv` with the default fields."""
    return parse_nvidia_smi_csv(text, DEFAULT_QUERY_FIELDS, node=node, ts=ts)


def _kernel_log(text: str, *, node: str | None = None, ts: datetime | None = None) -> ParseResult:
    return ParseResult(events=parse_log_events(text, node=node, ts=ts))


FORMATS: dict[str, Parser] = {
    "nvidia-smi-csv": _nvidia_csv,
    "nvidia-smi-xml": parse_nvidia_smi_xml,
    "prometheus": parse_dcgm_exporter,
    "dcgm-exporter": parse_dcgm_exporter,
    "node-exporter": parse_node_exporter,
    "tt-smi": parse_tt_smi_snapshot,
    "tt-link-status": parse_tt_link_status,
    "ipmitool-sdr": parse_ipmitool_sdr,
    "ipmitool-sensor": parse_ipmitool_sensor,
    "redfish": parse_redfish,
    "kernel-log": _kernel_log,
}


def parse(format_name: str, text: str, *, node: str | None = None, ts: datetime | None = None) -> ParseResult:
    """Parse ``text`` in ``format_name`` (a key of :data:`FORMATS`)."""
    parser = FORMATS.get(format_name)
    if parser is None:
        raise ParseError(f"unknown format {format_name!r}; known formats: {', '.join(sorted(FORMATS))}")
    return parser(text, node=node, ts=ts)


__all__ = [
    "DCGM_METRICS",
    "DEFAULT_QUERY_FIELDS",
    "FORMATS",
    "METRICS",
    "NODE_EXPORTER_METRICS",
    "THROTTLE_BITS",
    "CardIdentity",
    "Event",
    "Labels",
    "ParseError",
    "ParseProblem",
    "ParseResult",
    "ParseWarning",
    "PromSample",
    "Sample",
    "heartbeat_events",
    "last_xids",
    "make_labels",
    "normalize_bus_id",
    "nvidia_smi_argv",
    "parse",
    "parse_chassis_power_status",
    "parse_dcgm_exporter",
    "parse_ipmitool_sdr",
    "parse_ipmitool_sensor",
    "parse_node_exporter",
    "parse_log_events",
    "parse_nvidia_smi_csv",
    "parse_nvidia_smi_xml",
    "parse_prometheus_text",
    "parse_redfish",
    "parse_tt_link_status",
    "parse_tt_smi_snapshot",
    "xid_events",
]
