"""Websocket routes of the live pages (mounted by portal/routing.py): the apps' routes, registered
in :mod:`portal.live.registry` when they are ready, and the benchmark's bare fan-out."""

from typing import Any

from django.conf import settings
from django.urls import path

from portal.live import consumers, registry

websocket_urlpatterns: list[Any] = [
    path(route, consumer.as_asgi()) for route, consumer in registry.websocket_routes().items()
]
if getattr(settings, "PORTAL_LIVE_BENCH", False):
    websocket_urlpatterns.append(path("ws/live/bench/", consumers.BareFanoutConsumer.as_asgi()))
