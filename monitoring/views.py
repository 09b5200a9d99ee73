"""Pages: alerts (acknowledge / resolve), alert rules (admins edit), clusters' Prometheus sources,
energy report; and /metrics."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import ValidationError
from django.db.models import URLField
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import capfirst
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from monitoring import selectors, services
from monitoring.filters import AlertFilterSet, NodeHealthFilterSet
from monitoring.messages import alert_text, alert_value, rule_condition, rule_subject
from monitoring.models import (
    ALERT_RULE_FIELDS,
    HEALTH_CHECK_FIELDS,
    Alert,
    AlertRule,
    HealthCheck,
    NodeHealth,
    PrometheusSource,
)
from monitoring.promql import PromError
from portal.services import api_token_authenticate
from portal.templatetags.portal_format import ago, number
from portal.views.generic import Column, ObjectDeleteView, ObjectDetailView, ObjectEditView, ObjectListView


def _alert_actions(alert: Alert) -> Any:
    buttons = []
    if alert.acknowledged_at is None:
        buttons.append(
            format_html(
                '<button type="button" hx-post="{}" hx-target="closest td">{}</button>',
                reverse("monitoring:alert_acknowledge", args=[alert.pk]),
                _("Acknowledge"),
            )
        )
    if alert.status == Alert.Status.FIRING:
        buttons.append(
            format_html(
                '<button type="button" hx-post="{}" hx-target="closest td">{}</button>',
                reverse("monitoring:alert_resolve", args=[alert.pk]),
                _("Resolve"),
            )
        )
    return format_html("{}", format_html(" ".join(["{}"] * len(buttons)), *buttons)) if buttons else "—"


class AlertListView(ObjectListView):
    model = Alert
    queryset = selectors.alert_list
    filterset_class = AlertFilterSet
    title = _("Alerts")  # type: ignore[assignment]
    columns = (
        Column(_("Started"), render=lambda a: ago(a.started_at), order_by="started_at"),
        Column(_("Status"), "status", order_by="status"),
        Column(_("Severity"), "severity", order_by="severity"),
        Column(_("Rule"), "rule"),
        Column(_("Node"), "node"),
        Column(_("Card"), render=lambda a: a.card or ([*a.target.split("/"), ""][1] or None)),
        Column(_("Value"), render=alert_value),
        Column(_("Message"), render=alert_text),
        Column(_("Acknowledged"), "acknowledged_by"),
        Column(_("Actions"), render=_alert_actions),
    )

    def get_queryset(self) -> Any:
        # every alert, the firing ones first (newest first within each), unless the filter picks a status
        status = self.request.GET.get("status") or None
        qs = selectors.alert_list(status=status if status in Alert.Status.values else None)
        return qs.order_by("status", "-started_at", "-pk")  # "firing" sorts before "resolved"


def _transition(request: HttpRequest, pk: int, service: Any) -> HttpResponse:
    alert = get_object_or_404(Alert, pk=pk)
    try:
        service(alert=alert, user=request.user)
    except ValidationError as exc:  # shown in the row's action cell (static/js/portal.js swaps 4xx fragments)
        return HttpResponse(format_html('<p class="errors" role="alert">{}</p>', exc.messages[0]), status=403)
    response = HttpResponse(status=204)
    response["HX-Refresh"] = "true"
    return response


@require_POST
@login_required
@permission_required("monitoring.acknowledge_alert", raise_exception=True)
def alert_acknowledge(request: HttpRequest, pk: int) -> HttpResponse:
    return _transition(request, pk, services.alert_acknowledge)


@require_POST
@login_required
@permission_required("monitoring.acknowledge_alert", raise_exception=True)
def alert_resolve(request: HttpRequest, pk: int) -> HttpResponse:
    return _transition(request, pk, services.alert_resolve)


def _formfield(field: Any, **kwargs: Any) -> Any:
    if isinstance(field, URLField):
        kwargs.setdefault("assume_scheme", "https")  # a webhook typed without a scheme
    return field.formfield(**kwargs)


class AlertRuleForm(forms.ModelForm[AlertRule]):
    class Meta:
        model = AlertRule
        formfield_callback = _formfield
        fields = list(ALERT_RULE_FIELDS)


class AlertRuleListView(ObjectListView):
    model = AlertRule
    queryset = selectors.alert_rule_list
    title = _("Alert rules")  # type: ignore[assignment]
    columns = (
        Column(_("Name"), render=lambda r: r, order_by="name"),
        Column(_("Kind"), "kind"),
        Column(_("Metric / event"), render=rule_subject),
        Column(_("Scope"), "scope"),
        Column(_("Condition"), render=rule_condition),
        Column(_("For (s)"), "duration_s"),
        Column(_("Severity"), "severity"),
        Column(_("Enabled"), "enabled"),
    )


def _rule_value(field: str) -> Any:
    if field == "name":
        return str  # the seeded rules' names are translated (AlertRule.__str__)
    return lambda rule: Column("", field).cell(rule)


class AlertRuleView(ObjectDetailView):
    model = AlertRule
    queryset = selectors.alert_rule_list
    # a field without a translated verbose name ("cluster") is looked up in the catalogue at render time
    fields = tuple(
        Column(
            capfirst(_(str(getattr(AlertRule._meta.get_field(f), "verbose_name", f)))), render=_rule_value(f)
        )
        for f in AlertRuleForm.Meta.fields
    )


class AlertRuleEditView(ObjectEditView):
    model = AlertRule
    form_class = AlertRuleForm


class AlertRuleDeleteView(ObjectDeleteView):
    model = AlertRule
    success_url = "/monitoring/alert-rules/"


class IndentedJSONField(forms.JSONField):
    """JSON edited in a textarea, one key a line (the mapping is long)."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)


class PrometheusSourceForm(forms.ModelForm[PrometheusSource]):
    mapping = IndentedJSONField(
        label=_("series mapping"),
        widget=forms.Textarea(attrs={"rows": 16}),
        help_text=_("Which Prometheus labels name nodes and cards, and which metrics give which values."),
    )
    secret = forms.CharField(
        label=_("token or password"),
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text=_("Stored encrypted. Leave empty to keep the current one."),
    )

    class Meta:
        model = PrometheusSource
        formfield_callback = _formfield
        fields = [
            "cluster",
            "base_url",
            "enabled",
            "auth",
            "username",
            "secret",
            "verify_tls",
            "ca_cert",
            "timeout_s",
            "mapping",
        ]
        widgets = {
            "ca_cert": forms.Textarea(attrs={"rows": 4}),
            "mapping": forms.Textarea(attrs={"rows": 12}),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._old_secret = self.instance.secret if self.instance.pk else ""

    def clean_secret(self) -> str:
        return self.cleaned_data.get("secret") or self._old_secret


class PrometheusSourceListView(ObjectListView):
    model = PrometheusSource
    queryset = selectors.prometheus_source_list
    title = _("Prometheus sources")  # type: ignore[assignment]
    columns = (
        Column(_("Cluster"), "cluster", link=True, order_by="cluster__name"),
        Column(_("URL"), "base_url", link=True),
        Column(_("Read telemetry from it"), "enabled"),
        Column(_("Authentication"), "auth"),
        Column(_("Verify TLS"), "verify_tls"),
    )


class PrometheusSourceView(ObjectDetailView):
    model = PrometheusSource
    queryset = selectors.prometheus_source_list
    template_name = "monitoring/prometheussource_detail.html"
    fields = (
        Column(_("Cluster"), "cluster"),
        Column(_("URL"), "base_url"),
        Column(_("Read telemetry from it"), "enabled"),
        Column(_("Authentication"), "auth"),
        Column(_("User"), "username"),
        Column(_("Token or password"), render=lambda s: _("stored") if s.secret else ""),
        Column(_("Verify TLS"), "verify_tls"),
        Column(_("CA certificate"), render=lambda s: _("given") if s.ca_cert else _("the system's")),
        Column(_("Timeout (s)"), "timeout_s"),
    )

    def extra_context(self, obj: Any) -> dict[str, Any]:
        from monitoring.prometheus_source import prometheus_check

        mapping = obj.mapping if isinstance(obj.mapping, dict) else {}
        metrics = sorted(
            (
                (
                    name,
                    spec.get("metric", ""),
                    number(spec.get("scale", 1), 0 if float(spec.get("scale", 1)).is_integer() else 3),
                )
                for name, spec in mapping.get("metrics", {}).items()
            ),
            key=lambda row: (row[1], row[0]),
        )
        try:
            check: dict[str, Any] = {"up": prometheus_check(obj)}
        except PromError as exc:
            check = {"error": exc.message, "unreachable": exc.kind == "unreachable"}
        return {"mapping": mapping, "mapping_metrics": metrics, "check": check}


class PrometheusSourceEditView(ObjectEditView):
    model = PrometheusSource
    form_class = PrometheusSourceForm


class PrometheusSourceDeleteView(ObjectDeleteView):
    model = PrometheusSource
    success_url = "/monitoring/prometheus-sources/"


def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus exposition of the portal's health and the latest telemetry.

    Scrape with `authorization: {type: Token, credentials: <API token>}`; a session works too.
    Needs monitoring.view_latestvalue.
    """
    user = request.user
    header = request.headers.get("Authorization", "").split()
    if len(header) == 2 and header[0].lower() == "token":
        token = api_token_authenticate(header[1])
        if token is None:
            return HttpResponse("invalid token\n", status=401, content_type="text/plain")
        user = token.user
    if not user.is_authenticated:
        return HttpResponse("authentication required\n", status=401, content_type="text/plain")
    if not user.has_perm("monitoring.view_latestvalue"):
        return HttpResponse("permission denied\n", status=403, content_type="text/plain")
    return HttpResponse(
        selectors.metrics_exposition(), content_type="text/plain; version=0.0.4; charset=utf-8"
    )


# -- health checks ----------------------------------------------------------------------------------
def _params_text(check: HealthCheck) -> Any:
    """The parameters as "name: value" lines (the kind's own words, the help on hover), not JSON."""
    from monitoring.health.rules import PARAM_LABELS, RULES

    rule = RULES.get(check.kind)
    if rule is None or not isinstance(check.params, dict):
        return "—"
    lines = []
    for param in rule.params:
        value = check.params.get(param.name, param.default)
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        elif isinstance(value, list):
            value = ", ".join(map(str, value))
        if value in ("", None):
            continue
        lines.append((param.help, PARAM_LABELS.get(param.name, param.name), value))
    if not lines:
        return "—"
    return format_html_join(format_html("<br>"), '<span title="{}">{}</span>: {}', lines)


class HealthCheckForm(forms.ModelForm[HealthCheck]):
    class Meta:
        model = HealthCheck
        fields = list(HEALTH_CHECK_FIELDS)


class HealthCheckListView(ObjectListView):
    model = HealthCheck
    queryset = selectors.health_check_list
    title = _("Health checks")  # type: ignore[assignment]
    columns = (
        Column(_("Name"), render=lambda c: c, order_by="name"),
        Column(_("Kind"), "kind"),
        Column(_("Cluster"), "cluster"),
        Column(_("Node role"), "node_role"),
        Column(_("Card model"), "card_model"),
        Column(_("Results in a row"), "consecutive"),
        Column(_("Drains"), "drain"),
        Column(_("Enabled"), "enabled"),
        Column(_("Failing nodes"), "failing", order_by="failing"),
    )


class HealthCheckView(ObjectDetailView):
    model = HealthCheck
    queryset = selectors.health_check_list
    fields = (
        Column(_("Name"), "name"),
        Column(_("Kind"), "kind"),
        Column(_("Cluster"), "cluster"),
        Column(_("Node role"), "node_role"),
        Column(_("Card model"), "card_model"),
        Column(_("Parameters"), render=_params_text),
        Column(_("Results in a row"), "consecutive"),
        Column(_("Drain the node"), "drain"),
        Column(_("Enabled"), "enabled"),
        Column(_("Description"), "description"),
        Column(_("Failing nodes"), "failing"),
    )


class HealthCheckEditView(ObjectEditView):
    model = HealthCheck
    form_class = HealthCheckForm


class HealthCheckDeleteView(ObjectDeleteView):
    model = HealthCheck
    success_url = "/monitoring/health-checks/"


class NodeHealthListView(ObjectListView):
    model = NodeHealth
    queryset = selectors.node_health_list
    filterset_class = NodeHealthFilterSet
    title = _("Node health")  # type: ignore[assignment]
    columns = (
        Column(_("Node"), "node"),
        Column(_("Check"), "health_check"),
        Column(_("Status"), "status", order_by="status"),
        Column(
            _("Since"), render=lambda s: ago(s.changed_at) if s.changed_at else None, order_by="changed_at"
        ),
        Column(_("Results against the status"), "streak"),
        Column(_("Message"), "message"),
    )
