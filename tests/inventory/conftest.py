"""Inventory builders shared by the inventory tests."""

from __future__ import annotations

import itertools
from decimal import Decimal
from typing import Any

import pytest

from inventory.choices import CableKind, LeadKind, PortKind
from inventory.models import (
    PSU,
    Card,
    CardModel,
    ChassisModel,
    Cluster,
    Node,
    Port,
    PortTemplate,
    PowerFeed,
    PowerLead,
    Rack,
    Site,
)
from inventory.services import cable_connect, card_save

_seq = itertools.count(1)


def n() -> int:
    return next(_seq)


class Builder:
    """Creates valid rows with unique names; every method takes overrides."""

    def site(self, **kw: Any) -> Site:
        return Site.objects.create(**{"name": f"site-{n()}", **kw})

    def cluster(self, **kw: Any) -> Cluster:
        return Cluster.objects.create(**{"name": f"cluster-{n()}", **kw})

    def rack(self, **kw: Any) -> Rack:
        kw.setdefault("site", self.site())
        return Rack.objects.create(**{"name": f"rack-{n()}", "u_height": 42, **kw})

    def chassis(self, **kw: Any) -> ChassisModel:
        return ChassisModel.objects.create(
            **{"manufacturer": "Dell", "name": f"R{n()}", "base_power_w": 300, **kw}
        )

    def node(self, **kw: Any) -> Node:
        return Node.objects.create(**{"hostname": f"node{n()}", **kw})

    def card_model(self, ports: int = 4, **kw: Any) -> CardModel:
        model = CardModel.objects.create(
            **{"vendor": "Tenstorrent", "name": f"p150a-{n()}", "tdp_w": 300, **kw}
        )
        for i in range(1, ports + 1):
            PortTemplate.objects.create(
                card_model=model, name=f"QSFP{i}", kind=PortKind.QSFP_DD, speed_gbps=800
            )
        return model

    def card(self, node: Node | None = None, card_model: CardModel | None = None, **kw: Any) -> Card:
        card = Card(
            node=node or self.node(), card_model=card_model or self.card_model(), **{"slot": str(n()), **kw}
        )
        return card_save(card, user=None)

    def port(self, **kw: Any) -> Port:
        kw.setdefault("node", self.node())
        return Port.objects.create(**{"name": f"eth{n()}", "kind": PortKind.ETHERNET, "speed_gbps": 10, **kw})

    def cable(self, a: Port | None = None, b: Port | None = None, **kw: Any) -> Any:
        return cable_connect(
            a_port=a or self.port(), b_port=b or self.port(), user=None, **{"kind": CableKind.DAC, **kw}
        )

    def feed(self, **kw: Any) -> PowerFeed:
        kw.setdefault("site", self.site())
        return PowerFeed.objects.create(**{"name": f"feed-{n()}", **kw})

    def psu(self, **kw: Any) -> PSU:
        return PSU.objects.create(**{"name": f"psu-{n()}", "capacity_w": 1600, **kw})

    def lead(self, **kw: Any) -> PowerLead:
        kw.setdefault("psu", self.psu())
        return PowerLead.objects.create(**{"name": f"lead-{n()}", "kind": LeadKind.PCIE_8PIN, **kw})


@pytest.fixture
def build(db: Any) -> Builder:
    return Builder()


__all__ = ["Builder", "Decimal"]
