"""Websocket routes of every app (filled by the live-dashboard work)."""

from typing import Any

websocket_urlpatterns: list[Any] = []
