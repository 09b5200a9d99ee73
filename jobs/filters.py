"""One FilterSet per model, shared by the (coming) HTML lists and the API viewsets."""

from __future__ import annotations

import django_filters as df
from django.db.models import Q, QuerySet
from django.utils.translation import gettext_lazy as _

from inventory.models import Node
from jobs.models import Action, ActionKind, ActionStatus, ClusterAccount, Job, JobTemplate, NodeState
from portal.filters import BooleanFilter, PortalFilterSet


class JobFilterSet(PortalFilterSet):
    labels = {
        "cluster": _("Cluster"),
        "owner": _("Owner"),
        "partition": _("Partition"),
        "job_id": _("Job id"),
    }
    user = df.CharFilter(field_name="user", label=_("Cluster user"))
    state = df.MultipleChoiceFilter(
        field_name="state", label=_("State"), lookup_expr="iexact",
        choices=[(s, s) for s in ("PENDING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "COMPLETED",
                                  "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
                                  "BOOT_FAIL", "DEADLINE", "UNKNOWN")],
    )  # fmt: skip
    active = BooleanFilter(method="filter_active", label=_("Active (pending or running)"))
    partition = df.CharFilter(field_name="partition")
    node = df.CharFilter(method="filter_node", label=_("Runs on node (Slurm name)"))
    node_id = df.ModelChoiceFilter(method="filter_node_id", queryset=Node.objects.all(), label=_("Node"))
    q = df.CharFilter(method="search", label=_("Search"))

    class Meta:
        model = Job
        fields = ["cluster", "owner", "user", "state", "partition", "job_id"]

    def filter_node(self, queryset: QuerySet[Job], name: str, value: str) -> QuerySet[Job]:
        value = value.strip()
        return queryset.filter(node_names__contains=f",{value},") if value else queryset

    def filter_node_id(self, queryset: QuerySet[Job], name: str, value: Node | None) -> QuerySet[Job]:
        if value is None:
            return queryset
        return queryset.filter(
            cluster_id=value.cluster_id or 0, node_names__contains=f",{value.effective_slurm_name},"
        )

    def filter_active(self, queryset: QuerySet[Job], name: str, value: bool | None) -> QuerySet[Job]:
        from jobs.cluster.types import ACTIVE_JOB_STATES

        if value is None:
            return queryset
        cond = Q(state__in=ACTIVE_JOB_STATES)
        return queryset.filter(cond) if value else queryset.exclude(cond)

    def search(self, queryset: QuerySet[Job], name: str, value: str) -> QuerySet[Job]:
        value = value.strip()
        if not value:
            return queryset
        cond = Q(name__icontains=value) | Q(user__icontains=value)
        if value.isdigit():
            cond |= Q(job_id=int(value)) | Q(array_job_id=int(value))  # an array: every element
        array_job, sep, task = value.partition("_")
        if sep and array_job.isdigit() and task.isdigit() and len(value) < 30:  # 1234_7, as Slurm writes it
            cond |= Q(array_job_id=int(array_job), array_task_id=int(task))
        return queryset.filter(cond)


class ActionFilterSet(PortalFilterSet):
    labels = {
        "kind": _("Kind"),
        "status": _("Status"),
        "cluster": _("Cluster"),
        "node": _("Node"),
        "job": _("Job"),
        "requested_by": _("Requested by"),
    }
    kind = df.MultipleChoiceFilter(choices=ActionKind.choices)
    status = df.MultipleChoiceFilter(choices=ActionStatus.choices)

    class Meta:
        model = Action
        fields = ["kind", "status", "cluster", "node", "job", "requested_by"]


class ClusterAccountFilterSet(df.FilterSet):
    class Meta:
        model = ClusterAccount
        fields = ["cluster", "user", "username"]


class NodeStateFilterSet(df.FilterSet):
    cluster = df.NumberFilter(field_name="node__cluster")

    class Meta:
        model = NodeState
        fields = ["node", "display_state", "state"]


class JobTemplateFilterSet(df.FilterSet):
    class Meta:
        model = JobTemplate
        fields = ["cluster", "name"]
