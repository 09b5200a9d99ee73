"""The Celery app. Queues: `actions` (long node/job actions), `polls` (Slurm sync), `telemetry`."""

import os

from celery import Celery
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
