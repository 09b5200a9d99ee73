from django.contrib import admin
from django.db import models

from monitoring.models import Alert, AlertRule, AlertState, Event, JobEnergy, LatestValue, NodeToken, Series


@admin.register(AlertRule)
class AlertRuleAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    list_display = [
        "name",
        "kind",
        "metric",
        "event_kind",
        "scope",
        "op",
        "threshold",
        "duration_s",
        "severity",
        "enabled",
    ]
    list_filter = ["kind", "severity", "enabled"]


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["rule", "target", "status", "severity", "started_at", "resolved_at", "acknowledged_by"]
    list_filter = ["status", "severity"]
    raw_id_fields = ["node", "card", "series"]


@admin.register(Series)
class SeriesAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["id", "node", "card", "card_ref", "metric", "labels"]
    search_fields = ["card_ref", "metric", "node__hostname"]
    raw_id_fields = ["node", "card"]


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["ts", "node", "card_ref", "kind", "severity", "message"]
    list_filter = ["kind", "severity"]
    raw_id_fields = ["node", "card"]


@admin.register(NodeToken)
class NodeTokenAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["node", "name", "prefix", "created", "last_used"]
    readonly_fields = ["prefix", "key_hash", "created", "last_used"]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False  # created with `manage.py telemetry_node_token` so the key is shown once


@admin.register(JobEnergy)
class JobEnergyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["job", "energy_kwh", "coverage_pct", "total_cost", "computed_at"]
    raw_id_fields = ["job"]


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Written by ingest and alert evaluation only; the admin shows them."""

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(LatestValue)
class LatestValueAdmin(ReadOnlyAdmin):
    list_display = ["series", "ts", "value"]
    list_select_related = ["series__node"]
    search_fields = ["series__node__hostname", "series__metric"]


@admin.register(AlertState)
class AlertStateAdmin(ReadOnlyAdmin):
    list_display = ["rule", "series", "pending_since"]
