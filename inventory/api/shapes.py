"""Response shapes of inventory's non-model endpoints (power budgets, what-if, readiness, fabric checks).

They only describe what the views return (for the OpenAPI schema and generated clients); the views
build their bodies from the services' `as_dict()`, and tests/portal/test_api_schema.py checks the two
agree through schemathesis.
"""

from __future__ import annotations

from django.db import models
from rest_framework import serializers

from inventory.models.readiness import ReadinessCheck, ReadinessKey, ReadinessStatus


class CheckStatus(models.TextChoices):
    """The outcome of a power budget, a what-if or a fabric check (the worst of its findings)."""

    PASS = "pass", "pass"
    WARN = "warn", "warn"
    FAIL = "fail", "fail"


POWER_STATUS = CheckStatus.choices


class FindingSeverity(models.TextChoices):
    FAIL = "fail", "fail"
    WARN = "warn", "warn"
    INFO = "info", "info"


class FindingSerializer(serializers.Serializer):
    severity = serializers.ChoiceField(choices=POWER_STATUS)
    message = serializers.CharField()


class LoadLineSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="card, node, psu (in a feed budget) or what-if")
    id = serializers.IntegerField(allow_null=True)
    name = serializers.CharField()
    nameplate_w = serializers.FloatField()
    share = serializers.FloatField(help_text="The fraction of the load this budget carries.")
    carried_w = serializers.FloatField()
    measured_w = serializers.FloatField(allow_null=True)


class LeadLineSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.CharField()
    rating_w = serializers.IntegerField()
    load_w = serializers.FloatField()
    target = serializers.CharField()
    status = serializers.ChoiceField(choices=POWER_STATUS)


class BudgetSerializer(serializers.Serializer):
    """A PSU's or a power feed's budget: nameplate load against usable capacity (W)."""

    scope = serializers.ChoiceField(choices=[("psu", "psu"), ("feed", "feed")])
    id = serializers.IntegerField()
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=POWER_STATUS)
    capacity_w = serializers.FloatField()
    headroom_pct = serializers.FloatField()
    usable_w = serializers.FloatField()
    load_w = serializers.FloatField()
    wall_w = serializers.FloatField()
    measured_w = serializers.FloatField(allow_null=True)
    margin_w = serializers.FloatField()
    utilisation_pct = serializers.FloatField()
    loads = LoadLineSerializer(many=True)
    leads = LeadLineSerializer(many=True)
    findings = FindingSerializer(many=True)


class NodePowerSerializer(serializers.Serializer):
    psus = BudgetSerializer(many=True)
    feeds = BudgetSerializer(many=True)
    findings = FindingSerializer(many=True)


class WhatIfSerializer(serializers.Serializer):
    node = serializers.CharField()
    card_model = serializers.CharField()
    count = serializers.IntegerField()
    status = serializers.ChoiceField(choices=POWER_STATUS)
    holds = serializers.BooleanField()
    findings = FindingSerializer(many=True)
    psus = BudgetSerializer(many=True)
    feeds = BudgetSerializer(many=True)


class ReadinessCheckSerializer(serializers.Serializer):
    key = serializers.ChoiceField(choices=ReadinessKey.choices)
    label = serializers.CharField()  # type: ignore[assignment]
    manual = serializers.BooleanField()
    status = serializers.ChoiceField(choices=ReadinessStatus.choices)
    detail = serializers.CharField(allow_blank=True)
    source = serializers.ChoiceField(choices=ReadinessCheck.Source.choices, allow_null=True)  # type: ignore[assignment]
    updated_by = serializers.CharField(allow_null=True)
    updated_at = serializers.DateTimeField(allow_null=True)


class ReadinessSerializer(serializers.Serializer):
    node = serializers.CharField()
    status = serializers.ChoiceField(choices=ReadinessStatus.choices)
    checks = ReadinessCheckSerializer(many=True)


class ReadinessEvaluateSerializer(serializers.Serializer):
    seen = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="PCI bus ids or GPU UUIDs the node reports; omitted: only what Rackpilot knows.",
    )


class FabricFindingSerializer(serializers.Serializer):
    kind = serializers.CharField()
    severity = serializers.ChoiceField(choices=FindingSeverity.choices)
    message = serializers.CharField()
    ports = serializers.ListField(child=serializers.CharField())
    suggestion = serializers.CharField(allow_blank=True, allow_null=True)
    cables = serializers.ListField(child=serializers.IntegerField())
    members = serializers.ListField(child=serializers.CharField())


class FabricCheckSerializer(serializers.Serializer):
    template = serializers.CharField()
    ok = serializers.BooleanField()
    status = serializers.ChoiceField(choices=POWER_STATUS)
    members = serializers.ListField(child=serializers.CharField())
    expected_links = serializers.IntegerField()
    cables = serializers.IntegerField()
    promised_max_hops = serializers.IntegerField(allow_null=True)
    max_hops = serializers.IntegerField(allow_null=True)
    max_hops_exact = serializers.BooleanField()
    hop_matrix = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField(allow_null=True)), allow_null=True
    )
    oversubscription = serializers.DictField(child=serializers.FloatField())
    findings = FabricFindingSerializer(many=True)
    member_names = serializers.DictField(child=serializers.CharField())


class PlanErrorSerializer(serializers.Serializer):
    where = serializers.CharField()
    message = serializers.CharField()


class PlanLinkSerializer(serializers.Serializer):
    a = serializers.CharField()
    a_port = serializers.IntegerField()
    b = serializers.CharField()
    b_port = serializers.IntegerField()
    kind = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]


class FabricPlanSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    kept = serializers.IntegerField()
    errors = PlanErrorSerializer(many=True)  # type: ignore[assignment]
    links = PlanLinkSerializer(many=True)


class FabricPlanCreatedSerializer(serializers.Serializer):
    created = serializers.ListField(child=serializers.IntegerField())
    count = serializers.IntegerField()


class FabricTemplateSerializer(serializers.Serializer):
    key = serializers.CharField()
    name = serializers.CharField()
    members = serializers.CharField()
    assumption = serializers.CharField(allow_blank=True)
