from __future__ import annotations

from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from inventory.choices import (
    Airflow,
    BMCKind,
    CableKind,
    CableStatus,
    CardStatus,
    Cooling,
    LeadKind,
    NodeRole,
    NodeStatus,
    PortKind,
)
from inventory.models.sites import Cluster, Rack
from portal.fields import EncryptedTextField
from portal.models import ChangeLoggedModel

hostname_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$", _("A host name: letters, digits, dots and dashes.")
)
slurm_name_validator = RegexValidator(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$", _("A Slurm node name."))
pci_bus_id_validator = RegexValidator(
    r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$", _("A PCI bus id such as 0000:3b:00.0.")
)
gpu_uuid_validator = RegexValidator(r"^(GPU|MIG)-[0-9a-fA-F-]{8,}$", _("A GPU UUID such as GPU-5e1f0c2a-…."))


#: Ethernet channel numbers a card can report (Wormhole has 16 cores, Blackhole 14; room to spare)
MAX_ETH_CHANNEL = 63


def eth_channels_validator(value: object) -> None:
    """A list of distinct channel numbers 0..63."""
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ValidationError(_("A list of channel numbers, e.g. [0, 1]."))
    if any(v < 0 or v > MAX_ETH_CHANNEL for v in value):
        raise ValidationError(_("Channel numbers run from 0 to %(max)s.") % {"max": MAX_ETH_CHANNEL})
    if len(set(value)) != len(value):
        raise ValidationError(_("Each channel once."))


def normalise_bus_id(value: str) -> str:
    """`00000000:3B:00.0` (nvidia-smi) and `0000:3b:00.0` (lspci, tt-smi) -> `0000:3b:00.0`."""
    value = value.strip().lower()
    if not value:
        return value
    domain, _sep, rest = value.partition(":")
    if rest and len(domain) == 8:
        domain = domain[4:]
    return f"{domain}:{rest}" if rest else value


class ChassisModel(ChangeLoggedModel):
    """A kind of box: a converted Antminer S9, a Dell R720, a DGX H100, a GB10 desk unit."""

    manufacturer = models.CharField(_("manufacturer"), max_length=64)
    name = models.CharField(_("model"), max_length=64)
    u_height = models.PositiveSmallIntegerField(
        _("height (U)"), default=1, validators=[MaxValueValidator(50)]
    )
    airflow = models.CharField(_("airflow"), max_length=16, choices=Airflow.choices, default=Airflow.STANDARD)
    base_power_w = models.PositiveIntegerField(
        _("host base load (W)"),
        default=0,
        help_text=_("Nameplate draw of the host without its accelerator cards."),
    )
    card_slots = models.PositiveSmallIntegerField(_("card slots"), default=0)
    pcie_lanes_per_slot = models.PositiveSmallIntegerField(
        _("PCIe lanes per slot"), default=16, help_text=_("1 for a mining board's x1 risers.")
    )

    class Meta:
        verbose_name = _("chassis model")
        verbose_name_plural = _("chassis models")
        ordering = ["manufacturer", "name"]
        constraints = [models.UniqueConstraint(fields=["manufacturer", "name"], name="chassis_unique_model")]

    def __str__(self) -> str:
        return f"{self.manufacturer} {self.name}"


class Node(ChangeLoggedModel):
    hostname = models.CharField(_("hostname"), max_length=63, unique=True, validators=[hostname_validator])
    cluster = models.ForeignKey(
        Cluster,
        null=True,
        blank=True,
        verbose_name=_("cluster"),
        on_delete=models.PROTECT,
        related_name="nodes",
    )
    role = models.CharField(_("role"), max_length=16, choices=NodeRole.choices, default=NodeRole.COMPUTE)
    chassis = models.ForeignKey(
        ChassisModel,
        null=True,
        blank=True,
        verbose_name=_("chassis"),
        on_delete=models.PROTECT,
        related_name="nodes",
    )
    status = models.CharField(
        _("status"), max_length=16, choices=NodeStatus.choices, default=NodeStatus.ACTIVE
    )
    rack = models.ForeignKey(
        Rack, null=True, blank=True, verbose_name=_("rack"), on_delete=models.PROTECT, related_name="nodes"
    )
    position = models.PositiveSmallIntegerField(
        _("position (lowest U)"), null=True, blank=True, validators=[MinValueValidator(1)]
    )
    u_height = models.PositiveSmallIntegerField(
        _("height (U)"), default=1, validators=[MinValueValidator(1), MaxValueValidator(50)]
    )
    slurm_name = models.CharField(
        _("Slurm node name"), max_length=63, blank=True, validators=[slurm_name_validator]
    )
    bmc_kind = models.CharField(_("BMC kind"), max_length=8, choices=BMCKind.choices, default=BMCKind.NONE)
    bmc_address = models.CharField(_("BMC address"), max_length=255, blank=True)
    bmc_username = models.CharField(_("BMC username"), max_length=64, blank=True)
    bmc_password = EncryptedTextField(_("BMC password"), blank=True)
    purchase_cost = models.DecimalField(
        _("purchase cost (USD)"),
        max_digits=12,
        decimal_places=2,
        default=Decimal("0"),
        validators=[MinValueValidator(Decimal("0"))],
    )
    purchase_date = models.DateField(_("purchase date"), null=True, blank=True)
    base_power_w = models.PositiveIntegerField(
        _("host base load override (W)"),
        null=True,
        blank=True,
        help_text=_("Leave empty to use the chassis model's figure."),
    )
    notes = models.TextField(_("notes"), blank=True)
    # Written by the Slurm sync (jobs app), shown everywhere.
    slurm_state = models.CharField(_("Slurm state"), max_length=32, blank=True, editable=False)
    slurm_reason = models.CharField(_("Slurm reason"), max_length=255, blank=True, editable=False)
    slurm_state_since = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        verbose_name = _("node")
        verbose_name_plural = _("nodes")
        ordering = ["hostname"]
        constraints = [
            models.CheckConstraint(
                condition=Q(position__isnull=True) | Q(rack__isnull=False),
                name="node_position_needs_rack",
                violation_error_message=_("A rack position needs a rack."),
            ),
            models.UniqueConstraint(
                fields=["cluster", "slurm_name"],
                condition=~Q(slurm_name=""),
                name="node_unique_slurm_name",
                violation_error_message=_("Another node of this cluster has this Slurm node name."),
            ),
        ]
        # The no-overlap rule is also a PostgreSQL exclusion constraint (migration 0002).

    def __str__(self) -> str:
        return self.hostname

    @property
    def effective_slurm_name(self) -> str:
        return self.slurm_name or self.hostname.split(".")[0]

    def clean(self) -> None:
        super().clean()
        if self.position is None or self.rack_id is None:
            return
        rack = self.rack
        assert rack is not None
        top = self.position + self.u_height - 1
        if top > rack.u_height:
            raise ValidationError(
                {
                    "position": _("U%(pos)s-U%(top)s does not fit in %(rack)s (%(h)sU).")
                    % {"pos": self.position, "top": top, "rack": rack.name, "h": rack.u_height}
                }
            )
        clash = (
            Node.objects.filter(rack_id=self.rack_id, position__isnull=False)
            .exclude(pk=self.pk)
            .filter(position__lte=top)
            .extra(where=["position + u_height - 1 >= %s"], params=[self.position])  # noqa: S610
            .first()
        )
        if clash is not None:
            raise ValidationError(
                {
                    "position": _("U%(pos)s-U%(top)s overlaps %(other)s (U%(opos)s-U%(otop)s).")
                    % {
                        "pos": self.position,
                        "top": top,
                        "other": clash.hostname,
                        "opos": clash.position,
                        "otop": (clash.position or 0) + clash.u_height - 1,
                    }
                }
            )


class CardModel(ChangeLoggedModel):
    """An accelerator model with its figures: Blackhole p150a, H100 SXM 80GB, GB10 …"""

    vendor = models.CharField(_("vendor"), max_length=64)
    name = models.CharField(_("model"), max_length=64)
    memory_gb = models.PositiveIntegerField(_("memory (GB)"), default=0)
    memory_type = models.CharField(_("memory type"), max_length=16, blank=True)
    tflops_fp8 = models.DecimalField(
        _("peak TFLOPS FP8"), max_digits=8, decimal_places=1, null=True, blank=True
    )
    tflops_fp16 = models.DecimalField(
        _("peak TFLOPS FP16/BF16"), max_digits=8, decimal_places=1, null=True, blank=True
    )
    tflops_fp32 = models.DecimalField(
        _("peak TFLOPS FP32"), max_digits=8, decimal_places=1, null=True, blank=True
    )
    tdp_w = models.PositiveIntegerField(_("TDP (W)"))
    list_price = models.DecimalField(
        _("list price (USD)"),
        max_digits=12,
        decimal_places=2,
        default=Decimal("0"),
        validators=[MinValueValidator(Decimal("0"))],
    )
    cooling = models.CharField(_("cooling"), max_length=16, choices=Cooling.choices, default=Cooling.ACTIVE)
    min_airflow = models.CharField(
        _("minimum chassis airflow"),
        max_length=16,
        choices=Airflow.choices,
        default=Airflow.LIMITED,
        help_text=_("The least airflow the card is rated for; readiness warns below it."),
    )
    power_connector = models.CharField(
        _("power connector"), max_length=16, choices=LeadKind.choices, blank=True
    )
    pcie_lanes = models.PositiveSmallIntegerField(_("PCIe lanes"), default=16)

    class Meta:
        verbose_name = _("card model")
        verbose_name_plural = _("card models")
        ordering = ["vendor", "name"]
        constraints = [models.UniqueConstraint(fields=["vendor", "name"], name="cardmodel_unique_name")]

    def __str__(self) -> str:
        return f"{self.vendor} {self.name}"


class PortTemplate(models.Model):
    """The ports every card of a model has; a new card gets them as real ports."""

    card_model = models.ForeignKey(
        CardModel, verbose_name=_("card model"), on_delete=models.CASCADE, related_name="port_templates"
    )
    name = models.CharField(_("name"), max_length=32)
    kind = models.CharField(_("kind"), max_length=16, choices=PortKind.choices)
    speed_gbps = models.PositiveIntegerField(_("speed (Gbit/s)"))
    eth_channels = models.JSONField(
        _("Ethernet channels"),
        default=list,
        blank=True,
        validators=[eth_channels_validator],
        help_text=_(
            "The card's Ethernet channels (cores) wired to this port, as tt-smi and the kernel number "
            "them, e.g. [0, 1]: link telemetry and link events of these channels land on this port and "
            "its cable."
        ),
    )

    class Meta:
        verbose_name = _("port template")
        verbose_name_plural = _("port templates")
        ordering = ["card_model", "name"]
        constraints = [
            models.UniqueConstraint(fields=["card_model", "name"], name="porttemplate_unique_name")
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        super().clean()
        if not self.card_model_id or not isinstance(self.eth_channels, list):
            return
        taken = {
            ch: name
            for name, channels in PortTemplate.objects.filter(card_model_id=self.card_model_id)
            .exclude(pk=self.pk)
            .values_list("name", "eth_channels")
            for ch in channels or ()
        }
        clash = sorted({ch for ch in self.eth_channels if ch in taken})
        if clash:
            raise ValidationError(
                {
                    "eth_channels": _("Channel %(channel)s is already wired to port %(port)s of this model.")
                    % {"channel": clash[0], "port": taken[clash[0]]}
                }
            )


class Card(ChangeLoggedModel):
    node = models.ForeignKey(Node, verbose_name=_("node"), on_delete=models.PROTECT, related_name="cards")
    card_model = models.ForeignKey(
        CardModel, verbose_name=_("card model"), on_delete=models.PROTECT, related_name="cards"
    )
    slot = models.CharField(_("slot"), max_length=16)
    status = models.CharField(
        _("status"), max_length=16, choices=CardStatus.choices, default=CardStatus.ACTIVE
    )
    serial = models.CharField(_("serial"), max_length=64, blank=True)
    pci_bus_id = models.CharField(
        _("PCI bus id"), max_length=16, blank=True, validators=[pci_bus_id_validator]
    )
    gpu_uuid = models.CharField(_("GPU UUID"), max_length=64, blank=True, validators=[gpu_uuid_validator])
    firmware_version = models.CharField(_("firmware version"), max_length=64, blank=True)
    driver_version = models.CharField(_("driver version"), max_length=64, blank=True)

    class Meta:
        verbose_name = _("card")
        verbose_name_plural = _("cards")
        ordering = ["node__hostname", "slot"]
        constraints = [
            models.UniqueConstraint(
                fields=["node", "slot"],
                name="card_one_per_slot",
                violation_error_message=_("This slot of this node already holds a card."),
            ),
            models.UniqueConstraint(
                fields=["node", "pci_bus_id"],
                condition=~Q(pci_bus_id=""),
                name="card_unique_bus_id_per_node",
                violation_error_message=_("Another card of this node has this PCI bus id."),
            ),
            models.UniqueConstraint(
                fields=["gpu_uuid"],
                condition=~Q(gpu_uuid=""),
                name="card_unique_gpu_uuid",
                violation_error_message=_("Another card has this GPU UUID."),
            ),
        ]

    def __str__(self) -> str:
        node = self._state.fields_cache.get("node")
        return f"{node.hostname}/{self.slot}" if node is not None else f"slot {self.slot}"

    def clean(self) -> None:
        super().clean()
        self.pci_bus_id = normalise_bus_id(self.pci_bus_id)

    @property
    def telemetry_id(self) -> str:
        return self.gpu_uuid or self.pci_bus_id


class Port(models.Model):
    """A network port on a card (card set) or on the node itself (a NIC or a switch port)."""

    node = models.ForeignKey(Node, verbose_name=_("node"), on_delete=models.CASCADE, related_name="ports")
    card = models.ForeignKey(
        Card, null=True, blank=True, verbose_name=_("card"), on_delete=models.CASCADE, related_name="ports"
    )
    name = models.CharField(_("name"), max_length=32)
    kind = models.CharField(_("kind"), max_length=16, choices=PortKind.choices)
    speed_gbps = models.PositiveIntegerField(_("speed (Gbit/s)"))
    description = models.CharField(_("description"), max_length=200, blank=True)

    class Meta:
        verbose_name = _("port")
        verbose_name_plural = _("ports")
        ordering = ["node", "card", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["card", "name"],
                condition=Q(card__isnull=False),
                name="port_unique_name_per_card",
                violation_error_message=_("This card already has a port of this name."),
            ),
            models.UniqueConstraint(
                fields=["node", "name"],
                condition=Q(card__isnull=True),
                name="port_unique_name_per_node",
                violation_error_message=_("This node already has a port of this name."),
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        super().clean()
        if self.card is not None and self.node_id is not None and self.card.node_id != self.node_id:
            raise ValidationError({"card": _("The card is in another node than the port.")})


class Cable(ChangeLoggedModel):
    """A cable joining two ports (its two ends are CableTermination rows)."""

    kind = models.CharField(_("kind"), max_length=16, choices=CableKind.choices)
    status = models.CharField(
        _("status"), max_length=16, choices=CableStatus.choices, default=CableStatus.CONNECTED
    )
    length_m = models.DecimalField(
        _("length (m)"),
        max_digits=6,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0"))],
    )
    label = models.CharField(_("label"), max_length=64, blank=True)
    description = models.CharField(_("description"), max_length=200, blank=True)

    class Meta:
        verbose_name = _("cable")
        verbose_name_plural = _("cables")
        ordering = ["pk"]

    def __str__(self) -> str:
        return self.label or f"#{self.pk}"

    def end(self, which: str) -> Port | None:
        for term in self.terminations.all():
            if term.end == which:
                return term.port
        return None

    @property
    def a_port(self) -> Port | None:
        return self.end(CableTermination.End.A)

    @property
    def b_port(self) -> Port | None:
        return self.end(CableTermination.End.B)


class CableTermination(models.Model):
    """One end of a cable. A port appears in at most one termination: one cable per port, never a loop.

    `card` repeats the port's card so that the database can refuse a cable between two ports of one card.
    """

    class End(models.TextChoices):
        A = "a", "A"
        B = "b", "B"

    cable = models.ForeignKey(
        Cable, verbose_name=_("cable"), on_delete=models.CASCADE, related_name="terminations"
    )
    end = models.CharField(max_length=1, choices=End.choices)
    port = models.OneToOneField(
        Port, verbose_name=_("port"), on_delete=models.PROTECT, related_name="termination"
    )
    card = models.ForeignKey(
        Card, null=True, blank=True, verbose_name=_("card"), on_delete=models.CASCADE, related_name="+"
    )

    class Meta:
        verbose_name = _("cable termination")
        verbose_name_plural = _("cable terminations")
        constraints = [
            models.UniqueConstraint(fields=["cable", "end"], name="cabletermination_one_per_end"),
            models.UniqueConstraint(
                fields=["cable", "card"],
                name="cable_not_same_card",
                violation_error_message=_("A cable cannot join two ports of the same card."),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cable_id}{self.end}"


__all__ = [
    "Cable",
    "CableTermination",
    "Card",
    "CardModel",
    "ChassisModel",
    "LeadKind",
    "Node",
    "Port",
    "PortTemplate",
]
