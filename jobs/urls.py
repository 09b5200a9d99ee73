"""Job and node-operation pages (namespace `jobs`)."""

from typing import Any

app_name = "jobs"

urlpatterns: list[Any] = []
