"""Websocket routes of the live pages (mounted under /ws/live/ by portal/routing.py)."""

from typing import Any

from django.urls import path

from portal.live import consumers

websocket_urlpatterns: list[Any] = [
    path("ws/live/overview/", consumers.OverviewConsumer.as_asgi()),
    path("ws/live/rack/<int:pk>/", consumers.RackConsumer.as_asgi()),
    path("ws/live/node/<int:pk>/", consumers.NodeConsumer.as_asgi()),
    path("ws/live/jobs/", consumers.JobsConsumer.as_asgi()),
]
