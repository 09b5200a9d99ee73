"""Fabric writes: save a fabric with its members, create a cable plan. Each in one transaction, audited."""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from inventory.choices import CableStatus
from inventory.models import Cable, CableTermination, Card, Fabric, FabricMember, MemberRole, Node, Port
from inventory.services import cable_connect
from inventory.topology.data import fabric_data
from inventory.topology.plan import Plan, plan
from portal.models import AuditEntry
from portal.services import audit_record, instance_save, integrity_error_as_validation


@dataclass(frozen=True)
class MemberInput:
    card: Card | None = None
    node: Node | None = None
    label: str = ""
    role: str = ""


def default_labels(count: int) -> list[str]:
    letters = string.ascii_uppercase
    if count <= len(letters):
        return list(letters[:count])
    return [f"C{i + 1}" for i in range(count)]


@transaction.atomic
def fabric_save(fabric: Fabric, *, user: Any, members: Sequence[MemberInput] | None = None) -> Fabric:
    """Save a fabric; when `members` is given it replaces the member list (order = position).

    Labels default to A, B, C … (C1, C2 … past 26); roles default to card for cards and host for nodes.
    """
    fabric = instance_save(fabric, user=user)
    if members is None:
        return fabric
    labels = default_labels(len(members))
    rows: list[FabricMember] = []
    errors: list[str] = []
    for i, m in enumerate(members):
        if (m.card is None) == (m.node is None):
            errors.append(_("Member %(n)s: give a card or a node.") % {"n": i + 1})
            continue
        role = m.role or (MemberRole.CARD if m.card is not None else MemberRole.HOST)
        if role not in MemberRole.values:
            errors.append(_("Member %(n)s: unknown role %(role)s.") % {"n": i + 1, "role": role})
            continue
        rows.append(
            FabricMember(
                fabric=fabric, card=m.card, node=m.node, position=i, label=m.label or labels[i], role=role
            )
        )
    seen: dict[str, int] = {}
    for row in rows:
        seen[row.label] = seen.get(row.label, 0) + 1
    errors += [_("Label %(label)s is used twice.") % {"label": k} for k, v in seen.items() if v > 1]
    keys = [("c", r.card_id) if r.card_id else ("n", r.node_id) for r in rows]
    if len(set(keys)) != len(keys):
        errors.append(_("A card or node is listed twice."))
    if errors:
        raise ValidationError({"members": errors})
    before = list(fabric.members.values_list("label", "card_id", "node_id", "role"))
    fabric.members.all().delete()
    try:
        with transaction.atomic():
            FabricMember.objects.bulk_create(rows)
    except IntegrityError as exc:
        raise integrity_error_as_validation(exc) from exc
    after = [(r.label, r.card_id, r.node_id, r.role) for r in rows]
    if before != after:
        audit_record(
            user=user,
            action=AuditEntry.Action.UPDATE,
            instance=fabric,
            before={"members": [list(x) for x in before]},
            after={"members": [list(x) for x in after]},
            message="fabric members",
        )
    return fabric


@transaction.atomic
def fabric_plan_create(fabric: Fabric, *, user: Any) -> list[Cable]:
    """Create the fabric's missing template links as planned cables: all of them, or none.

    Raises ValidationError({"ports": [...]}) naming every port that is taken or missing.
    """
    # Lock the member ports' terminations so that two plans (or a plan and a manual cable) cannot interleave.
    Fabric.objects.select_for_update().filter(pk=fabric.pk).first()
    result: Plan = plan(fabric_data(fabric))
    if not result.ok:
        raise ValidationError(
            {"ports": [f"{where}: {msg}" if where else msg for where, msg in result.errors]}
        )
    created: list[Cable] = []
    port_ids = [pid for link in result.links for pid in (link.a.id, link.b.id)]
    ports = Port.objects.in_bulk(port_ids)
    taken = set(
        CableTermination.objects.select_for_update()
        .filter(port_id__in=port_ids)
        .values_list("port_id", flat=True)
    )
    if taken:
        raise ValidationError(
            {"ports": [_("%(port)s is already cabled.") % {"port": ports[p]} for p in sorted(taken)]}
        )
    for link in result.links:
        created.append(
            cable_connect(
                a_port=ports[link.a.id],
                b_port=ports[link.b.id],
                user=user,
                kind=link.kind,
                status=CableStatus.PLANNED,
                label=link.label,
                description=_("Planned for fabric %(fabric)s") % {"fabric": fabric.name},
            )
        )
    audit_record(
        user=user,
        action=AuditEntry.Action.UPDATE,
        instance=fabric,
        message=f"cable plan created: {len(created)} planned cables",
    )
    return created
