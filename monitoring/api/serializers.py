from __future__ import annotations

from rest_framework import serializers

from monitoring.messages import alert_text, alert_value, event_message
from monitoring.models import ALERT_RULE_FIELDS, Alert, AlertRule, Event, PrometheusSource
from portal.api.serializers import PortalModelSerializer


class AlertRuleSerializer(PortalModelSerializer):
    class Meta:
        model = AlertRule
        fields = ["id", "url", "display", *ALERT_RULE_FIELDS]


class AlertSerializer(PortalModelSerializer):
    """``message`` is English and stable (for scripts); ``text`` and ``value_text`` are the same in the
    request's language with units; ``params`` holds the parts they are made of."""

    metric = serializers.CharField(source="rule.metric", read_only=True, help_text="Empty for event rules.")
    text = serializers.SerializerMethodField(help_text="The message in the request's language.")
    value_text = serializers.SerializerMethodField(help_text="The value with its unit; '—' for event alerts.")

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
            "metric",
            "value",
            "value_text",
            "message",
            "text",
            "params",
            "acknowledged_at",
            "acknowledged_by",
            "notified_at",
            "notify_error",
        ]
        read_only_fields = fields

    def get_text(self, obj: Alert) -> str:
        return alert_text(obj)

    def get_value_text(self, obj: Alert) -> str:
        return alert_value(obj)


class EventSerializer(serializers.ModelSerializer):
    """``message`` is what the tool printed (or Rackpilot's English for derived events); ``text`` is
    the event for people, in the request's language."""

    node = serializers.CharField(source="node.hostname")
    text = serializers.SerializerMethodField(help_text="The event in the request's language.")

    class Meta:
        model = Event
        fields = ["id", "ts", "node", "card", "card_ref", "kind", "severity", "message", "text", "data"]

    def get_text(self, obj: Event) -> str:
        return event_message(obj)


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
