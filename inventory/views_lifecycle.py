"""A card's lifecycle on its page: the transition form, the history, the acceptance record of its latest
burn-in (with evidence charts and a printable page) and its economics."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from inventory import selectors
from inventory.economics import card_economics
from inventory.forms import CardTransitionForm
from inventory.lifecycle import MOVE_CARD, allowed_transitions, card_event_list, card_transition
from inventory.models import Card
from portal.views.generic import _add_errors, redirect_after_post

HISTORY_ROWS = 50


def acceptance_context(card: Card) -> dict[str, Any]:
    from jobs.burnin.selectors import burnin_result_latest, criterion_rows, evidence_charts

    result = burnin_result_latest(card)
    return {
        "result": result,
        "criteria": criterion_rows(result) if result is not None else [],
        "charts": evidence_charts(result) if result is not None else [],
        "economics": card_economics(card),
    }


def card_lifecycle_context(card: Card, user: Any, form: CardTransitionForm | None = None) -> dict[str, Any]:
    allowed = allowed_transitions(card.status)
    can_move = bool(allowed) and user.has_perm(MOVE_CARD)
    return {
        "events": card_event_list(card)[:HISTORY_ROWS],
        "transition_form": form or (CardTransitionForm(allowed=allowed) if can_move else None),
        **acceptance_context(card),
    }


@login_required
@require_POST
@permission_required(MOVE_CARD, raise_exception=True)
def card_transition_view(request: HttpRequest, pk: int) -> HttpResponse:
    card = get_object_or_404(selectors.card_list(), pk=pk)
    form = CardTransitionForm(request.POST, allowed=allowed_transitions(card.status))
    if form.is_valid():
        try:
            card_transition(
                card,
                to_status=form.cleaned_data["to_status"],
                user=request.user,
                reason=form.cleaned_data["reason"],
            )
        except ValidationError as exc:
            _add_errors(form, exc)
        else:
            messages.success(
                request, _("%(card)s is now %(state)s.") % {"card": card, "state": card.get_status_display()}
            )
            return redirect_after_post(request, reverse("inventory:card", args=[card.pk]))
    context = {"object": card, **card_lifecycle_context(card, request.user, form)}
    return render(request, "inventory/card.html#lifecycle", context, status=400)


@login_required
@permission_required("inventory.view_card", raise_exception=True)
def card_acceptance_view(request: HttpRequest, pk: int) -> HttpResponse:
    """The acceptance record on a page of its own, laid out for printing."""
    card = get_object_or_404(selectors.card_list(), pk=pk)
    context = {
        "object": card,
        "title": _("Acceptance record of %(card)s") % {"card": card},
        "events": card_event_list(card)[:HISTORY_ROWS],
        **acceptance_context(card),
    }
    return render(request, "inventory/card_acceptance.html", context)
