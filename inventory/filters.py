"""One FilterSet per model, shared by the HTML lists and the API viewsets."""

from __future__ import annotations

from typing import Any

import django_filters as df
from django.db.models import Q, QuerySet
from django.utils.translation import gettext_lazy as _

from inventory.choices import CableKind, CableStatus, CardStatus, NodeRole, NodeStatus, PortKind
from inventory.models import (
    PSU,
    Cable,
    Card,
    CardModel,
    ChassisModel,
    Cluster,
    Node,
    Port,
    PortTemplate,
    PowerFeed,
    PowerLead,
    Rack,
    Site,
)
from portal.filters import BooleanFilter


class SearchFilterSet(df.FilterSet):
    """Adds `q`: a case-insensitive search over `search_fields`."""

    search_fields: tuple[str, ...] = ("name",)
    q = df.CharFilter(method="search", label=_("Search"))

    def search(self, queryset: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        value = value.strip()
        if not value:
            return queryset
        cond = Q()
        for field in self.search_fields:
            cond |= Q(**{f"{field}__icontains": value})
        return queryset.filter(cond)


class SiteFilterSet(SearchFilterSet):
    class Meta:
        model = Site
        fields = ["name"]


class ClusterFilterSet(SearchFilterSet):
    class Meta:
        model = Cluster
        fields = ["name", "site", "backend"]


class RackFilterSet(SearchFilterSet):
    class Meta:
        model = Rack
        fields = ["name", "site"]


class ChassisModelFilterSet(SearchFilterSet):
    search_fields = ("manufacturer", "name")

    class Meta:
        model = ChassisModel
        fields = ["manufacturer", "airflow"]


class NodeFilterSet(SearchFilterSet):
    search_fields = ("hostname", "slurm_name", "notes")
    role = df.MultipleChoiceFilter(choices=NodeRole.choices)
    status = df.MultipleChoiceFilter(choices=NodeStatus.choices)
    cluster_name = df.CharFilter(field_name="cluster__name", label=_("Cluster name"))
    slurm_state = df.CharFilter(lookup_expr="icontains", label=_("Slurm state"))
    has_cards = BooleanFilter(
        field_name="cards", lookup_expr="isnull", exclude=True, distinct=True, label=_("Has cards")
    )

    class Meta:
        model = Node
        fields = ["hostname", "cluster", "rack", "chassis", "role", "status", "bmc_kind", "slurm_name"]


class CardModelFilterSet(SearchFilterSet):
    search_fields = ("vendor", "name")

    class Meta:
        model = CardModel
        fields = ["vendor", "name", "cooling", "memory_type"]


class PortTemplateFilterSet(SearchFilterSet):
    class Meta:
        model = PortTemplate
        fields = ["card_model", "kind"]


class CardFilterSet(SearchFilterSet):
    search_fields = ("serial", "pci_bus_id", "gpu_uuid", "slot", "node__hostname")
    status = df.MultipleChoiceFilter(choices=CardStatus.choices)
    cluster = df.NumberFilter(field_name="node__cluster", label=_("Cluster"))
    vendor = df.CharFilter(field_name="card_model__vendor", lookup_expr="iexact", label=_("Vendor"))

    class Meta:
        model = Card
        fields = ["node", "card_model", "status", "serial", "pci_bus_id", "gpu_uuid"]


class PortFilterSet(SearchFilterSet):
    kind = df.MultipleChoiceFilter(choices=PortKind.choices)
    connected = BooleanFilter(
        field_name="termination", lookup_expr="isnull", exclude=True, label=_("Connected")
    )

    class Meta:
        model = Port
        fields = ["node", "card", "name", "kind", "speed_gbps"]


class CableFilterSet(SearchFilterSet):
    search_fields = ("label", "description")
    kind = df.MultipleChoiceFilter(choices=CableKind.choices)
    status = df.MultipleChoiceFilter(choices=CableStatus.choices)
    node = df.NumberFilter(field_name="terminations__port__node", distinct=True, label=_("Node"))
    card = df.NumberFilter(field_name="terminations__port__card", distinct=True, label=_("Card"))

    class Meta:
        model = Cable
        fields = ["kind", "status", "label"]


class PowerFeedFilterSet(SearchFilterSet):
    class Meta:
        model = PowerFeed
        fields = ["site", "rack", "phase"]


class PSUFilterSet(SearchFilterSet):
    class Meta:
        model = PSU
        fields = ["node", "feed"]


class PowerLeadFilterSet(SearchFilterSet):
    class Meta:
        model = PowerLead
        fields = ["psu", "card", "node", "kind"]
