from __future__ import annotations

from rest_framework import serializers

from monitoring.models import Alert, AlertRule, Event
from portal.api.serializers import PortalModelSerializer


class AlertRuleSerializer(PortalModelSerializer):
    class Meta:
        model = AlertRule
        fields = [
            "id",
            "url",
            "display",
            "name",
            "kind",
            "metric",
            "event_kind",
            "scope",
            "cluster",
            "op",
            "threshold",
            "relative_to",
            "duration_s",
            "only_when_node_busy",
            "severity",
            "enabled",
            "notify_webhook",
            "notify_emails",
            "drain_node",
            "description",
        ]


class AlertSerializer(PortalModelSerializer):
    class Meta:
        model = Alert
        fields = [
            "id",
            "url",
            "display",
            "rule",
            "target",
            "node",
            "card",
            "status",
            "severity",
            "started_at",
            "last_seen_at",
            "resolved_at",
            "value",
            "message",
            "acknowledged_at",
            "acknowledged_by",
            "notified_at",
            "notify_error",
        ]
        read_only_fields = fields


class EventSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.hostname")

    class Meta:
        model = Event
        fields = ["id", "ts", "node", "card", "card_ref", "kind", "severity", "message", "data"]
