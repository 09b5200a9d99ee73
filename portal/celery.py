"""The Celery app. Queues: `actions` (long node/job actions), `polls` (Slurm sync), `telemetry`."""

import os
from pathlib import Path
from typing import Any

from celery import Celery, bootsteps
from celery.signals import worker_process_init
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.dev")

app = Celery("rackpilot")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = (Queue("default"), Queue("actions"), Queue("polls"), Queue("telemetry"))
app.autodiscover_tasks()


@worker_process_init.connect
def _tune_gc(**_: object) -> None:
    from portal.gc import tune_gc

    tune_gc()


class LivenessFile(bootsteps.StartStopStep):
    """Touches ``PORTAL_WORKER_HEARTBEAT_FILE`` every 10 s while the worker's consumer runs (it is
    stopped while the broker connection is lost): the compose health check reads the file's age, which
    costs nothing, where `celery inspect ping` starts a whole Celery client every time."""

    requires = {"celery.worker.consumer.connection:Connection"}

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.path = os.environ.get("PORTAL_WORKER_HEARTBEAT_FILE", "")
        self.tref: Any = None

    def start(self, parent: Any) -> None:
        if self.path:
            Path(self.path).touch()
            self.tref = parent.timer.call_repeatedly(10.0, Path(self.path).touch, priority=10)

    def stop(self, parent: Any) -> None:
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None


app.steps["consumer"].add(LivenessFile)
