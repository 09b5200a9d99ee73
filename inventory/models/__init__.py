from inventory.models.devices import (
    Cable,
    CableTermination,
    Card,
    CardModel,
    ChassisModel,
    Node,
    Port,
    PortTemplate,
)
from inventory.models.fabrics import Fabric, FabricMember, FabricTemplate, MemberRole
from inventory.models.lifecycle import CardEvent
from inventory.models.power import PSU, PowerFeed, PowerLead
from inventory.models.readiness import ReadinessCheck, ReadinessKey, ReadinessStatus
from inventory.models.sites import Cluster, Rack, Site

__all__ = [
    "PSU",
    "Cable",
    "CableTermination",
    "Card",
    "CardEvent",
    "CardModel",
    "ChassisModel",
    "Cluster",
    "Fabric",
    "FabricMember",
    "FabricTemplate",
    "MemberRole",
    "Node",
    "Port",
    "PortTemplate",
    "PowerFeed",
    "PowerLead",
    "Rack",
    "ReadinessCheck",
    "ReadinessKey",
    "ReadinessStatus",
    "Site",
]
