"""Inventory writes. Each validates, writes in one transaction and leaves an audit entry."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from inventory.choices import CableStatus
from inventory.models import Cable, CableTermination, Card, Port
from portal.models import AuditEntry
from portal.services import audit_record, instance_save, integrity_error_as_validation, model_snapshot


@transaction.atomic
def card_save(card: Card, *, user: Any) -> Card:
    """Save a card; a new card gets the ports of its model's port templates."""
    creating = card._state.adding
    card = instance_save(card, user=user)
    if creating:
        Port.objects.bulk_create(
            Port(node_id=card.node_id, card=card, name=t.name, kind=t.kind, speed_gbps=t.speed_gbps)
            for t in card.card_model.port_templates.all()
        )
    elif Port.objects.filter(card=card).exclude(node_id=card.node_id).exists():
        Port.objects.filter(card=card).update(node_id=card.node_id)
    return card


def _check_ends(a_port: Port | None, b_port: Port | None, cable: Cable | None) -> None:
    errors: dict[str, list[str]] = {}
    if a_port is None:
        errors["a_port"] = [_("This field is required.")]
    if b_port is None:
        errors["b_port"] = [_("This field is required.")]
    if errors:
        raise ValidationError(errors)
    assert a_port is not None and b_port is not None
    if a_port.pk == b_port.pk:
        raise ValidationError({"b_port": [_("A cable cannot join a port to itself.")]})
    if a_port.card_id is not None and a_port.card_id == b_port.card_id:
        raise ValidationError({"b_port": [_("A cable cannot join two ports of the same card.")]})
    taken = {
        t.port_id: t.cable_id
        for t in CableTermination.objects.select_for_update().filter(port__in=[a_port, b_port])
        if cable is None or t.cable_id != cable.pk
    }
    for field, port in (("a_port", a_port), ("b_port", b_port)):
        if port.pk in taken:
            errors[field] = [
                _("Port %(port)s of %(node)s already carries cable #%(cable)s.")
                % {"port": port.name, "node": port.node.hostname, "cable": taken[port.pk]}
            ]
    if errors:
        raise ValidationError(errors)


@transaction.atomic
def cable_connect(*, a_port: Port, b_port: Port, user: Any, **attrs: Any) -> Cable:
    """Create a cable between two free ports."""
    _check_ends(a_port, b_port, None)
    cable = Cable(**attrs)
    cable.full_clean()
    cable.save()
    try:
        with transaction.atomic():
            CableTermination.objects.bulk_create(
                [
                    CableTermination(cable=cable, end="a", port=a_port, card_id=a_port.card_id),
                    CableTermination(cable=cable, end="b", port=b_port, card_id=b_port.card_id),
                ]
            )
    except IntegrityError as exc:
        raise integrity_error_as_validation(exc) from exc
    audit_record(
        user=user,
        action=AuditEntry.Action.CREATE,
        instance=cable,
        after={**model_snapshot(cable), "a_port": a_port.pk, "b_port": b_port.pk},
    )
    return cable


@transaction.atomic
def cable_update(
    cable: Cable, *, user: Any, a_port: Port | None = None, b_port: Port | None = None, **attrs: Any
) -> Cable:
    """Change a cable's attributes and, optionally, move its ends."""
    current = {t.end: t for t in cable.terminations.select_related("port")}
    new_a = a_port or (current["a"].port if "a" in current else None)
    new_b = b_port or (current["b"].port if "b" in current else None)
    _check_ends(new_a, new_b, cable)
    for key, value in attrs.items():
        setattr(cable, key, value)
    cable = instance_save(cable, user=user)
    assert new_a is not None and new_b is not None
    for end, port in (("a", new_a), ("b", new_b)):
        term = current.get(end)
        if term is None:
            CableTermination.objects.create(cable=cable, end=end, port=port, card_id=port.card_id)
        elif term.port_id != port.pk:
            term.port, term.card_id = port, port.card_id
            try:
                with transaction.atomic():
                    term.save()
            except IntegrityError as exc:
                raise integrity_error_as_validation(exc) from exc
    return cable


@transaction.atomic
def cable_mark_faulty(cable: Cable, *, user: Any, reason: str) -> Cable:
    """Mark a cable faulty (the fabric check flags it until someone replaces it and sets it
    connected again), with ``reason`` in the audit log. Marking a faulty cable again changes nothing."""
    cable = Cable.objects.select_for_update().get(pk=cable.pk)
    if cable.status == CableStatus.FAULTY:
        return cable
    before = cable.status
    cable.status = CableStatus.FAULTY
    cable.save(update_fields=["status", "last_updated"])
    audit_record(
        user=user,
        action=AuditEntry.Action.UPDATE,
        instance=cable,
        before={"status": before},
        after={"status": cable.status},
        message=reason[:500],
    )
    return cable
