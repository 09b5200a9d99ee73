"""Default alert rules from the field guides (seeds): temperature, sustained utilisation, PSU
budget, firmware heartbeat, link retrains / downs (behind NCCL timeouts), Xids, network above 80%,
disk IOPS below 1000 and a training process gone (the last two only while a job runs). Admins edit
them. Names are marked for the catalogue (AlertRule.__str__ translates the seeded ones). Installed by data migrations (0003, 0006) through :func:`alert_rules_ensure_defaults`."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from django.utils.translation import gettext_noop

DEFAULT_RULES: list[dict[str, Any]] = [
    {
        "name": gettext_noop("Remediation runbook gave up"),
        "kind": "event",
        "event_kind": "runbook_failed",
        "scope": "node",
        "duration_s": 0,
        "severity": "critical",
        "description": "A runbook tried reset, reboot and power cycle and left the node drained: "
        "the message says what was tried.",
    },
    {
        "name": gettext_noop("GPU temperature above 85 °C"),
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
        "name": gettext_noop("Utilisation above 95% sustained"),
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
        "name": gettext_noop("Node power near PSU limit"),
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
        "name": gettext_noop("Firmware heartbeat stalled"),
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
        "name": gettext_noop("Link retrained"),
        "kind": "event",
        "event_kind": "link_retrain",
        "scope": "card",
        "severity": "warning",
        "duration_s": 3600,
        "description": "A QSFP/Ethernet link retrained: often behind NCCL watchdog timeouts. Resolves after an hour quiet.",
    },
    {
        "name": gettext_noop("Link down"),
        "kind": "event",
        "event_kind": "link_down",
        "scope": "card",
        "severity": "warning",
        "duration_s": 3600,
        "description": "A card link went down (QSFP link resets are behind NCCL timeouts).",
    },
    {
        "name": gettext_noop("Xid error"),
        "kind": "event",
        "event_kind": "xid",
        "scope": "card",
        "severity": "critical",
        "duration_s": 0,
        "description": "The NVIDIA driver reported an Xid; stays open until resolved by hand.",
    },
    {
        "name": gettext_noop("GPU fell off the bus"),
        "kind": "event",
        "event_kind": "gpu_fell_off_bus",
        "scope": "node",
        "severity": "critical",
        "duration_s": 0,
        "description": "Xid 79: the card needs a reset or a reboot.",
    },
    {
        "name": gettext_noop("Network above 80% for 10 minutes"),
        "kind": "threshold",
        "metric": "net_util_pct",
        "scope": "node",
        "op": "gt",
        "threshold": 80,
        "duration_s": 600,
        "severity": "warning",
        "description": "An interface (node_exporter: max of receive and transmit against the link speed) "
        "busier than 80% for 10 minutes: the fabric may be the bottleneck of multi-node training.",
    },
    {
        "name": gettext_noop("Disk IOPS below 1000 for 10 minutes"),
        "kind": "threshold",
        "metric": "disk_iops",
        "scope": "node",
        "op": "lt",
        "threshold": 1000,
        "duration_s": 600,
        "severity": "info",
        "only_when_node_busy": True,
        "description": "A disk (node_exporter: reads + writes per second) below 1000 IOPS for 10 minutes "
        "while a job runs on the node: if its GPU utilisation is low too, data loading may be the "
        "bottleneck (faster storage, preloading to NVMe or memory, more DataLoader workers). "
        "An idle node's disks say nothing, so the rule counts only while Slurm runs a job there.",
    },
    {
        "name": gettext_noop("Training process gone"),
        "kind": "threshold",
        "metric": "utilization_pct",
        "scope": "card",
        "op": "lt",
        "threshold": 5,
        "duration_s": 300,
        "severity": "warning",
        "only_when_node_busy": True,
        "description": "GPU utilisation below 5% for 5 minutes while jobs hold all of the node's GPUs: "
        "the training process has probably exited or hangs (check the job's output, NCCL, Xids). "
        "Slurm does not say which cards a job holds, so partly allocated nodes are not judged.",
    },
]


def alert_rules_ensure_defaults(model: Any = None, names: Collection[str] | None = None) -> int:
    """Create the default rules (those of ``names`` only, when given) that do not exist (by name);
    returns how many were created."""
    if model is None:
        from monitoring.models import AlertRule as model
    # a migration's historical model may predate a field: a rule needing it waits for a later one
    fields = {f.name for f in model._meta.get_fields()}
    created = 0
    for rule in DEFAULT_RULES:
        if rule.keys() <= fields and (names is None or rule["name"] in names):
            created += model.objects.get_or_create(name=rule["name"], defaults=rule)[1]
    return created
