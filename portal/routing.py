"""Websocket routes of every app."""

from typing import Any

from portal.live.routing import websocket_urlpatterns as live_patterns

websocket_urlpatterns: list[Any] = [*live_patterns]
