from __future__ import annotations

from typing import Any

from django.utils import timezone

from inventory.models import Node, ReadinessCheck
from monitoring.models import Alert, AlertRule


def test_node_operations_show_readiness_and_firing_alerts(
    sim_cluster: Any, operator_user: Any, client_as: Any
) -> None:
    # given a node that fails a readiness check and has one firing and one resolved alert
    node = Node.objects.filter(cluster=sim_cluster).order_by("hostname").first()
    ReadinessCheck.objects.create(
        node=node, key="above_4g_decoding", status="fail", detail="disabled in BIOS"
    )
    rule = AlertRule.objects.get(name="GPU temperature above 85 °C")
    now = timezone.now()
    Alert.objects.create(rule=rule, target=f"node:{node.pk}", node=node, severity="critical", started_at=now)
    Alert.objects.create(
        rule=rule,
        target=f"node:{node.pk}:old",
        node=node,
        severity="critical",
        started_at=now,
        status="resolved",
        resolved_at=now,
    )
    # when an operator opens the node operations page
    body = client_as(operator_user).get("/jobs/nodes/").content.decode()
    row = body[body.index(f'id="node-{node.pk}"') :]
    row = row[: row.index("</tr>")]
    # then its row carries the failing readiness badge and one firing alert, linked to the alert list
    assert "readiness-fail" in row
    assert f'href="/monitoring/alerts/?node={node.pk}"' in row and ">1</a>" in row


def test_alert_list_filters_by_node(sim_cluster: Any, admin_user: Any, client_as: Any) -> None:
    first, second = Node.objects.filter(cluster=sim_cluster).order_by("hostname")[:2]
    rule = AlertRule.objects.get(name="GPU temperature above 85 °C")
    for node in (first, second):
        Alert.objects.create(
            rule=rule,
            target=f"node:{node.pk}",
            node=node,
            severity="critical",
            started_at=timezone.now(),
            message=f"hot on {node.hostname}",
        )
    body = client_as(admin_user).get(f"/monitoring/alerts/?node={first.pk}").content.decode()
    assert f"hot on {first.hostname}" in body and f"hot on {second.hostname}" not in body
