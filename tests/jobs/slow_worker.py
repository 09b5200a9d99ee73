"""A Celery worker (or beat) for the worker-killed test and benchmark: each action pauses
SLOW_ACTION_SECONDS after the cluster call returned and before its result is recorded, so the test
can kill the worker at the worst moment. The broker's visibility timeout is the deployment's (an
hour): what brings a killed worker's action back is the lease (jobs.leases), not redelivery.

    slow_worker.py [worker options]       a worker on the actions and polls queues
    slow_worker.py beat SCHEDULE_FILE     beat with only the lease check on its schedule (or the
                                          entries named in SLOW_BEAT_TASKS, comma separated)
"""

from __future__ import annotations

import os
import sys
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
django.setup()

from django.conf import settings  # noqa: E402

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
    if sys.argv[1:2] == ["beat"]:
        names = os.environ.get("SLOW_BEAT_TASKS", "jobs-action-leases").split(",")
        app.conf.beat_schedule = {name: settings.CELERY_BEAT_SCHEDULE[name] for name in names}
        app.start(["beat", "-s", sys.argv[2], "-l", "INFO"])
    else:
        app.worker_main(
            ["worker", "-Q", "actions,polls", "-c", "1", "--without-heartbeat", "--without-mingle",
             "--without-gossip", "-l", "INFO", *sys.argv[1:]]
        )  # fmt: skip
