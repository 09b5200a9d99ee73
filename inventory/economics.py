"""What a card costs and returns: purchase cost, energy and cost per GPU-hour so far, peak TFLOPS per
dollar, and its node against a packaged system of the same cards (the guide's $6,000 four-card rig
against a $12,000 packaged one)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.utils import timezone

from inventory.choices import CARD_NOT_INSTALLED, CardStatus
from inventory.lifecycle import card_event_list
from inventory.models import Card, CardModel


def in_service_hours(card: Card, *, now: dt.datetime | None = None) -> float:
    """Hours the card has spent in service, from its history."""
    now = now or timezone.now()
    hours, since = 0.0, None
    for event in reversed(list(card_event_list(card).filter(card=card))):
        if event.to_status == CardStatus.IN_SERVICE and since is None:
            since = event.at
        elif event.to_status != CardStatus.IN_SERVICE and since is not None:
            hours += (event.at - since).total_seconds() / 3600
            since = None
    if since is not None:
        hours += (now - since).total_seconds() / 3600
    return hours


def _per_dollar(tflops: Decimal | None, cost: Decimal) -> float | None:
    if tflops is None or cost <= 0:
        return None
    return float(tflops) / float(cost)


def peak_tflops(model: CardModel) -> Decimal | None:
    """The figure compared across vendors: FP16/BF16 (every model has it), else FP8."""
    return model.tflops_fp16 if model.tflops_fp16 is not None else model.tflops_fp8


def card_economics(card: Card, *, now: dt.datetime | None = None) -> dict[str, Any]:
    from monitoring.selectors import card_energy_kwh

    model = card.card_model
    cost = card.cost
    kwh = card_energy_kwh([card.pk], now=now).get(card.pk, 0.0)
    tariff = Decimal(str(settings.PORTAL_ENERGY_TARIFF_PER_KWH))
    energy_cost = Decimal(str(round(kwh, 6))) * tariff
    hours = in_service_hours(card, now=now)
    per_hour = (cost + energy_cost) / Decimal(str(hours)) if hours >= 1 else None
    node = card.node
    cards = [c for c in node.cards.select_related("card_model") if c.status not in CARD_NOT_INSTALLED]
    node_cost = node.purchase_cost + sum((c.cost for c in cards), Decimal("0"))
    node_tflops: Decimal = sum((peak_tflops(c.card_model) or Decimal("0") for c in cards), Decimal("0"))
    packaged, packaged_per_dollar = None, None
    peak = peak_tflops(model)
    if model.packaged_system_price and model.packaged_system_cards and peak is not None:
        tflops = peak * model.packaged_system_cards
        packaged_per_dollar = _per_dollar(tflops, model.packaged_system_price)
        packaged = {
            "name": model.packaged_system,
            "price": model.packaged_system_price,
            "cards": model.packaged_system_cards,
            "tflops": tflops,
            "tflops_per_dollar": packaged_per_dollar,
        }
    node_per_dollar = _per_dollar(node_tflops, node_cost) if node_tflops else None
    return {
        "cost": cost,
        "cost_is_list_price": card.purchase_cost is None,
        "energy_kwh": kwh,
        "energy_cost": energy_cost,
        "in_service_hours": hours,
        "cost_per_gpu_hour": per_hour,
        "tflops_fp16_per_dollar": _per_dollar(model.tflops_fp16, cost),
        "tflops_fp8_per_dollar": _per_dollar(model.tflops_fp8, cost),
        "node": {
            "hostname": node.hostname,
            "cards": len(cards),
            "cost": node_cost,
            "tflops": node_tflops,
            "tflops_per_dollar": node_per_dollar,
        },
        "packaged": packaged,
        "advantage": node_per_dollar / packaged_per_dollar
        if node_per_dollar and packaged_per_dollar
        else None,
    }
