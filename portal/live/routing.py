"""Websocket routes of the live pages (mounted by portal/routing.py)."""

from typing import Any

from django.conf import settings
from django.urls import path

from portal.live import consumers

websocket_urlpatterns: list[Any] = [
    path("ws/live/overview/", consumers.OverviewConsumer.as_asgi()),
    path("ws/live/rack/<int:pk>/", consumers.RackConsumer.as_asgi()),
    path("ws/live/node/<int:pk>/", consumers.NodeConsumer.as_asgi()),
    path("ws/live/jobs/", consumers.JobsConsumer.as_asgi()),
    path("ws/live/fabric/<int:pk>/", consumers.FabricConsumer.as_asgi()),
]
if getattr(settings, "PORTAL_LIVE_BENCH", False):
    websocket_urlpatterns.append(path("ws/live/bench/", consumers.BareFanoutConsumer.as_asgi()))
