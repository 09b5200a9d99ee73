from __future__ import annotations

from rest_framework import serializers

from monitoring.models import ALERT_RULE_FIELDS, Alert, AlertRule, Event
from portal.api.serializers import PortalModelSerializer


class AlertRuleSerializer(PortalModelSerializer):
    class Meta:
        model = AlertRule
        fields = ["id", "url", "display", *ALERT_RULE_FIELDS]


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
