"""Live-push fixtures: the Redis pub/sub channel layer (REDIS_URL, DB 7), no background flusher
(tests flush explicitly), no watchdog; inventory rows and a telemetry helper."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

LIVE_REDIS = os.environ.get("LIVE_REDIS_URL", "redis://127.0.0.1:6379/7")


@pytest.fixture(autouse=True)
def live_settings(settings: Any) -> Iterator[None]:
    from portal.live import consumers, push

    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            # pub/sub ignores the Redis DB number: a prefix of our own keeps other runs' pushes out
            "CONFIG": {
                "hosts": [{"address": LIVE_REDIS, "max_connections": 50}],
                "prefix": f"rp-live-{os.getpid()}",
            },
        }
    }
    settings.PORTAL_LIVE_AUTOFLUSH = False
    settings.PORTAL_LIVE_WATCHDOG_S = 0
    from channels.layers import channel_layers

    from monitoring.services.ingest import series_cache_clear

    channel_layers.backends.clear()
    push.coalescer.take()
    consumers._renders.clear()
    series_cache_clear()  # series ids do not survive the transactional tests' table flush
    yield
    push.coalescer.take()
    channel_layers.backends.clear()


@pytest.fixture
def rig(transactional_db: Any) -> dict[str, Any]:
    """A cluster with a rack, two nodes with two cards each, a PSU."""
    from inventory.models import PSU, Card, CardModel, Cluster, Node, Rack, Site

    site = Site.objects.create(name="lab")
    cluster = Cluster.objects.create(name="rig-01")
    rack = Rack.objects.create(name="r1", site=site, u_height=42)
    model = CardModel.objects.create(vendor="NVIDIA", name="RTX 4090", tdp_w=450)
    nodes, cards = [], []
    for i in (1, 2):
        node = Node.objects.create(hostname=f"gpu0{i}", cluster=cluster, rack=rack, position=i * 2,
                                   slurm_state="idle")  # fmt: skip
        nodes.append(node)
        for slot in (0, 1):
            cards.append(Card.objects.create(node=node, card_model=model, slot=str(slot),
                                             gpu_uuid=f"GPU-0000000{i}-0000-0000-0000-00000000000{slot}"))  # fmt: skip
    PSU.objects.create(name="psu1", node=nodes[0], capacity_w=1600)
    return {"cluster": cluster, "rack": rack, "nodes": nodes, "cards": cards}


@pytest.fixture
def ingest() -> Callable[..., Any]:
    """ingest(card, temperature=..., power=...) through the telemetry service; returns once the
    batch's latest values are committed too (written behind it) and its signal has been sent."""
    from monitoring import storage
    from monitoring.services import telemetry_ingest_samples

    def run(card: Any, *, temperature: float = 50.0, power: float = 200.0) -> Any:
        base = {"node": card.node.hostname, "card": card.gpu_uuid}
        report = telemetry_ingest_samples(
            [
                {**base, "metric": "temperature_c", "value": temperature},
                {**base, "metric": "power_w", "value": power},
            ]
        )
        storage.latest_flush()
        return report

    return run


def communicator(path: str, user: Any) -> Any:
    """A client of the live routes with ``user`` already resolved (the session path is tested apart)."""
    from channels.routing import URLRouter
    from channels.testing.websocket import WebsocketCommunicator

    from portal.routing import websocket_urlpatterns

    path, _, query = path.partition("?")
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path + ("?" + query if query else ""))
    comm.scope["user"] = user
    comm.scope["query_string"] = query.encode()
    return comm
