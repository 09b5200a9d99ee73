"""Node and card pages chart what the cards report: no empty panel for a metric a card never sends."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.utils import timezone

from monitoring import services
from tests.monitoring.conftest import H100_UUIDS

pytestmark = pytest.mark.django_db


def _charts(body: str) -> list[str]:
    return re.findall(r'<figure class="chart" data-metric="([a-z_]+)"', body)


def test_only_the_reported_metrics_get_a_chart(inv: Any, client: Any, operator_user: Any) -> None:
    node = inv.node("rig01")
    tt = inv.card(node, pci_bus_id="0000:01:00.0")
    nv = inv.card(node, gpu_uuid=H100_UUIDS[0])
    quiet = inv.card(node, pci_bus_id="0000:02:00.0")
    ts = timezone.now() - dt.timedelta(minutes=1)
    services.telemetry_ingest_samples(
        [
            {
                "ts": ts.isoformat(),
                "node": "rig01",
                "card": "0000:01:00.0",
                "metric": "temperature_c",
                "value": 60,
            },
            {
                "ts": ts.isoformat(),
                "node": "rig01",
                "card": "0000:01:00.0",
                "metric": "power_w",
                "value": 200,
            },
            {
                "ts": ts.isoformat(),
                "node": "rig01",
                "card": H100_UUIDS[0],
                "metric": "utilization_pct",
                "value": 9,
            },
        ]
    )
    client.force_login(operator_user)

    def page(path: str) -> str:
        return str(client.get(path).content.decode())

    assert _charts(page(f"/inventory/nodes/{node.pk}/")) == ["temperature_c", "power_w", "utilization_pct"]
    assert _charts(page(f"/inventory/cards/{tt.pk}/")) == ["temperature_c", "power_w"]
    assert _charts(page(f"/inventory/cards/{nv.pk}/")) == ["utilization_pct"]
    body = page(f"/inventory/cards/{quiet.pk}/")
    assert _charts(body) == [] and "No telemetry received for these charts yet." in body
