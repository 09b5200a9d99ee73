"""The default rules from the second and third field guides: network above 80%, disk IOPS below
1000 (only while a job runs), training process gone (only while a job runs)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from monitoring import services
from monitoring.defaults import alert_rules_ensure_defaults
from monitoring.models import Alert, AlertRule, AlertState
from tests.monitoring.conftest import H100_UUIDS

pytestmark = pytest.mark.django_db
T0 = timezone.now().replace(microsecond=0) - dt.timedelta(hours=1)


def _push(node: str, metric: str, value: float, seconds: int, card: str = "", **labels: str) -> Any:
    return services.telemetry_ingest_samples(
        [
            {
                "ts": (T0 + dt.timedelta(seconds=seconds)).isoformat(),
                "node": node,
                "card": card,
                "metric": metric,
                "value": value,
                "labels": labels,
            }
        ]
    )


def _busy(node: Any, state: str = "mixed", gpus_total: int = 8, gpus_alloc: int = 8) -> None:
    from jobs.models import NodeState

    type(node).objects.filter(pk=node.pk).update(slurm_state=state)
    NodeState.objects.create(
        node=node, state=state, display_state=state, gpus_total=gpus_total, gpus_alloc=gpus_alloc
    )


def test_the_three_rules_are_installed_with_their_conditions() -> None:
    rules = {
        r.name: (r.metric, r.scope, r.op, r.threshold, r.duration_s, r.severity, r.only_when_node_busy)
        for r in AlertRule.objects.filter(metric__in=["net_util_pct", "disk_iops", "utilization_pct"])
    }
    assert rules == {
        "Network above 80% for 10 minutes": ("net_util_pct", "node", "gt", 80, 600, "warning", False),
        "Disk IOPS below 1000 for 10 minutes": ("disk_iops", "node", "lt", 1000, 600, "info", True),
        "Training process gone": ("utilization_pct", "card", "lt", 5, 300, "warning", True),
        "Utilisation above 95% sustained": ("utilization_pct", "card", "gt", 95, 1800, "info", False),
    }
    assert "data loading may be the bottleneck" in AlertRule.objects.get(metric="disk_iops").description


def test_ensuring_named_defaults_leaves_a_deleted_older_rule_deleted() -> None:
    # given an admin deleted an older default and one new one
    AlertRule.objects.filter(name__in=["Utilisation above 95% sustained", "Training process gone"]).delete()
    # when the new rules are ensured by name (what migration 0006 does)
    created = alert_rules_ensure_defaults(names=["Training process gone", "Network above 80% for 10 minutes"])
    # then only the missing named one comes back
    assert created == 1
    assert AlertRule.objects.filter(name="Training process gone").exists()
    assert not AlertRule.objects.filter(name="Utilisation above 95% sustained").exists()


def test_network_above_80_pct_fires_after_ten_minutes(inv: Any) -> None:
    inv.node("gpu01")
    _push("gpu01", "net_util_pct", 85, 0, device="ib0")
    _push("gpu01", "net_util_pct", 90, 300, device="ib0")
    assert Alert.objects.count() == 0
    _push("gpu01", "net_util_pct", 88, 600, device="ib0")
    alert = Alert.objects.get()
    assert (alert.rule.name, alert.severity, alert.started_at, alert.value, alert.card_id) == (
        "Network above 80% for 10 minutes",
        "warning",
        T0,
        88,
        None,
    )
    assert alert.target.endswith("/device=ib0")


def test_network_dipping_below_80_pct_does_not_fire(inv: Any) -> None:
    inv.node("gpu01")
    for seconds, value in [(0, 85), (300, 70), (420, 95), (900, 95)]:
        _push("gpu01", "net_util_pct", value, seconds, device="ib0")
    assert Alert.objects.count() == 0
    assert AlertState.objects.get().pending_since == T0 + dt.timedelta(seconds=420)


def test_node_exporter_pages_raise_the_network_alert_through_derived_utilisation(inv: Any) -> None:
    # given a 25 GB/s ib0 link receiving 22.5 GB/s, scraped every 5 minutes
    inv.node("gpu01")
    for i in range(4):
        rx = i * 300 * 2.25e10
        page = (
            "# TYPE node_network_receive_bytes_total counter\n"
            f'node_network_receive_bytes_total{{device="ib0"}} {rx:e}\n'
            "# TYPE node_network_transmit_bytes_total counter\n"
            'node_network_transmit_bytes_total{device="ib0"} 0\n'
            "# TYPE node_network_speed_bytes gauge\n"
            'node_network_speed_bytes{device="ib0"} 2.5e+10\n'
        )
        services.telemetry_ingest_text(
            "node-exporter", page, node_hostname="gpu01", ts=T0 + dt.timedelta(seconds=300 * i)
        )
        # then the first rate is at 300 s: the alert fires 10 minutes later, at 900 s
        assert Alert.objects.count() == (1 if i == 3 else 0)
    alert = Alert.objects.get()
    assert (alert.rule.name, alert.started_at, alert.value) == (
        "Network above 80% for 10 minutes",
        T0 + dt.timedelta(seconds=300),
        pytest.approx(90.0),
    )


def test_low_iops_fires_as_info_only_while_a_job_runs(inv: Any) -> None:
    # given a node running a job and an idle node, both with a disk at 200 IOPS for 10 minutes
    busy = inv.node("gpu01")
    _busy(busy)
    inv.node("gpu02")
    for host in ("gpu01", "gpu02"):
        _push(host, "disk_iops", 200, 0, device="nvme0n1")
        _push(host, "disk_iops", 150, 300, device="nvme0n1")
        _push(host, "disk_iops", 180, 600, device="nvme0n1")
    # then only the busy node's disk alerts, as info; the idle node keeps no state at all
    alert = Alert.objects.get()
    assert (alert.rule.name, alert.node_id, alert.severity, alert.started_at) == (
        "Disk IOPS below 1000 for 10 minutes",
        busy.pk,
        "info",
        T0,
    )
    assert list(AlertState.objects.values_list("series__node__hostname", flat=True)) == ["gpu01"]


def test_high_iops_on_a_busy_node_does_not_fire(inv: Any) -> None:
    _busy(inv.node("gpu01"), state="alloc")
    for seconds in (0, 300, 600):
        _push("gpu01", "disk_iops", 5000, seconds, device="nvme0n1")
    assert Alert.objects.count() == 0
    assert AlertState.objects.count() == 0


def test_training_process_gone_fires_after_five_minutes_and_resolves_when_the_job_ends(inv: Any) -> None:
    # given a node whose 8 GPUs are allocated, one card idle at 1%
    node = inv.node("gpu01")
    card = inv.card(node, gpu_uuid=H100_UUIDS[0])
    _busy(node)
    _push("gpu01", "utilization_pct", 1, 0, card=H100_UUIDS[0])
    _push("gpu01", "utilization_pct", 0, 240, card=H100_UUIDS[0])
    assert Alert.objects.count() == 0
    # when it is still idle at 5 minutes, the alert fires on the card
    _push("gpu01", "utilization_pct", 2, 300, card=H100_UUIDS[0])
    alert = Alert.objects.get()
    assert (alert.rule.name, alert.card_id, alert.severity, alert.started_at) == (
        "Training process gone",
        card.pk,
        "warning",
        T0,
    )
    # when Slurm says the job finished (node idle), the next sample resolves it
    type(node).objects.filter(pk=node.pk).update(slurm_state="idle")
    _push("gpu01", "utilization_pct", 0, 360, card=H100_UUIDS[0])
    alert.refresh_from_db()
    assert (alert.status, alert.resolved_at) == ("resolved", T0 + dt.timedelta(seconds=360))
    assert alert.message.endswith("the node no longer runs a job")
    assert AlertState.objects.count() == 0


@pytest.mark.parametrize(
    ("state", "gpus_total", "gpus_alloc"),
    [("idle", 8, 0), ("mixed", 8, 0), ("mixed", 8, 4), ("drained", 8, 0), ("down", 0, 0)],
)
def test_training_process_gone_needs_a_job_holding_gpus(
    inv: Any, state: str, gpus_total: int, gpus_alloc: int
) -> None:
    # given an idle card on a node without a GPU job (a CPU-only job in "mixed" with 0 GPUs allocated),
    # or on a partly allocated node, where the idle card may simply be free (Slurm does not say which
    # cards a job holds)
    _busy(inv.node("gpu01"), state=state, gpus_total=gpus_total, gpus_alloc=gpus_alloc)
    for seconds in (0, 300, 600):
        _push("gpu01", "utilization_pct", 0, seconds, card=H100_UUIDS[0])
    assert Alert.objects.count() == 0


def test_a_busy_node_without_slurm_gpu_counts_uses_its_state(inv: Any) -> None:
    # given a node Slurm reports as allocated, with no NodeState row (GPUs not tracked)
    node = inv.node("gpu01")
    type(node).objects.filter(pk=node.pk).update(slurm_state="alloc")
    for seconds in (0, 300):
        _push("gpu01", "utilization_pct", 3, seconds, card=H100_UUIDS[0])
    assert Alert.objects.get().rule.name == "Training process gone"


def test_a_busy_gpu_above_5_pct_does_not_fire(inv: Any) -> None:
    _busy(inv.node("gpu01"))
    for seconds in (0, 300, 600):
        _push("gpu01", "utilization_pct", 60, seconds, card=H100_UUIDS[0])
    assert Alert.objects.count() == 0
