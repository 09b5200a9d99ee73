"""Context for the live panels that inventory's pages include (rack thermal map, node charts)."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.simple_tag(takes_context=True)
def rack_thermal(context: template.Context, rack_id: int) -> list[Any]:
    from monitoring.overview import node_thermal_list

    return node_thermal_list(rack_id=rack_id)


@register.simple_tag(takes_context=True)
def node_live(context: template.Context, node_id: int) -> dict[str, Any]:
    from inventory.live import node_activity_context
    from monitoring.overview import CHART_METRICS, node_latest_points, node_thermal_list

    thermal = node_thermal_list(node_ids=[node_id])
    user = context.get("user")
    cards = [{"id": c.card.pk, "label": c.card.slot} for c in (thermal[0].cards if thermal else [])]
    return {
        "t": thermal[0] if thermal else None,
        "points": node_latest_points(node_id),
        "cards": cards,
        "metrics": CHART_METRICS,
        **node_activity_context(node_id, user),
    }
