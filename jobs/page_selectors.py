"""Reads the pages need beyond jobs.selectors: the page filters, the shared queue summary, the
node-operations list (Slurm state, reason, readiness, health and the active action per node)."""

from __future__ import annotations

import json
from typing import Any

import django_filters as df
from django.db.models import Count, IntegerField, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from inventory.models import Cluster, Node
from jobs.cluster.types import ACTIVE_JOB_STATES
from jobs.models import ACTIVE_ACTION_STATUSES, Action, Job
from jobs.selectors import job_list


def job_page_list(*, user: Any, scope: str) -> QuerySet[Job]:
    """``mine``: the user's own jobs; ``all``: what jobs.selectors.job_list lets them see."""
    qs = job_list(user=user).select_related(None).select_related("cluster")
    if scope != "all":
        qs = qs.filter(owner_id=user.pk)
    return qs.order_by("-job_id")


class JobPageFilterSet(df.FilterSet):
    q = df.CharFilter(method="search", label=_("Search"))
    status = df.ChoiceFilter(
        method="filter_status",
        label=_("Status"),
        choices=(("active", _("Queued or running")), ("finished", _("Finished"))),
        empty_label=_("(all)"),
    )
    state = df.ChoiceFilter(
        label=_("State"),
        choices=[
            (s, s)
            for s in ("PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY")
        ],
        empty_label=_("(any)"),
    )
    cluster = df.ModelChoiceFilter(label=_("Cluster"), queryset=Cluster.objects.all())
    partition = df.CharFilter(label=_("Partition"))
    user = df.CharFilter(label=_("Cluster user"))

    class Meta:
        model = Job
        fields = ["q", "status", "state", "cluster", "partition", "user"]

    def search(self, queryset: QuerySet[Job], name: str, value: str) -> QuerySet[Job]:
        value = value.strip()
        if not value:
            return queryset
        cond = Q(name__icontains=value)
        if value.isdigit():
            cond |= Q(job_id=int(value))
        return queryset.filter(cond)

    def filter_status(self, queryset: QuerySet[Job], name: str, value: str) -> QuerySet[Job]:
        cond = Q(state__in=ACTIVE_JOB_STATES)
        return queryset.filter(cond) if value == "active" else queryset.exclude(cond)


def queue_summary() -> list[dict[str, Any]]:
    """Pending and running jobs per cluster and partition, without anyone's identity: what every
    researcher may see of the shared queue."""
    rows = (
        Job.objects.filter(state__in=("PENDING", "RUNNING"))
        .values("cluster__name", "partition")
        .annotate(
            pending=Count("pk", filter=Q(state="PENDING")),
            running=Count("pk", filter=Q(state="RUNNING")),
        )
        .order_by("cluster__name", "partition")
    )
    return [dict(r) for r in rows]


def can_cancel(job: Job, user: Any) -> bool:
    if not job.is_active:
        return False
    owns = job.owner_id is not None and job.owner_id == user.pk
    return bool(owns or user.has_perm("jobs.cancel_any_job"))


def job_actions(job: Job) -> QuerySet[Action]:
    return Action.objects.filter(job=job).select_related("requested_by").order_by("-created")


def node_ops_list() -> QuerySet[Node]:
    """Nodes with their Slurm state, active action, readiness summary, firing-alert count and
    failing health checks."""
    from inventory.readiness import with_readiness
    from monitoring.models import Alert, HealthStatus, NodeHealth

    active = Action.objects.filter(status__in=ACTIVE_ACTION_STATUSES).order_by("-created")
    recent = Prefetch("actions", queryset=active, to_attr="active_actions")
    firing = (
        Alert.objects.filter(node=OuterRef("pk"), status=Alert.Status.FIRING)
        .values("node")
        .annotate(n=Count("id"))
        .values("n")
    )
    failing = (
        NodeHealth.objects.filter(node=OuterRef("pk"), status=HealthStatus.FAILING)
        .values("node")
        .annotate(n=Count("id"))
        .values("n")
    )
    return (
        with_readiness(Node.objects.filter(cluster__isnull=False))
        .annotate(firing_alerts=Subquery(firing, output_field=IntegerField()))
        .annotate(failing_checks=Subquery(failing, output_field=IntegerField()))
        .select_related("cluster", "slurm")
        .prefetch_related(recent)
        .order_by("cluster__name", "hostname")
    )


class NodeOpsFilterSet(df.FilterSet):
    q = df.CharFilter(method="search", label=_("Search"))
    cluster = df.ModelChoiceFilter(label=_("Cluster"), queryset=Cluster.objects.all())
    state = df.ChoiceFilter(
        method="filter_state",
        label=_("Slurm state"),
        choices=[
            (s, s) for s in ("idle", "mixed", "alloc", "drained", "draining", "down", "reboot", "unknown")
        ],
        empty_label=_("(any)"),
    )

    class Meta:
        model = Node
        fields = ["q", "cluster", "state"]

    def search(self, queryset: QuerySet[Node], name: str, value: str) -> QuerySet[Node]:
        value = value.strip()
        if not value:
            return queryset
        return queryset.filter(
            Q(hostname__icontains=value) | Q(slurm_name__icontains=value) | Q(slurm_reason__icontains=value)
        )

    def filter_state(self, queryset: QuerySet[Node], name: str, value: str) -> QuerySet[Node]:
        return queryset.filter(Q(slurm__display_state=value) | Q(slurm__isnull=True, slurm_state=value))


def template_use_link(template: Any) -> SafeString:
    url = reverse("jobs:job_submit") + f"?template={template.pk}"
    return format_html('<a class="button small" href="{}">{}</a>', url, _("Submit from this template"))


def json_text(value: Any) -> SafeString:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, sort_keys=True))
