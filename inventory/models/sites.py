from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from portal.models import ChangeLoggedModel

slug_validator = RegexValidator(r"^[a-z0-9][a-z0-9-]*$", _("Lowercase letters, digits and dashes only."))


class Site(ChangeLoggedModel):
    """A building, room or corner of an office where hardware stands."""

    name = models.CharField(_("name"), max_length=100, unique=True)
    description = models.TextField(_("description"), blank=True)
    address = models.CharField(_("address"), max_length=200, blank=True)

    class Meta:
        verbose_name = _("site")
        verbose_name_plural = _("sites")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Cluster(ChangeLoggedModel):
    """A Slurm cluster the portal manages, and how its workers reach it."""

    class Backend(models.TextChoices):
        SLURM_SSH = "slurm-ssh", _("Slurm over SSH")
        SIMULATOR = "simulator", _("Simulator (demo)")

    name = models.CharField(_("name"), max_length=64, unique=True, validators=[slug_validator])
    description = models.TextField(_("description"), blank=True)
    site = models.ForeignKey(
        Site,
        null=True,
        blank=True,
        verbose_name=_("site"),
        on_delete=models.SET_NULL,
        related_name="clusters",
    )
    backend = models.CharField(
        _("backend"), max_length=16, choices=Backend.choices, default=Backend.SLURM_SSH
    )
    ssh_host = models.CharField(_("login host"), max_length=255, blank=True)
    ssh_port = models.PositiveIntegerField(
        _("SSH port"), default=22, validators=[MinValueValidator(1), MaxValueValidator(65535)]
    )
    ssh_user = models.CharField(_("service account"), max_length=64, blank=True)
    ssh_host_key = models.TextField(
        _("pinned host key"),
        blank=True,
        help_text=_("The login host's public key line, e.g. 'ssh-ed25519 AAAA…'."),
    )
    ssh_key_path = models.CharField(
        _("private key path"),
        max_length=255,
        blank=True,
        help_text=_(
            "Path of the service account's private key on the workers; the key never enters the database."
        ),
    )
    slurm_conf = models.CharField(_("SLURM_CONF on the login host"), max_length=255, blank=True)
    # Sync status: a cluster that cannot be reached is shown stale, never silently fine.
    last_sync_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_sync_ok_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_sync_error = models.TextField(blank=True, editable=False)
    #: first failed sync of the current outage (None while syncs succeed): "Slurm unreachable since …"
    sync_failing_since = models.DateTimeField(null=True, blank=True, editable=False)
    #: Slurm's warnings of the last successful sync, one a line (shown; they are not errors)
    last_sync_warnings = models.TextField(blank=True, editable=False)

    class Meta:
        verbose_name = _("cluster")
        verbose_name_plural = _("clusters")
        ordering = ["name"]
        permissions = [
            (
                "see_infrastructure",
                _("Can see how the portal reaches the hardware (SSH hosts, accounts, keys, BMC addresses)"),
            )
        ]

    def __str__(self) -> str:
        return self.name


class Rack(ChangeLoggedModel):
    name = models.CharField(_("name"), max_length=64)
    site = models.ForeignKey(Site, verbose_name=_("site"), on_delete=models.PROTECT, related_name="racks")
    u_height = models.PositiveSmallIntegerField(
        _("height (U)"), default=42, validators=[MinValueValidator(1), MaxValueValidator(100)]
    )
    description = models.TextField(_("description"), blank=True)

    class Meta:
        verbose_name = _("rack")
        verbose_name_plural = _("racks")
        ordering = ["site__name", "name"]
        constraints = [models.UniqueConstraint(fields=["site", "name"], name="rack_unique_name_per_site")]

    def __str__(self) -> str:
        return self.name
