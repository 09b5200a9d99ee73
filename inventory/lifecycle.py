"""Card lifecycle: the one service that moves a card between states (ordered → received → burn-in →
accepted / rejected → in service → RMA → retired, see ``CARD_TRANSITIONS``), the history it keeps per
card and serial (who, when, from where to where, why) and the reads of that history.

Moves between nodes and owners go through ``card_save`` (inventory.services), which records them here.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils.translation import gettext as _

from inventory.choices import CARD_TRANSITIONS, CardStatus
from inventory.models import Card, CardEvent
from portal.models import AuditEntry
from portal.services import audit_record

MOVE_CARD = "inventory.move_card"
MAX_REASON = 500


def _who(user: Any) -> tuple[Any, str]:
    if getattr(user, "is_authenticated", False):
        return user, user.get_username()
    return None, "system"


def card_event_record(
    card: Card,
    *,
    user: Any,
    reason: str = "",
    from_status: str = "",
    from_node: str = "",
    from_owner: str = "",
) -> CardEvent:
    """Append one history step: the card as it is now (``to_*``), against what it was (``from_*``; empty
    for a new card, and ``from_status`` empty when only its place or owner changed)."""
    who, username = _who(user)
    return CardEvent.objects.create(
        card=card,
        serial=card.serial,
        user=who,
        username=username,
        from_status=from_status,
        to_status=card.status,
        from_node=from_node,
        to_node=card.node.hostname,
        from_owner=from_owner,
        to_owner=card.owner,
        reason=reason[:MAX_REASON],
    )


def allowed_transitions(status: str) -> list[str]:
    """The states a card in ``status`` may move to, in lifecycle order."""
    allowed = CARD_TRANSITIONS.get(status, frozenset())
    return [s for s in CardStatus.values if s in allowed]


@transaction.atomic
def card_transition(card: Card, *, to_status: str, user: Any, reason: str) -> Card:
    """Move ``card`` to ``to_status`` if the lifecycle allows it; records the step and re-evaluates the
    node's readiness (a rejected card makes it not ready). ``user`` None = Rackpilot itself (a burn-in
    verdict)."""
    if user is not None and not user.has_perm(MOVE_CARD):
        raise PermissionDenied(_("You may not change a card's lifecycle."))
    reason = (reason or "").strip()
    if not reason:
        raise ValidationError({"reason": [_("Say why the card changes state.")]})
    if len(reason) > MAX_REASON:
        raise ValidationError({"reason": [_("At most %(n)s characters.") % {"n": MAX_REASON}]})
    if to_status not in CardStatus.values:
        raise ValidationError({"to_status": [_("Unknown state %(s)s.") % {"s": to_status}]})
    locked = Card.objects.select_for_update().select_related("node").get(pk=card.pk)
    current = locked.status
    if to_status not in CARD_TRANSITIONS[current]:
        allowed = ", ".join(str(CardStatus(s).label) for s in allowed_transitions(current)) or _("none")
        raise ValidationError(
            {
                "to_status": [
                    _("A card that is %(from)s cannot become %(to)s (allowed: %(allowed)s).")
                    % {
                        "from": CardStatus(current).label,
                        "to": CardStatus(to_status).label,
                        "allowed": allowed,
                    }
                ]
            }
        )
    Card.objects.filter(pk=locked.pk).update(status=to_status)
    locked.status = to_status
    card_event_record(
        locked,
        user=user,
        reason=reason,
        from_status=current,
        from_node=locked.node.hostname,
        from_owner=locked.owner,
    )
    audit_record(
        user=user,
        action=AuditEntry.Action.UPDATE,
        instance=locked,
        before={"status": current},
        after={"status": to_status},
        message=reason,
    )
    from inventory.readiness import readiness_evaluate

    readiness_evaluate(locked.node, user=user)
    card.status = to_status
    return card


def card_event_list(card: Card) -> QuerySet[CardEvent]:
    """The card's history, newest first: its own events and, by serial, those of earlier rows of the same
    physical card (deleted and re-added, moved between clusters)."""
    q = Q(card=card)
    if card.serial:
        q |= Q(serial=card.serial)
    return CardEvent.objects.filter(q).select_related("user")
