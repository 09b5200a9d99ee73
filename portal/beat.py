"""Celery beat's scheduler with a liveness file: the compose health check reads its age.

``celery -A portal beat -S portal.beat:HeartbeatScheduler`` touches ``PORTAL_BEAT_HEARTBEAT_FILE``
(when set) on every tick of the schedule loop; a tick happens at least every ``--max-interval``
seconds, so a stale file means the loop is stuck or gone.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from celery.beat import PersistentScheduler


def heartbeat_touch(path: str) -> None:
    """Create or refresh the liveness file (an empty file whose mtime is the last beat)."""
    if path:
        Path(path).touch()


class HeartbeatScheduler(PersistentScheduler):
    def tick(self, *args: Any, **kwargs: Any) -> float:
        interval = super().tick(*args, **kwargs)
        heartbeat_touch(os.environ.get("PORTAL_BEAT_HEARTBEAT_FILE", ""))
        return float(interval)
