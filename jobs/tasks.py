"""Celery adapters over jobs.services and jobs.sync: they take ids and stay thin."""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task
from django.conf import settings

from inventory.models import Cluster
from jobs import leases, output, runbooks, services, sync
from jobs.cluster import RetryableError


def _backoff(retries: int) -> int:
    base = int(getattr(settings, "PORTAL_ACTION_RETRY_BACKOFF", 5))
    return int(min(base * 2**retries, 300))


@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=600,
    soft_time_limit=570,
    max_retries=None,  # services.action_execute decides when an action has had enough attempts
    ignore_result=True,
)
def action_execute_task(self: Task, action_id: str) -> None:
    try:
        done = services.action_execute(action_id)
    except RetryableError as exc:
        raise self.retry(exc=exc, countdown=_backoff(self.request.retries or 0)) from None
    if done is not None and done.run_id is not None and not done.is_active:
        runbook_advance_task.delay(done.run_id)  # the runbook this action is a step of goes on


@shared_task(time_limit=120, soft_time_limit=110, ignore_result=True)
def runbook_advance_task(run_id: int) -> None:
    runbooks.runbook_advance(run_id)


@shared_task(time_limit=120, soft_time_limit=110, ignore_result=True)
def runbook_runs_advance_task() -> int:
    """The beat: runs waiting on Slurm or telemetry are judged again, lost workers' runs go on."""
    return runbooks.runbook_runs_advance_all()


@shared_task(time_limit=60, soft_time_limit=50, ignore_result=True)
def action_leases_recover_task() -> dict[str, list[str]]:
    return leases.action_leases_recover()


@shared_task(time_limit=120, soft_time_limit=110, ignore_result=True)
def cluster_sync_task(cluster_id: int) -> dict[str, Any] | None:
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return None
    result = sync.cluster_sync_locked(cluster)
    if result is None:
        return None
    return {
        "ok": result.ok,
        "nodes": len(result.node_ids),
        "jobs": len(result.job_ids),
        "error": result.error,
    }


@shared_task(time_limit=60, soft_time_limit=50, ignore_result=True)
def cluster_sync_all_task() -> None:
    expires = int(getattr(settings, "PORTAL_SYNC_INTERVAL", 15))
    for cluster_id in Cluster.objects.values_list("pk", flat=True):
        cluster_sync_task.apply_async(args=[cluster_id], expires=expires)


@shared_task(time_limit=60, soft_time_limit=50, ignore_result=True)
def job_output_refresh_task(job_pk: int) -> None:
    output.job_output_refresh(job_pk)


@shared_task(time_limit=120, soft_time_limit=110, ignore_result=True)
def burnin_advance_all_task() -> list[int]:
    from jobs.burnin.services import burnin_advance_all

    return burnin_advance_all()
