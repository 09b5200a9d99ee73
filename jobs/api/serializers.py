from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from inventory.models import Card, Cluster, Node
from jobs import selectors
from jobs.burnin.criteria import KEYS as CRITERIA_KEYS
from jobs.burnin.criteria import STATUSES as CRITERION_STATUSES
from jobs.burnin.selectors import criterion_rows
from jobs.models import (
    Action,
    ActionKind,
    BurnInResult,
    BurnInRun,
    ClusterAccount,
    Job,
    JobTemplate,
    JobTransition,
    NodeState,
    Partition,
)
from portal.api.serializers import BriefRelatedField, PortalModelSerializer

BASE = ["id", "url", "display"]


class ActionSerializer(PortalModelSerializer):
    class Meta:
        model = Action
        fields = [*BASE, "kind", "cluster", "node", "job", "params", "status", "attempts", "output", "error",
                  "requested_by", "created", "started", "finished"]  # fmt: skip
        read_only_fields = fields


class JobSubmitParamsSerializer(serializers.Serializer):
    """`params` of a submit: the job's name and script and the spec fields, typed. The cluster-level
    checks (account, partitions, limits) stay in jobs.services.job_submit_check."""

    name = serializers.CharField(max_length=128)
    script = serializers.CharField(trim_whitespace=False, max_length=1_000_000)
    partition = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=64)
    account = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=64)
    nodes = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=100_000)
    ntasks_per_node = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=100_000
    )
    cpus_per_task = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=100_000)
    gpus = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=1024)
    gpu_type = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=64)
    time_limit_minutes = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=525_600_000
    )
    work_dir = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=4096)
    output = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=4096)
    environment = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {"non_field_errors": [_("Unknown job fields: %(f)s") % {"f": ", ".join(unknown)}]}
                )
        return super().to_internal_value(data)


class ActionRequestSerializer(serializers.Serializer):
    """POST /api/jobs/actions/: drain/resume/reboot/power_cycle need `node`, cancel needs `job`,
    submit needs `cluster` and the job in `params` (name, script, partition, gpus, ...)."""

    kind = serializers.ChoiceField(choices=ActionKind.choices)
    node = BriefRelatedField(queryset=Node.objects.all(), required=False, allow_null=True)
    job = BriefRelatedField(queryset=Job.objects.none(), required=False, allow_null=True)
    cluster = BriefRelatedField(queryset=Cluster.objects.all(), required=False, allow_null=True)
    params = serializers.DictField(required=False, default=dict)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        # a job the user may not see does not exist for them
        self.fields["job"].queryset = selectors.job_list(user=getattr(request, "user", None))  # type: ignore[attr-defined]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        kind = attrs["kind"]
        if kind == ActionKind.SUBMIT and not attrs.get("cluster"):
            raise serializers.ValidationError({"cluster": [_("A cluster is required to submit a job.")]})
        if kind == ActionKind.SUBMIT:
            job = JobSubmitParamsSerializer(data=attrs.get("params") or {})
            if not job.is_valid():
                raise serializers.ValidationError({"params": job.errors})
            attrs["params"] = {k: v for k, v in job.validated_data.items() if v is not None}
        if kind == ActionKind.CANCEL and not attrs.get("job"):
            raise serializers.ValidationError({"job": [_("A job is required.")]})
        if kind not in (ActionKind.SUBMIT, ActionKind.CANCEL) and not attrs.get("node"):
            raise serializers.ValidationError({"node": [_("A node is required.")]})
        return attrs


class NodeActionSerializer(serializers.Serializer):
    """Body of POST /api/inventory/nodes/{id}/<action>/."""

    reason = serializers.CharField(required=False, allow_blank=True, max_length=200, trim_whitespace=False)
    asap = serializers.BooleanField(required=False, default=False)
    next_state = serializers.ChoiceField(choices=["resume", "down"], required=False, allow_null=True)


class JobSerializer(PortalModelSerializer):
    submitted_by_action: serializers.PrimaryKeyRelatedField[Any] = serializers.PrimaryKeyRelatedField(
        read_only=True
    )
    slurm_id = serializers.CharField(
        read_only=True, help_text="The id as Slurm writes it: 1234, 1234_7 (array 1234, task 7), 1234_[3-10]."
    )

    class Meta:
        model = Job
        fields = [*BASE, "cluster", "job_id", "slurm_id", "array_job_id", "array_task_id", "array_tasks", "name", "user", "owner", "account", "partition", "state",
                  "state_reason", "nodes", "node_count", "gpus", "gpu_type", "cpus", "submit_time", "start_time",
                  "end_time", "time_limit", "exit_code", "stdout_path", "work_dir", "script", "tag",
                  "submitted_by_action", "first_seen", "last_seen"]  # fmt: skip
        read_only_fields = fields


class JobTransitionSerializer(serializers.ModelSerializer):
    class Meta:
        model = JobTransition
        fields = ["from_state", "to_state", "reason", "at"]


class ClusterAccountSerializer(PortalModelSerializer):
    class Meta:
        model = ClusterAccount
        fields = [*BASE, "user", "cluster", "username", "default_account"]


class NodeStateSerializer(serializers.ModelSerializer):
    node = BriefRelatedField(read_only=True)

    class Meta:
        model = NodeState
        fields = ["node", "state", "display_state", "flags", "reason", "reason_set_by", "reason_changed_at",
                  "cpus", "cpus_alloc", "memory_mb", "gpus_total", "gpus_alloc", "gpu_type", "partitions",
                  "boot_time", "last_seen"]  # fmt: skip


class PartitionSerializer(PortalModelSerializer):
    class Meta:
        model = Partition
        fields = [*BASE, "cluster", "name", "state", "is_default", "max_time_minutes", "max_gpus_per_node",
                  "total_nodes", "nodes", "last_seen"]  # fmt: skip
        read_only_fields = fields


class JobTemplateSerializer(PortalModelSerializer):
    class Meta:
        model = JobTemplate
        fields = [*BASE, "name", "description", "cluster", "script", "defaults", "locked_fields", "created_by",
                  "created", "last_updated"]  # fmt: skip
        read_only_fields = ["created_by", "created", "last_updated"]


class BurnInCriterionSerializer(serializers.Serializer):
    """One acceptance criterion: the measured figure against its limit (units: W, °C, %, counts)."""

    key = serializers.ChoiceField(choices=list(CRITERIA_KEYS))
    label = serializers.CharField()  # type: ignore[assignment]  # a declared field, not Field.label
    status = serializers.ChoiceField(choices=list(CRITERION_STATUSES))
    fails = serializers.BooleanField(help_text="Whether this criterion makes the card fail.")
    value = serializers.FloatField(allow_null=True)
    limit = serializers.FloatField(allow_null=True)
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    counts = serializers.DictField(child=serializers.IntegerField())
    state = serializers.CharField(allow_blank=True, help_text="The Slurm state of the stress job.")


class BurnInResultSerializer(serializers.ModelSerializer):
    card = BriefRelatedField(read_only=True)
    run = serializers.IntegerField(source="run_id", read_only=True)
    criteria = serializers.SerializerMethodField()

    class Meta:
        model = BurnInResult
        fields = ["run", "card", "verdict", "criteria", "samples", "evaluated_at"]
        read_only_fields = fields

    @extend_schema_field(BurnInCriterionSerializer(many=True))
    def get_criteria(self, obj: BurnInResult) -> list[dict[str, Any]]:
        rows = {row["key"]: row for row in criterion_rows(obj)}
        return [
            {**dict.fromkeys(("value", "limit", "low", "high")), "counts": {}, "state": "", **x,
             "label": rows[x["key"]]["label"], "fails": rows[x["key"]]["fails"]}
            for x in obj.criteria
            if x["key"] in rows
        ]  # fmt: skip


class BurnInRunSerializer(PortalModelSerializer):
    node = BriefRelatedField(read_only=True)
    job = BriefRelatedField(read_only=True)
    action = BriefRelatedField(read_only=True)
    results = BurnInResultSerializer(many=True, read_only=True)
    requested_by = serializers.CharField(source="requested_by.username", read_only=True, default=None)

    class Meta:
        model = BurnInRun
        fields = [*BASE, "node", "status", "duration_minutes", "program", "action", "job", "requested_by",
                  "created", "started", "finished", "error", "results"]  # fmt: skip
        read_only_fields = fields


class BurnInStartSerializer(serializers.Serializer):
    node = serializers.PrimaryKeyRelatedField(queryset=Node.objects.all())
    cards = serializers.PrimaryKeyRelatedField(
        queryset=Card.objects.all(),
        many=True,
        required=False,
        help_text="Empty: every card that may be burnt in.",
    )
    duration_minutes = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, help_text="Empty: the card model's burn-in duration."
    )
    program = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, max_length=100_000,
        help_text="Shell lines; the duration in seconds is in $BURNIN_SECONDS. Empty: the model's or its vendor's default.",
    )  # fmt: skip
