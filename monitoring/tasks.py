"""Celery tasks of the telemetry queue: thin adapters over services and collectors (ids in, idempotent)."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from monitoring import services


@shared_task(ignore_result=True)
def alert_notify_task(alert_id: int, transition: str) -> None:
    services.alert_notify(alert_id, transition)


@shared_task(ignore_result=True)
def telemetry_rollup_task() -> dict[str, int]:
    result = services.telemetry_rollup()
    services.alerts_resolve_quiet()
    return result


@shared_task(ignore_result=True)
def telemetry_maintain_task() -> dict[str, Any]:
    return services.telemetry_maintain()


@shared_task(ignore_result=True)
def telemetry_pull_all_task() -> list[int]:
    """Fan out one pull per cluster that has a login host (bounded concurrency inside each)."""
    from monitoring.collectors import pullable_cluster_ids

    ids = pullable_cluster_ids()
    for cluster_id in ids:
        telemetry_pull_cluster_task.delay(cluster_id)
    return ids


@shared_task(ignore_result=True, soft_time_limit=120, time_limit=150)
def telemetry_pull_cluster_task(cluster_id: int) -> dict[str, Any]:
    from monitoring.collectors import telemetry_pull_cluster

    return telemetry_pull_cluster(cluster_id).as_dict()


@shared_task(ignore_result=True)
def job_energy_pending_task() -> int:
    """Compute JobEnergy for finished jobs that have none yet."""
    from monitoring.services import energy

    return energy.job_energy_compute_pending()


@shared_task(ignore_result=True)
def health_evaluate_task() -> dict[str, Any]:
    """Judge every enabled health check from stored telemetry and check-command output."""
    from monitoring.health.services import health_evaluate

    report = health_evaluate()
    return {"evaluated": report.evaluated, "transitions": report.transitions, "errors": report.errors}


@shared_task(ignore_result=True)
def health_probe_all_task() -> list[int]:
    """Fan out one check-command round per cluster that has a login host."""
    from monitoring.collectors import pullable_cluster_ids

    ids = pullable_cluster_ids()
    for cluster_id in ids:
        health_probe_cluster_task.delay(cluster_id)
    return ids


@shared_task(ignore_result=True, soft_time_limit=120, time_limit=150)
def health_probe_cluster_task(cluster_id: int) -> dict[str, Any]:
    from monitoring.health.services import health_probe_cluster

    return health_probe_cluster(cluster_id)
