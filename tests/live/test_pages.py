"""The live pages render complete without websockets (the socket only keeps them current)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db(transaction=True)


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_overview_page_renders_every_cluster_and_connects_its_socket(
    rig: dict[str, Any], admin_user: Any, ingest: Any
) -> None:
    ingest(rig["cards"][0], temperature=88.0, power=350.0)

    body = _client(admin_user).get("/").content.decode()

    assert 'ws-connect="/ws/live/overview/"' in body
    assert f'id="overview-cluster-{rig["cluster"].pk}"' in body
    # a 1600 W supply with 20 % headroom binds (no feed recorded)
    assert "350 W / 1.28 kW" in body and "of the PSU limit" in body and "temp-hot" in body


def test_rack_and_node_pages_include_the_thermal_map_and_live_charts(
    rig: dict[str, Any], operator_user: Any, ingest: Any
) -> None:
    card = rig["cards"][0]
    ingest(card, temperature=91.0)
    client = _client(operator_user)

    rack = client.get(f"/inventory/racks/{rig['rack'].pk}/").content.decode()
    node = client.get(f"/inventory/nodes/{card.node_id}/").content.decode()

    assert f'ws-connect="/ws/live/rack/{rig["rack"].pk}/"' in rack
    assert f'<span id="thermal-card-{card.pk}" class="tcard temp-critical"' in rack
    assert f'ws-connect="/ws/live/node/{card.node_id}/"' in node
    assert f'id="node-latest-{card.node_id}"' in node and 'data-metric="temperature_c"' in node
