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
    ACTIVE = "active", _("Active")
    PLANNED = "planned", _("Planned")
    FAILED = "failed", _("Failed")
    SPARE = "spare", _("Spare")


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
