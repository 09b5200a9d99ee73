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
from inventory.models.power import PSU, PowerFeed, PowerLead
from inventory.models.sites import Cluster, Rack, Site

__all__ = [
    "PSU",
    "Cable",
    "CableTermination",
    "Card",
    "CardModel",
    "ChassisModel",
    "Cluster",
    "Node",
    "Port",
    "PortTemplate",
    "PowerFeed",
    "PowerLead",
    "Rack",
    "Site",
]
