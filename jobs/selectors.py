"""Jobs reads: scoped querysets (researchers see their own jobs and actions) with eager loading."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet

from jobs.models import (
    Action,
    ClusterAccount,
    Job,
    JobTemplate,
    JobTransition,
    NodeState,
    Partition,
    Runbook,
    RunbookRun,
)


def can_see_all_jobs(user: Any) -> bool:
    if not getattr(user, "is_authenticated", False):
        return False
    return bool(
        user.has_perm("jobs.view_all_jobs") or getattr(settings, "PORTAL_RESEARCHERS_SEE_ALL_JOBS", False)
    )


def job_list(*, user: Any = None) -> QuerySet[Job]:
    """Jobs the user may see (every job when user is None: workers, management commands)."""
    qs = Job.objects.select_related("cluster", "owner")
    if user is not None and not can_see_all_jobs(user):
        qs = qs.filter(owner_id=getattr(user, "pk", None))
    return qs


def job_get(pk: int, *, user: Any = None) -> Job:
    return job_list(user=user).get(pk=pk)


def job_transition_list(job: Job) -> QuerySet[JobTransition]:
    return JobTransition.objects.filter(job=job)


def action_list(*, user: Any = None) -> QuerySet[Action]:
    """Actions the user may see: their own and those on their jobs (an operator's cancel of them),
    unless they can see every job (or operate nodes)."""
    qs = Action.objects.select_related("cluster", "node", "job", "requested_by")
    if user is not None and not (can_see_all_jobs(user) or user.has_perm("jobs.operate_nodes")):
        pk = getattr(user, "pk", None)
        qs = qs.filter(Q(requested_by_id=pk) | Q(job__owner_id=pk))
    return qs


def action_get(pk: Any, *, user: Any = None) -> Action:
    return action_list(user=user).get(pk=pk)


def cluster_account_list() -> QuerySet[ClusterAccount]:
    return ClusterAccount.objects.select_related("cluster", "user")


def cluster_account_for(*, user: Any, cluster_id: int) -> ClusterAccount | None:
    return ClusterAccount.objects.filter(
        user_id=getattr(user, "pk", None) or 0, cluster_id=cluster_id
    ).first()


def node_state_list() -> QuerySet[NodeState]:
    return NodeState.objects.select_related("node", "node__cluster")


def partition_list(*, cluster_id: int | None = None) -> QuerySet[Partition]:
    qs = Partition.objects.select_related("cluster")
    return qs if cluster_id is None else qs.filter(cluster_id=cluster_id)


def job_template_list() -> QuerySet[JobTemplate]:
    return JobTemplate.objects.select_related("cluster", "created_by")


def runbook_list() -> QuerySet[Runbook]:
    return Runbook.objects.all()


def runbook_run_list() -> QuerySet[RunbookRun]:
    return RunbookRun.objects.select_related("runbook", "node", "requested_by")
