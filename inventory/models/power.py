from __future__ import annotations

import math

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from inventory.choices import LEAD_DEFAULT_RATING_W, LeadKind, Phase
from inventory.models.devices import Card, Node
from inventory.models.sites import Rack, Site
from portal.models import ChangeLoggedModel


class PowerFeed(ChangeLoggedModel):
    """A circuit: volts × amps × maximum utilisation (× √3 for three-phase), as NetBox defines it."""

    name = models.CharField(_("name"), max_length=64)
    site = models.ForeignKey(
        Site, verbose_name=_("site"), on_delete=models.PROTECT, related_name="power_feeds"
    )
    rack = models.ForeignKey(
        Rack,
        null=True,
        blank=True,
        verbose_name=_("rack"),
        on_delete=models.SET_NULL,
        related_name="power_feeds",
    )
    voltage = models.PositiveIntegerField(_("voltage (V)"), default=230, validators=[MinValueValidator(1)])
    amperage = models.PositiveIntegerField(_("amperage (A)"), default=16, validators=[MinValueValidator(1)])
    phase = models.CharField(_("phase"), max_length=8, choices=Phase.choices, default=Phase.SINGLE)
    max_utilization_pct = models.PositiveSmallIntegerField(
        _("maximum utilisation (%)"), default=80, validators=[MinValueValidator(1), MaxValueValidator(100)]
    )
    description = models.CharField(_("description"), max_length=200, blank=True)

    class Meta:
        verbose_name = _("power feed")
        verbose_name_plural = _("power feeds")
        ordering = ["site__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["site", "name"], name="powerfeed_unique_name_per_site")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def available_power_w(self) -> int:
        watts = self.voltage * self.amperage * self.max_utilization_pct / 100
        if self.phase == Phase.THREE:
            watts *= math.sqrt(3)
        return int(watts)


class PSU(ChangeLoggedModel):
    """A power supply: a server's PSU or a mining supply sitting in the chassis."""

    name = models.CharField(_("name"), max_length=64)
    node = models.ForeignKey(
        Node, null=True, blank=True, verbose_name=_("node"), on_delete=models.CASCADE, related_name="psus"
    )
    feed = models.ForeignKey(
        PowerFeed,
        null=True,
        blank=True,
        verbose_name=_("power feed"),
        on_delete=models.SET_NULL,
        related_name="psus",
    )
    capacity_w = models.PositiveIntegerField(_("capacity (W)"), validators=[MinValueValidator(1)])
    efficiency_pct = models.PositiveSmallIntegerField(
        _("efficiency (%)"),
        default=90,
        validators=[MinValueValidator(50), MaxValueValidator(100)],
        help_text=_("Wall draw = DC load / efficiency."),
    )
    redundant = models.BooleanField(
        _("redundant"),
        default=False,
        help_text=_("Part of an N+1 pair: the budget assumes its twin may fail."),
    )
    model = models.CharField(_("model"), max_length=64, blank=True)

    class Meta:
        verbose_name = _("PSU")
        verbose_name_plural = _("PSUs")
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["node", "name"], condition=Q(node__isnull=False), name="psu_unique_name_per_node"
            )
        ]

    def __str__(self) -> str:
        return self.name


class PowerLead(ChangeLoggedModel):
    """A lead from a PSU connector to a card or node (a 12VHPWR card is fed by two 8-pin leads)."""

    psu = models.ForeignKey(PSU, verbose_name=_("PSU"), on_delete=models.CASCADE, related_name="leads")
    name = models.CharField(_("connector"), max_length=64)
    kind = models.CharField(_("kind"), max_length=16, choices=LeadKind.choices)
    rating_w = models.PositiveIntegerField(
        _("rating (W)"),
        null=True,
        blank=True,
        help_text=_("Empty: the standard rating of the connector kind."),
    )
    card = models.ForeignKey(
        Card,
        null=True,
        blank=True,
        verbose_name=_("card"),
        on_delete=models.SET_NULL,
        related_name="power_leads",
    )
    node = models.ForeignKey(
        Node,
        null=True,
        blank=True,
        verbose_name=_("node"),
        on_delete=models.SET_NULL,
        related_name="power_leads",
    )
    wire_gauge_awg = models.PositiveSmallIntegerField(_("wire gauge (AWG)"), null=True, blank=True)

    class Meta:
        verbose_name = _("power lead")
        verbose_name_plural = _("power leads")
        ordering = ["psu", "name"]
        constraints = [
            models.UniqueConstraint(fields=["psu", "name"], name="powerlead_unique_connector"),
            models.CheckConstraint(
                condition=Q(card__isnull=True) | Q(node__isnull=True),
                name="powerlead_one_load",
                violation_error_message=_("A lead powers a card or a node, not both."),
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def effective_rating_w(self) -> int:
        return self.rating_w or LEAD_DEFAULT_RATING_W.get(LeadKind(self.kind), 0)

    def clean(self) -> None:
        super().clean()
        if self.rating_w is not None and self.rating_w <= 0:
            raise ValidationError({"rating_w": _("A rating must be positive.")})
