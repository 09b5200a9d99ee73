"""Inventory reads: querysets with their eager loading, so that every list costs a fixed number of queries."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, IntegerField, OuterRef, Prefetch, QuerySet, Subquery
from django.db.models.functions import Coalesce

from inventory.models import (
    PSU,
    Cable,
    CableTermination,
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


def site_list() -> QuerySet[Site]:
    return Site.objects.annotate(rack_count=Count("racks", distinct=True)).order_by("name")


def cluster_list() -> QuerySet[Cluster]:
    return (
        Cluster.objects.select_related("site")
        .annotate(node_count=Count("nodes", distinct=True))
        .order_by("name")
    )


def rack_list() -> QuerySet[Rack]:
    return (
        Rack.objects.select_related("site")
        .annotate(node_count=Count("nodes", distinct=True))
        .order_by("site__name", "name")
    )


def chassis_model_list() -> QuerySet[ChassisModel]:
    return ChassisModel.objects.all()


def _cards_per(outer: str) -> Coalesce:
    """The number of cards of the outer row, as a correlated subquery: computed only for the rows a page
    returns (a JOIN with GROUP BY would aggregate every node's cards before LIMIT, and so would the
    pagination's count)."""
    counted = Card.objects.filter(**{outer: OuterRef("pk")}).order_by().values(outer).annotate(n=Count("pk"))
    return Coalesce(Subquery(counted.values("n"), output_field=IntegerField()), 0)


def node_list() -> QuerySet[Node]:
    return (
        Node.objects.select_related("cluster", "rack", "chassis")
        .annotate(card_count=_cards_per("node"))
        .order_by("hostname")
    )


def node_list_with_readiness() -> QuerySet[Node]:
    """node_list with the readiness summary annotated (inventory.readiness.node_readiness reads it)."""
    from inventory.readiness import with_readiness

    return with_readiness(node_list())


def node_get(pk: int) -> Node:
    return node_list().get(pk=pk)


def card_model_list() -> QuerySet[CardModel]:
    return (
        CardModel.objects.prefetch_related("port_templates")
        .annotate(card_count=_cards_per("card_model"))
        .order_by("vendor", "name")
    )


def port_template_list() -> QuerySet[PortTemplate]:
    return PortTemplate.objects.select_related("card_model")


def card_list() -> QuerySet[Card]:
    return Card.objects.select_related("node", "card_model")


def port_list() -> QuerySet[Port]:
    return Port.objects.select_related("node", "card__node", "termination__cable")


def _terminations() -> Prefetch[Any]:
    return Prefetch(
        "terminations",
        queryset=CableTermination.objects.select_related("port__node", "port__card__node").order_by("end"),
    )


def cable_list() -> QuerySet[Cable]:
    return Cable.objects.prefetch_related(_terminations())


def cable_ends(cable_ids: list[int]) -> dict[int, dict[str, dict[str, Any]]]:
    """Both ends of many cables in one flat query: {cable_id: {"a": {...}, "b": {...}}}.

    Large cable lists use this instead of instantiating four models per end (PERFORMANCE.md).
    """
    rows = CableTermination.objects.filter(cable_id__in=cable_ids).values_list(
        "cable_id", "end", "port_id", "port__name", "port__node__hostname", "port__card__slot"
    )
    ends: dict[int, dict[str, dict[str, Any]]] = {}
    for cable_id, end, port_id, name, hostname, slot in rows:
        ends.setdefault(cable_id, {})[end] = {
            "id": port_id,
            "name": name,
            "node": hostname,
            "card": f"{hostname}/{slot}" if slot is not None else None,
        }
    return ends


def power_feed_list() -> QuerySet[PowerFeed]:
    return PowerFeed.objects.select_related("site", "rack")


def psu_list() -> QuerySet[PSU]:
    return PSU.objects.select_related("node", "feed")


def power_lead_list() -> QuerySet[PowerLead]:
    return PowerLead.objects.select_related("psu", "card__node", "node")
