"""Constraints the database holds even when the service layer is bypassed."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, transaction

from inventory.models import CableTermination, Node, Port
from inventory.models.devices import normalise_bus_id


def test_database_refuses_overlap_without_the_service(build: Any) -> None:
    rack = build.rack()
    Node.objects.create(hostname="a", rack=rack, position=1, u_height=4)
    with pytest.raises(IntegrityError), transaction.atomic():
        Node.objects.create(hostname="b", rack=rack, position=4, u_height=1)


def test_database_refuses_second_cable_on_a_port(build: Any) -> None:
    a, b, c = build.port(), build.port(), build.port()
    cable = build.cable(a, b)
    other = build.cable(build.port(), build.port())
    with pytest.raises(IntegrityError), transaction.atomic():
        CableTermination.objects.filter(cable=other, end="a").update(port=b)
    assert cable.a_port == a and cable.b_port == b
    assert not CableTermination.objects.filter(port=c).exists()


def test_database_refuses_cable_within_a_card(build: Any) -> None:
    card = build.card()
    p1, p2 = list(Port.objects.filter(card=card))[:2]
    other = build.cable(build.port(), build.port())
    CableTermination.objects.filter(cable=other).delete()
    CableTermination.objects.create(cable=other, end="a", port=p1, card=card)
    with pytest.raises(IntegrityError), transaction.atomic():
        CableTermination.objects.create(cable=other, end="b", port=p2, card=card)


def test_new_card_gets_its_model_ports(build: Any) -> None:
    card = build.card(card_model=build.card_model(ports=4))
    assert sorted(p.name for p in card.ports.all()) == ["QSFP1", "QSFP2", "QSFP3", "QSFP4"]
    assert {p.node_id for p in card.ports.all()} == {card.node_id}


def test_bus_id_normalised() -> None:
    assert normalise_bus_id("00000000:3B:00.0") == "0000:3b:00.0"
    assert normalise_bus_id("0000:01:00.0") == "0000:01:00.0"


def test_bmc_password_is_encrypted_at_rest(build: Any) -> None:
    from django.db import connection

    node = build.node(bmc_password="s3cret")
    with connection.cursor() as cur:
        cur.execute("SELECT bmc_password FROM inventory_node WHERE id = %s", [node.pk])
        stored = cur.fetchone()[0]
    assert stored.startswith("fernet:") and "s3cret" not in stored
    assert Node.objects.get(pk=node.pk).bmc_password == "s3cret"


def test_feed_power_three_phase() -> None:
    from inventory.models import PowerFeed

    single = PowerFeed(voltage=230, amperage=16, phase="single", max_utilization_pct=80)
    three = PowerFeed(voltage=400, amperage=32, phase="three", max_utilization_pct=80)
    assert single.available_power_w == 2944
    assert three.available_power_w == 17736  # 400 V x 32 A x 80 % x sqrt(3)
