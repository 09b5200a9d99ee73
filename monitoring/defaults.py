"""Default alert rules from the field guides (seeds): temperature, sustained utilisation, PSU
budget, firmware heartbeat, link retrains / downs (behind NCCL timeouts), Xids. Admins edit them."""

from __future__ import annotations

from typing import Any

DEFAULT_RULES: list[dict[str, Any]] = [
    {
        "name": "GPU temperature above 85 °C",
        "kind": "threshold",
        "metric": "temperature_c",
        "scope": "card",
        "op": "gt",
        "threshold": 85,
        "duration_s": 60,
        "severity": "critical",
        "description": "Card core temperature above 85 °C for a minute: check airflow and fans.",
    },
    {
        "name": "Utilisation above 95% sustained",
        "kind": "threshold",
        "metric": "utilization_pct",
        "scope": "card",
        "op": "gt",
        "threshold": 95,
        "duration_s": 1800,
        "severity": "info",
        "description": "A card saturated for 30 minutes: information for capacity planning.",
    },
    {
        "name": "Node power near PSU limit",
        "kind": "threshold",
        "metric": "node_power_w",
        "scope": "node",
        "op": "gt",
        "threshold": 90,
        "relative_to": "psu_capacity",
        "duration_s": 60,
        "severity": "warning",
        "description": "Node draw above 90% of its usable PSU capacity (a redundant pair counts once).",
    },
    {
        "name": "Firmware heartbeat stalled",
        "kind": "stall",
        "metric": "heartbeat",
        "scope": "card",
        "op": "gt",
        "threshold": 0,
        "duration_s": 60,
        "severity": "critical",
        "description": "The Tenstorrent firmware heartbeat has not increased for 60 s: the card is hung.",
    },
    {
        "name": "Link retrained",
        "kind": "event",
        "event_kind": "link_retrain",
        "scope": "card",
        "severity": "warning",
        "duration_s": 3600,
        "description": "A QSFP/Ethernet link retrained: often behind NCCL watchdog timeouts. Resolves after an hour quiet.",
    },
    {
        "name": "Link down",
        "kind": "event",
        "event_kind": "link_down",
        "scope": "card",
        "severity": "warning",
        "duration_s": 3600,
        "description": "A card link went down (QSFP link resets are behind NCCL timeouts).",
    },
    {
        "name": "Xid error",
        "kind": "event",
        "event_kind": "xid",
        "scope": "card",
        "severity": "critical",
        "duration_s": 0,
        "description": "The NVIDIA driver reported an Xid; stays open until resolved by hand.",
    },
    {
        "name": "GPU fell off the bus",
        "kind": "event",
        "event_kind": "gpu_fell_off_bus",
        "scope": "node",
        "severity": "critical",
        "duration_s": 0,
        "description": "Xid 79: the card needs a reset or a reboot.",
    },
]


def alert_rules_ensure_defaults(model: Any = None) -> int:
    """Create the default rules that do not exist (by name); returns how many were created."""
    if model is None:
        from monitoring.models import AlertRule as model
    created = 0
    for rule in DEFAULT_RULES:
        created += model.objects.get_or_create(name=rule["name"], defaults=rule)[1]
    return created
