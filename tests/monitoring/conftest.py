"""Monitoring fixtures: a small inventory and recorded tool outputs."""

from __future__ import annotations

import itertools
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "parsers" / "fixtures"
H100_UUIDS = [
    "GPU-5e1f0c2a-77aa-4c1e-9d0b-1f2e3d4c5b6a",
    "GPU-1b2c3d4e-5f60-4718-8293-a4b5c6d7e8f9",
]
_seq = itertools.count(1)


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


class Inv:
    """Minimal inventory rows for telemetry tests."""

    def cluster(self, **kw: Any) -> Any:
        from inventory.models import Cluster

        return Cluster.objects.create(**{"name": f"c{next(_seq)}", **kw})

    def node(self, hostname: str | None = None, **kw: Any) -> Any:
        from inventory.models import ChassisModel, Node

        chassis = ChassisModel.objects.create(manufacturer="Dell", name=f"R{next(_seq)}", base_power_w=300)
        return Node.objects.create(hostname=hostname or f"node{next(_seq)}", chassis=chassis, **kw)

    def card(
        self,
        node: Any,
        *,
        gpu_uuid: str = "",
        pci_bus_id: str = "",
        tdp_w: int = 700,
        price: str = "0",
        **kw: Any,
    ) -> Any:
        from inventory.models import Card, CardModel

        model = CardModel.objects.create(
            vendor="NVIDIA", name=f"H100-{next(_seq)}", tdp_w=tdp_w, list_price=Decimal(price)
        )
        return Card.objects.create(
            node=node, card_model=model, slot=f"s{next(_seq)}", gpu_uuid=gpu_uuid, pci_bus_id=pci_bus_id, **kw
        )

    def psu(self, node: Any, capacity_w: int, **kw: Any) -> Any:
        from inventory.models import PSU

        return PSU.objects.create(node=node, name=f"PSU{next(_seq)}", capacity_w=capacity_w, **kw)


@pytest.fixture
def inv(db: Any) -> Inv:
    return Inv()


@pytest.fixture(autouse=True)
def _fresh_caches() -> Any:
    """Tests roll back what on-commit hooks (run by capture fixtures) told the caches."""
    from monitoring import storage
    from monitoring.services.ingest import series_cache_clear

    series_cache_clear()
    storage.partitions_forget()
    yield


@pytest.fixture(autouse=True)
def _default_rules(request: Any) -> Any:
    """The default alert rules (a transactional test's flush removes migration data); after a
    transactional test, empty the samples table (flush leaves unmanaged tables alone)."""
    marker = request.node.get_closest_marker("django_db")
    if marker is None:
        yield
        return
    from monitoring.defaults import alert_rules_ensure_defaults

    alert_rules_ensure_defaults()
    yield
    if marker.kwargs.get("transaction"):
        from django.db import connection

        with connection.cursor() as cur:
            cur.execute("DELETE FROM monitoring_sample")
