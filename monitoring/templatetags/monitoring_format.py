"""Alerts and events as their reader reads them (``{% load monitoring_format %}``): see monitoring.messages."""

from __future__ import annotations

from typing import Any

from django import template

from monitoring import messages

register = template.Library()


@register.filter
def alert_text(alert: Any) -> str:
    return messages.alert_text(alert)


@register.filter
def alert_value(alert: Any) -> str:
    return messages.alert_value(alert)


@register.filter
def event_text(event: Any) -> str:
    return messages.event_message(event)


@register.inclusion_tag("live/alert_activity.html", takes_context=True)
def alert_activity(context: template.Context, node_id: int, card_id: int | None = None) -> dict[str, Any]:
    """The node's (or card's) alerts and events, for readers who may see alerts."""
    from monitoring.selectors import alert_activity as activity

    return activity(node_id=node_id, card_id=card_id, user=context.get("user"))
