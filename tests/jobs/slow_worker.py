"""A Celery worker for the worker-killed test: each action pauses SLOW_ACTION_SECONDS after the cluster
call returned and before its result is recorded, so the test can kill the worker at the worst moment."""

from __future__ import annotations

import os
import sys
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
django.setup()

from jobs import services  # noqa: E402
from portal.celery import app  # noqa: E402

_perform = services._perform


def _slow(action, backend):  # type: ignore[no-untyped-def]
    out = _perform(action, backend)
    marker = os.environ.get("SLOW_ACTION_MARKER")
    if marker:
        with open(marker, "a") as f:
            f.write(f"{action.pk} {out}\n")
    time.sleep(float(os.environ.get("SLOW_ACTION_SECONDS", "0")))
    return out


services._perform = _slow

if __name__ == "__main__":
    # recover abandoned messages quickly (kombu scans every interval x throttle seconds)
    app.conf.broker_transport_options = {
        "visibility_timeout": int(os.environ.get("CELERY_VISIBILITY_TIMEOUT", "4")),
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
    }
    app.worker_main(
        [
            "worker",
            "-Q",
            "actions",
            "-c",
            "1",
            "--without-heartbeat",
            "--without-mingle",
            "--without-gossip",
            "-l",
            "INFO",
            *sys.argv[1:],
        ]
    )
