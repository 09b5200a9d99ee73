from __future__ import annotations

from rest_framework import serializers

from monitoring.models import ALERT_RULE_FIELDS, Alert, AlertRule, Event, PrometheusSource
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


class PrometheusSourceSerializer(PortalModelSerializer):
    """A cluster's Prometheus-compatible server. `secret` (bearer token or basic password) is write-only:
    omitted on update, the stored one is kept; `has_secret` says whether one is stored."""

    secret = serializers.CharField(
        write_only=True, required=False, allow_blank=True, style={"input_type": "password"}
    )
    has_secret = serializers.SerializerMethodField()
    mapping = serializers.JSONField(
        required=False,
        help_text="node_labels, card_labels (label names, first present wins), index_label, and metrics: "
        "Prometheus metric name -> {metric: the portal's metric, scale}. Default: dcgm-exporter and node_exporter.",
    )

    class Meta:
        model = PrometheusSource
        fields = [
            "id",
            "url",
            "display",
            "cluster",
            "base_url",
            "enabled",
            "auth",
            "username",
            "secret",
            "has_secret",
            "verify_tls",
            "ca_cert",
            "timeout_s",
            "mapping",
        ]

    def get_has_secret(self, obj: PrometheusSource) -> bool:
        return bool(obj.secret)
