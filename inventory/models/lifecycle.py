"""A card's history: every lifecycle transition and every move between nodes and owners."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from inventory.choices import CardStatus
from inventory.models.devices import Card


class CardEvent(models.Model):
    """One step of a card's life. Kept by serial too, so the history outlives the card's row."""

    card = models.ForeignKey(
        Card, null=True, blank=True, verbose_name=_("card"), on_delete=models.SET_NULL, related_name="events"
    )
    serial = models.CharField(_("serial"), max_length=64, blank=True, db_index=True)
    at = models.DateTimeField(_("when"), default=timezone.now, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    username = models.CharField(_("who"), max_length=150, blank=True)
    from_status = models.CharField(_("from"), max_length=16, choices=CardStatus.choices, blank=True)
    to_status = models.CharField(_("to"), max_length=16, choices=CardStatus.choices, blank=True)
    from_node = models.CharField(_("from node"), max_length=63, blank=True)
    to_node = models.CharField(_("to node"), max_length=63, blank=True)
    from_owner = models.CharField(_("from owner"), max_length=100, blank=True)
    to_owner = models.CharField(_("to owner"), max_length=100, blank=True)
    reason = models.CharField(_("why"), max_length=500, blank=True)

    class Meta:
        verbose_name = _("card event")
        verbose_name_plural = _("card events")
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["card", "-at"])]

    def __str__(self) -> str:
        return f"{self.serial or self.card_id} {self.from_status or '-'} -> {self.to_status or '-'}"
