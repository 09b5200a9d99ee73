"""A fabric: the cards (or nodes and switches) that one interconnect joins, and its intended layout."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from inventory.models.devices import Card, Node
from inventory.models.sites import Cluster
from portal.models import ChangeLoggedModel


class FabricTemplate(models.TextChoices):
    MESH4 = "mesh4", _("4-card full mesh (the guide's 6-cable port map)")
    BH_1X2 = "bh-1x2", _("Blackhole 1×2 mesh (1 cable)")
    BH_2X2 = "bh-2x2", _("Blackhole ring of four / 2×2 mesh (8 cables)")
    BH_2X4 = "bh-2x4", _("Blackhole 2×4 mesh (10 cables; rows × cols grid)")
    RING = "ring", _("N-card ring")
    STAR = "star", _("Star / leaf-spine around switches")


class MemberRole(models.TextChoices):
    CARD = "card", _("Card")
    HOST = "host", _("Host")
    SWITCH = "switch", _("Switch (leaf)")
    SPINE = "spine", _("Spine switch")


class Fabric(ChangeLoggedModel):
    name = models.CharField(_("name"), max_length=64, unique=True)
    cluster = models.ForeignKey(
        Cluster,
        null=True,
        blank=True,
        verbose_name=_("cluster"),
        on_delete=models.SET_NULL,
        related_name="fabrics",
    )
    template = models.CharField(_("template"), max_length=16, choices=FabricTemplate.choices)
    params = models.JSONField(
        _("parameters"),
        default=dict,
        blank=True,
        help_text=_(
            'Template parameters, e.g. {"lanes": 2} for a ring, {"rows": 2, "cols": 4}, '
            '{"oversubscription": 2} for a leaf-spine.'
        ),
    )
    description = models.CharField(_("description"), max_length=200, blank=True)

    class Meta:
        verbose_name = _("fabric")
        verbose_name_plural = _("fabrics")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        super().clean()
        if not isinstance(self.params, dict):
            raise ValidationError({"params": _("Parameters must be a JSON object.")})
        for key in ("lanes", "rows", "cols", "uplinks"):
            value: Any = self.params.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValidationError(
                    {"params": _("%(key)s must be a positive whole number.") % {"key": key}}
                )
        links = self.params.get("host_links")
        counts = list(links.values()) if isinstance(links, dict) else [links]
        if links is not None and any(not isinstance(c, int) or isinstance(c, bool) or c < 1 for c in counts):
            raise ValidationError(
                {"params": _("host_links must be a positive whole number, or an object of member to one.")}
            )
        ratio = self.params.get("oversubscription")
        if ratio is not None and (
            isinstance(ratio, bool) or not isinstance(ratio, int | float) or ratio <= 0
        ):
            raise ValidationError({"params": _("oversubscription must be a positive number.")})


class FabricMember(models.Model):
    """One card, or one node (a host's NIC ports, a switch's ports), in a fabric, at a position with a label."""

    fabric = models.ForeignKey(
        Fabric, verbose_name=_("fabric"), on_delete=models.CASCADE, related_name="members"
    )
    card = models.ForeignKey(
        Card,
        null=True,
        blank=True,
        verbose_name=_("card"),
        on_delete=models.CASCADE,
        related_name="fabric_memberships",
    )
    node = models.ForeignKey(
        Node,
        null=True,
        blank=True,
        verbose_name=_("node"),
        on_delete=models.CASCADE,
        related_name="fabric_memberships",
    )
    position = models.PositiveIntegerField(_("position"))
    label = models.CharField(_("label"), max_length=32)
    role = models.CharField(_("role"), max_length=8, choices=MemberRole.choices, default=MemberRole.CARD)

    class Meta:
        verbose_name = _("fabric member")
        verbose_name_plural = _("fabric members")
        ordering = ["fabric", "position"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(card__isnull=False) & Q(node__isnull=True))
                | (Q(card__isnull=True) & Q(node__isnull=False)),
                name="fabricmember_card_xor_node",
                violation_error_message=_("A member is a card or a node, not both."),
            ),
            models.UniqueConstraint(fields=["fabric", "position"], name="fabricmember_unique_position"),
            models.UniqueConstraint(
                fields=["fabric", "label"],
                name="fabricmember_unique_label",
                violation_error_message=_("Another member of this fabric has this label."),
            ),
            models.UniqueConstraint(
                fields=["fabric", "card"],
                condition=Q(card__isnull=False),
                name="fabricmember_unique_card",
                violation_error_message=_("This card is already a member of this fabric."),
            ),
            models.UniqueConstraint(
                fields=["fabric", "node"],
                condition=Q(node__isnull=False),
                name="fabricmember_unique_node",
                violation_error_message=_("This node is already a member of this fabric."),
            ),
        ]

    def __str__(self) -> str:
        return self.label


__all__ = ["Fabric", "FabricMember", "FabricTemplate", "MemberRole"]
