from django.db import models
from django.utils.translation import gettext_lazy as _


class NodeRole(models.TextChoices):
    COMPUTE = "compute", _("Compute")
    LOGIN = "login", _("Login")
    HEAD = "head", _("Head")
    STORAGE = "storage", _("Storage")
    SWITCH = "switch", _("Switch")


class NodeStatus(models.TextChoices):
    PLANNED = "planned", _("Planned")
    ACTIVE = "active", _("Active")
    MAINTENANCE = "maintenance", _("Maintenance")
    FAILED = "failed", _("Failed")
    DECOMMISSIONED = "decommissioned", _("Decommissioned")


class BMCKind(models.TextChoices):
    NONE = "none", _("No BMC")
    IPMI = "ipmi", _("IPMI")
    REDFISH = "redfish", _("Redfish")


class Airflow(models.TextChoices):
    LIMITED = "limited", _("Limited (open frame / mining chassis)")
    STANDARD = "standard", _("Standard server airflow")
    HIGH = "high", _("High airflow / datacenter")
    LIQUID = "liquid", _("Liquid cooled")


class Cooling(models.TextChoices):
    ACTIVE = "active", _("Active (own fan)")
    PASSIVE = "passive", _("Passive (needs chassis airflow)")
    BLOWER = "blower", _("Blower")
    LIQUID = "liquid", _("Liquid")


class CardStatus(models.TextChoices):
    """A card's lifecycle (second-hand cards: bought, burnt in, accepted or sent back)."""

    ORDERED = "ordered", _("Ordered")
    RECEIVED = "received", _("Received")
    BURN_IN = "burn_in", _("Burn-in")
    ACCEPTED = "accepted", _("Accepted")
    REJECTED = "rejected", _("Rejected")
    IN_SERVICE = "in_service", _("In service")
    RMA = "rma", _("RMA")
    RETIRED = "retired", _("Retired")


#: the lifecycle's allowed moves; everything else is refused by inventory.lifecycle.card_transition
CARD_TRANSITIONS: dict[str, frozenset[str]] = {
    CardStatus.ORDERED: frozenset({CardStatus.RECEIVED}),
    CardStatus.RECEIVED: frozenset({CardStatus.BURN_IN, CardStatus.RMA}),
    CardStatus.BURN_IN: frozenset({CardStatus.ACCEPTED, CardStatus.REJECTED, CardStatus.RECEIVED}),
    CardStatus.ACCEPTED: frozenset({CardStatus.IN_SERVICE, CardStatus.BURN_IN, CardStatus.RETIRED}),
    CardStatus.REJECTED: frozenset({CardStatus.BURN_IN, CardStatus.RMA, CardStatus.RETIRED}),
    CardStatus.IN_SERVICE: frozenset(
        {CardStatus.ACCEPTED, CardStatus.BURN_IN, CardStatus.RMA, CardStatus.RETIRED}
    ),
    CardStatus.RMA: frozenset({CardStatus.RECEIVED, CardStatus.RETIRED}),
    CardStatus.RETIRED: frozenset(),
}
#: cards in the machine that Slurm may give to jobs (a burn-in job holds its cards; the simulator's GPUs
#: are these); rejected and RMA cards are left out, as a gres.conf without them would
CARD_SCHEDULABLE = frozenset(
    {CardStatus.RECEIVED, CardStatus.BURN_IN, CardStatus.ACCEPTED, CardStatus.IN_SERVICE}
)
#: cards kept out of service while still in the machine: the node's readiness fails until it is removed
CARD_OUT_OF_SERVICE = frozenset({CardStatus.REJECTED})
#: cards that are not in the machine (not expected in the host's device list, never scheduled): an RMA
#: card is on its way back to the seller, a retired one gone
CARD_NOT_INSTALLED = frozenset({CardStatus.ORDERED, CardStatus.RMA, CardStatus.RETIRED})


class PortKind(models.TextChoices):
    QSFP_DD = "qsfp-dd", _("QSFP-DD")
    OSFP = "osfp", _("OSFP")
    QSFP28 = "qsfp28", _("QSFP28")
    QSFP56 = "qsfp56", _("QSFP56")
    INFINIBAND = "infiniband", _("InfiniBand")
    ETHERNET = "ethernet", _("Ethernet (RJ45)")
    SFP28 = "sfp28", _("SFP28")
    NVLINK = "nvlink", _("NVLink")
    USB_C = "usb-c", _("USB-C / QSFP direct")


class CableKind(models.TextChoices):
    DAC = "dac", _("QSFP-DD DAC (copper)")
    AOC = "aoc", _("Active optical cable")
    FIBRE = "fibre", _("Fibre with transceivers")
    INFINIBAND = "infiniband", _("InfiniBand")
    CAT6 = "cat6", _("Cat6 Ethernet")


class CableStatus(models.TextChoices):
    PLANNED = "planned", _("Planned")
    CONNECTED = "connected", _("Connected")
    FAULTY = "faulty", _("Faulty")


class Phase(models.TextChoices):
    SINGLE = "single", _("Single phase")
    THREE = "three", _("Three phase")


class LeadKind(models.TextChoices):
    PCIE_6PIN = "pcie-6pin", _("PCIe 6-pin (75 W)")
    PCIE_8PIN = "pcie-8pin", _("PCIe 8-pin (150 W)")
    HPWR_12V = "12vhpwr", _("12VHPWR / 12V-2x6 (600 W)")
    EPS_8PIN = "eps-8pin", _("EPS 8-pin (300 W)")
    C13 = "c13", _("IEC C13 (10 A)")
    C19 = "c19", _("IEC C19 (16 A)")
    DC_BARREL = "dc", _("DC adapter / USB-C PD")
    ATX = "atx", _("ATX 24-pin")


LEAD_DEFAULT_RATING_W = {
    LeadKind.PCIE_6PIN: 75,
    LeadKind.PCIE_8PIN: 150,
    LeadKind.HPWR_12V: 600,
    LeadKind.EPS_8PIN: 300,
    LeadKind.C13: 2300,
    LeadKind.C19: 3680,
    LeadKind.DC_BARREL: 240,
    LeadKind.ATX: 300,
}
