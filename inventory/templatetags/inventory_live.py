"""Context for the live panels that inventory's pages include (rack thermal map, node and card charts)."""

from __future__ import annotations

from typing import Any

from django import template
from django.conf import settings
from django.utils.translation import gettext

register = template.Library()


@register.simple_tag(takes_context=True)
def rack_thermal(context: template.Context, rack_id: int) -> list[Any]:
    from monitoring.overview import node_thermal_list

    return node_thermal_list(rack_id=rack_id)


@register.simple_tag(takes_context=True)
def node_live(context: template.Context, node_id: int) -> dict[str, Any]:
    from inventory.live import node_activity_context
    from monitoring.overview import chart_metrics, node_latest_points, node_thermal_list

    thermal = node_thermal_list(node_ids=[node_id])
    user = context.get("user")
    cards = [{"id": c.card.pk, "label": c.card.slot} for c in (thermal[0].cards if thermal else [])]
    return {
        "t": thermal[0] if thermal else None,
        "points": node_latest_points(node_id),
        "cards": cards,
        "metrics": chart_metrics(node_id=node_id),
        "chart_labels": chart_labels(),
        **node_activity_context(node_id, user),
    }


def chart_labels() -> dict[str, Any]:
    """The charts' translated titles, axis units and messages (live.js reads them from data-labels)."""
    from monitoring.overview import CARD_POWER, TEMPERATURE, UTILISATION

    return {
        TEMPERATURE: {"title": gettext("Temperature"), "unit": "°C"},
        CARD_POWER: {"title": gettext("Card power"), "unit": "W"},
        UTILISATION: {"title": gettext("Utilisation"), "unit": "%"},
        "time": gettext("Time"),
        "time_zone": settings.TIME_ZONE,
        "no_data": gettext("No data in this time range."),
    }


@register.simple_tag
def card_charts(card: Any) -> dict[str, Any]:
    """One card's telemetry charts on its own page (history from the series endpoint)."""
    from monitoring.overview import chart_metrics

    return {
        "node": card.node_id,
        "card": card.pk,
        "cards": [{"id": card.pk, "label": card.slot}],
        "metrics": chart_metrics(node_id=card.node_id, card_id=card.pk),
        "chart_labels": chart_labels(),
    }
