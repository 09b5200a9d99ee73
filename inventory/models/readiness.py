"""Readiness: a per-node checklist (BIOS switches, enumeration, link width, cooling, versions)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from inventory.models.devices import Node


class ReadinessStatus(models.TextChoices):
    PASS = "pass", _("Pass")
    WARN = "warn", _("Warning")
    FAIL = "fail", _("Fail")
    UNKNOWN = "unknown", _("Unknown")


# Worst first when summarising: a failure outranks a warning, which outranks "not yet known".
STATUS_RANK = {
    ReadinessStatus.PASS: 0,
    ReadinessStatus.UNKNOWN: 1,
    ReadinessStatus.WARN: 2,
    ReadinessStatus.FAIL: 3,
}


class ReadinessKey(models.TextChoices):
    ABOVE_4G = "above_4g_decoding", _("Above 4G decoding enabled")
    RESIZABLE_BAR = "resizable_bar", _("Resizable BAR enabled")
    AER_OS_FIRST = "pcie_aer_os_first", _("PCIe AER in OS-first mode")
    DRIVER = "driver_version", _("Driver version recorded")
    FIRMWARE = "firmware_version", _("Firmware version recorded")
    CARDS_ENUMERATED = "cards_enumerated", _("Cards enumerated match the inventory")
    LINK_WIDTH = "pcie_link_width", _("PCIe link width")
    COOLING = "cooling", _("Cooling class against the chassis")
    CARD_LIFECYCLE = "card_lifecycle", _("Cards accepted for service")


MANUAL_KEYS = (
    ReadinessKey.ABOVE_4G,
    ReadinessKey.RESIZABLE_BAR,
    ReadinessKey.AER_OS_FIRST,
    ReadinessKey.DRIVER,
    ReadinessKey.FIRMWARE,
)
AUTO_KEYS = (
    ReadinessKey.CARDS_ENUMERATED,
    ReadinessKey.LINK_WIDTH,
    ReadinessKey.COOLING,
    ReadinessKey.CARD_LIFECYCLE,
)


class ReadinessCheck(models.Model):
    class Source(models.TextChoices):
        MANUAL = "manual", _("Set on the page")
        API = "api", _("Set through the API")
        AUTO = "auto", _("Derived by Rackpilot")

    node = models.ForeignKey(
        Node, verbose_name=_("node"), on_delete=models.CASCADE, related_name="readiness_checks"
    )
    key = models.CharField(_("check"), max_length=32, choices=ReadinessKey.choices)
    status = models.CharField(
        _("status"), max_length=8, choices=ReadinessStatus.choices, default=ReadinessStatus.UNKNOWN
    )
    detail = models.CharField(_("detail"), max_length=500, blank=True)
    source = models.CharField(_("source"), max_length=8, choices=Source.choices, default=Source.MANUAL)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        verbose_name=_("updated by"),
        on_delete=models.SET_NULL,
        related_name="+",
    )
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        verbose_name = _("readiness check")
        verbose_name_plural = _("readiness checks")
        ordering = ["node", "key"]
        constraints = [
            models.UniqueConstraint(
                fields=["node", "key"],
                name="readinesscheck_one_per_node_key",
                violation_error_message=_("This node already has this check."),
            )
        ]

    def __str__(self) -> str:
        return f"{self.node_id}:{self.key}={self.status}"


__all__ = ["MANUAL_KEYS", "AUTO_KEYS", "STATUS_RANK", "ReadinessCheck", "ReadinessKey", "ReadinessStatus"]
