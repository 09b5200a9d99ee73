from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _
from rest_framework import serializers

from inventory.models import Cluster, Node
from jobs import selectors
from jobs.models import (
    Action,
    ActionKind,
    ClusterAccount,
    Job,
    JobTemplate,
    JobTransition,
    NodeState,
    Partition,
)
from monitoring.models import Event
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
    exclude = serializers.ListField(
        child=serializers.CharField(max_length=63), required=False, max_length=1024,
        help_text="Node names the job must not run on (sbatch --exclude).",
    )  # fmt: skip

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
        fields = [*BASE, "name", "description", "cluster", "script", "defaults", "locked_fields", "checkpoint_dir",
                  "resume_variable", "created_by",
                  "created", "last_updated"]  # fmt: skip
        read_only_fields = ["created_by", "created", "last_updated"]


# -- the job report (read-only shapes: drf-spectacular documents them, JobViewSet.report fills them)


class ReportSuspectSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["node", "card", "cable"])
    id = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]  # the API's key; DRF pops declared fields


class ReportFindingSerializer(serializers.Serializer):
    """A note or a likely cause, with its evidence and what to do."""

    code = serializers.CharField(help_text="e.g. nccl_link, xid_bus, card_oom, idle_cards, io_bound")
    severity = serializers.ChoiceField(choices=Event.Severity.choices)
    title = serializers.CharField()
    evidence = serializers.ListField(child=serializers.CharField())
    advice = serializers.ListField(child=serializers.CharField())
    score = serializers.IntegerField(help_text="Diagnosis rank: higher is more likely (0 for notes).")
    suspect = ReportSuspectSerializer(allow_null=True)


class ReportCardSerializer(serializers.Serializer):
    card_id = serializers.IntegerField(allow_null=True)
    card_ref = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # the API's key; DRF pops declared fields
    node = serializers.CharField()
    vendor = serializers.CharField()
    util_mean = serializers.FloatField(allow_null=True, help_text="%")
    util_peak = serializers.FloatField(allow_null=True, help_text="%")
    mem_mean = serializers.FloatField(allow_null=True, help_text="bytes")
    mem_peak = serializers.FloatField(allow_null=True, help_text="bytes")
    mem_total = serializers.FloatField(allow_null=True, help_text="bytes")
    power_mean = serializers.FloatField(allow_null=True, help_text="W")
    power_peak = serializers.FloatField(allow_null=True, help_text="W")
    power_min = serializers.FloatField(allow_null=True, help_text="W")
    energy_kwh = serializers.FloatField(allow_null=True, help_text="mean power x the window")
    temp_mean = serializers.FloatField(allow_null=True, help_text="°C")
    temp_peak = serializers.FloatField(allow_null=True, help_text="°C")
    hot_share = serializers.FloatField(help_text="Share of the window above 85 °C (0-1).")
    throttle = serializers.DictField(
        child=serializers.FloatField(),
        help_text="Throttle reason -> share of the window it was active (0-1).",
    )
    throttled_thermal = serializers.FloatField(help_text="Share of the window throttled for temperature.")
    idle = serializers.BooleanField(help_text="Peak utilisation under 5 % the whole window.")


class ReportNodeSerializer(serializers.Serializer):
    node_id = serializers.IntegerField()
    hostname = serializers.CharField()
    slurm_name = serializers.CharField()
    disk_iops_mean = serializers.FloatField(allow_null=True)
    disk_iops_peak = serializers.FloatField(allow_null=True)
    net_util_mean = serializers.FloatField(allow_null=True, help_text="%")
    net_util_peak = serializers.FloatField(allow_null=True, help_text="%")
    power_mean = serializers.FloatField(allow_null=True, help_text="W (BMC)")
    power_peak = serializers.FloatField(allow_null=True, help_text="W (BMC)")
    power_capacity = serializers.FloatField(allow_null=True, help_text="W")
    cards = ReportCardSerializer(many=True)


class JobReportSerializer(serializers.Serializer):
    """Efficiency, notes and (for a failed job) the ranked likely causes, over the job's window."""

    job = serializers.IntegerField()
    state = serializers.CharField()
    active = serializers.BooleanField(help_text="Still running: the window ends now.")
    start = serializers.DateTimeField(allow_null=True)
    end = serializers.DateTimeField(allow_null=True)
    elapsed_s = serializers.FloatField()
    time_limit_s = serializers.FloatField(allow_null=True)
    time_used_pct = serializers.FloatField(allow_null=True)
    resolution_s = serializers.IntegerField(help_text="Stored resolution read: 0 raw, 60 or 3600 rollups.")
    energy_kwh = serializers.FloatField(allow_null=True)
    failed = serializers.BooleanField()
    unexplained = serializers.BooleanField(help_text="Failed, and nothing in the evidence explains it.")
    diagnosis = ReportFindingSerializer(many=True)
    notes = ReportFindingSerializer(many=True)
    nodes = ReportNodeSerializer(many=True)
    suspect_node = ReportSuspectSerializer(allow_null=True)
    output = serializers.CharField(help_text="The tail of the job's output file as last read.")


class JobResubmitSerializer(serializers.Serializer):
    exclude = serializers.CharField(
        required=False, allow_blank=True, max_length=63,
        help_text="One of the job's nodes (its Slurm name) to leave out: sbatch --exclude.",
    )  # fmt: skip
    resume = serializers.BooleanField(
        required=False, default=False,
        help_text="Set the job template's resume variable to its checkpoint directory.",
    )  # fmt: skip


class TimelineEntrySerializer(serializers.Serializer):
    ts = serializers.DateTimeField()
    source = serializers.ChoiceField(  # type: ignore[assignment]  # the API's key; DRF pops declared fields
        choices=["slurm", "action", "alert", "event", "readiness", "change"]
    )
    severity = serializers.ChoiceField(choices=Event.Severity.choices)
    title = serializers.CharField()
    detail = serializers.CharField()
    who = serializers.CharField(help_text="Who asked for an action or made a change.")
    target = serializers.CharField(help_text="The object the entry is about.")
    url = serializers.CharField(allow_null=True, help_text="Its page.")
