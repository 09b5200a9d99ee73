"""Jobs app rows: cluster accounts, actions (the source of truth for every remote change),
synced jobs with their state transitions, synced node and partition state, and job templates."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from inventory.models import Cluster, Node

cluster_username_validator = RegexValidator(
    r"^[a-z_][a-z0-9_.-]{0,31}$", _("A POSIX user name: lowercase letters, digits, '_', '.', '-'.")
)


class ClusterAccount(models.Model):
    """Maps a portal user to their own account on a cluster: jobs are submitted as that account."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="cluster_accounts"
    )
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="accounts")
    username = models.CharField(
        _("cluster user name"), max_length=32, validators=[cluster_username_validator]
    )
    default_account = models.CharField(_("default Slurm account"), max_length=64, blank=True)

    class Meta:
        ordering = ["cluster__name", "username"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "user"],
                name="clusteraccount_one_per_user",
                violation_error_message=_("This user already has an account on this cluster."),
            ),
            models.UniqueConstraint(
                fields=["cluster", "username"],
                name="clusteraccount_unique_username",
                violation_error_message=_("Another user is mapped to this cluster user name."),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.username}@{self.cluster}"


class ActionKind(models.TextChoices):
    DRAIN = "drain", _("Drain")
    RESUME = "resume", _("Resume")
    REBOOT = "reboot", _("Reboot")
    POWER_CYCLE = "power_cycle", _("Power cycle (BMC)")
    SUBMIT = "submit", _("Submit job")
    CANCEL = "cancel", _("Cancel job")
    # runbook steps (jobs.runbooks): a card reset runs on the node; the others are judged from rows
    RESET_CARDS = "reset_cards", _("Reset cards")
    WAIT_IDLE = "wait_idle", _("Wait until idle")
    VERIFY = "verify", _("Verify")
    GIVE_UP = "give_up", _("Give up and alert")


#: runbook steps the runbook engine judges itself from database rows (never sent to a worker)
ENGINE_ACTION_KINDS = frozenset({ActionKind.WAIT_IDLE, ActionKind.VERIFY, ActionKind.GIVE_UP})


NODE_ACTION_KINDS = frozenset(
    {ActionKind.DRAIN, ActionKind.RESUME, ActionKind.REBOOT, ActionKind.POWER_CYCLE}
)


class ActionStatus(models.TextChoices):
    PENDING = "pending", _("Pending")
    RUNNING = "running", _("Running")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")


ACTIVE_ACTION_STATUSES = (ActionStatus.PENDING, ActionStatus.RUNNING)


class Action(models.Model):
    """One requested change on a cluster. The id is also the Celery task id."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(_("kind"), max_length=16, choices=ActionKind.choices)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="actions")
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="actions")
    job = models.ForeignKey("Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="actions")
    params = models.JSONField(_("parameters"), default=dict, blank=True)
    status = models.CharField(
        _("status"), max_length=16, choices=ActionStatus.choices, default=ActionStatus.PENDING, db_index=True
    )
    attempts = models.PositiveSmallIntegerField(_("attempts"), default=0)
    output = models.TextField(_("output"), blank=True)
    error = models.TextField(_("error"), blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="cluster_actions",
    )
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    #: renewed by the worker while the action runs (its lease; see jobs.leases)
    heartbeat = models.DateTimeField(null=True, blank=True, editable=False)
    #: the runbook run this action is a step of
    run = models.ForeignKey(
        "RunbookRun", null=True, blank=True, on_delete=models.CASCADE, related_name="steps", editable=False
    )

    class Meta:
        ordering = ["-created"]
        permissions = [("operate_nodes", _("Can drain, resume, reboot and power-cycle nodes"))]
        constraints = [
            models.UniqueConstraint(
                fields=["node"],
                condition=Q(status__in=["pending", "running"]) & Q(node__isnull=False),
                name="action_one_active_per_node",
                violation_error_message=_("This node already has an action in progress."),
            ),
            models.UniqueConstraint(
                fields=["job"],
                condition=Q(status__in=["pending", "running"]) & Q(kind="cancel") & Q(job__isnull=False),
                name="action_one_active_cancel_per_job",
                violation_error_message=_("This job is already being cancelled."),
            ),
        ]

    #: set (not stored) when a request was answered with this existing action instead of a new one
    reused = False

    def __str__(self) -> str:
        target = self.params.get("target") or (self.node_id and f"node {self.node_id}") or self.cluster_id
        return f"{self.get_kind_display()} {target} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_ACTION_STATUSES


class Job(models.Model):
    """A Slurm job as last seen by the sync (or just submitted through the portal)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="jobs")
    job_id = models.PositiveBigIntegerField(_("Slurm job id"))
    #: an element of a job array (Slurm writes it 1234_7); the array's not yet split-off tasks
    #: are one record with ``array_tasks`` ("3-10%2", written 1234_[3-10%2])
    array_job_id = models.PositiveBigIntegerField(_("array job id"), null=True, blank=True)
    array_task_id = models.PositiveIntegerField(_("array task id"), null=True, blank=True)
    array_tasks = models.CharField(_("pending array tasks"), max_length=255, blank=True)
    name = models.CharField(_("name"), max_length=255, blank=True)
    user = models.CharField(_("cluster user"), max_length=64, blank=True, db_index=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="cluster_jobs",
    )
    account = models.CharField(_("account"), max_length=64, blank=True)
    partition = models.CharField(_("partition"), max_length=64, blank=True)
    state = models.CharField(_("state"), max_length=32, db_index=True)
    state_reason = models.CharField(_("pending reason"), max_length=255, blank=True)
    nodes = models.CharField(_("nodes"), max_length=1024, blank=True)
    #: The expanded node list as ",a,b," so that "runs on node X" is a plain substring match.
    node_names = models.TextField(blank=True, editable=False)
    node_count = models.PositiveIntegerField(null=True, blank=True)
    gpus = models.PositiveIntegerField(_("GPUs per node"), default=0)
    gpu_type = models.CharField(_("GPU type"), max_length=64, blank=True)
    cpus = models.PositiveIntegerField(null=True, blank=True)
    submit_time = models.DateTimeField(null=True, blank=True)
    start_time = models.DateTimeField(null=True, blank=True)
    end_time = models.DateTimeField(null=True, blank=True)
    time_limit = models.PositiveIntegerField(_("time limit (minutes)"), null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    stdout_path = models.CharField(max_length=4096, blank=True)
    work_dir = models.CharField(max_length=4096, blank=True)
    script = models.TextField(_("script"), blank=True)
    tag = models.CharField(max_length=100, blank=True)
    submitted_by_action = models.ForeignKey(
        Action, null=True, blank=True, on_delete=models.SET_NULL, related_name="submitted_jobs"
    )
    first_seen = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField(null=True, blank=True)
    #: Fingerprint of the synced fields: the sync compares it instead of reading every column back.
    sync_hash = models.BigIntegerField(default=0, editable=False)

    class Meta:
        ordering = ["-job_id"]
        permissions = [
            ("view_all_jobs", _("Can see every user's jobs")),
            ("cancel_any_job", _("Can cancel any user's job")),
            ("submit_job", _("Can submit jobs")),
        ]
        constraints = [models.UniqueConstraint(fields=["cluster", "job_id"], name="job_unique_per_cluster")]
        indexes = [models.Index(fields=["cluster", "state"]), models.Index(fields=["owner", "-job_id"])]

    def __str__(self) -> str:
        return f"{self.slurm_id} {self.name}".strip()

    @property
    def slurm_id(self) -> str:
        """The id as Slurm writes it: 1234, 1234_7 (array 1234, task 7) or 1234_[3-10%2]."""
        from jobs.cluster.types import slurm_job_display_id

        return slurm_job_display_id(self.job_id, self.array_job_id, self.array_task_id, self.array_tasks)

    @property
    def is_active(self) -> bool:
        from jobs.cluster import FINISHED_JOB_STATES

        return self.state not in FINISHED_JOB_STATES and self.state != JOB_STATE_UNKNOWN


#: Given to a job that was active and vanished from Slurm's listing without a final state.
JOB_STATE_UNKNOWN = "UNKNOWN"


class JobTransition(models.Model):
    """A job's state change as seen by the sync (feeds live updates and history)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="transitions")
    from_state = models.CharField(max_length=32, blank=True)
    to_state = models.CharField(max_length=32)
    reason = models.CharField(max_length=255, blank=True)
    at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.job_id}: {self.from_state or '-'} -> {self.to_state}"


class NodeTransition(models.Model):
    """A node's Slurm state or reason change as seen by the sync (the report and the timeline read
    them: a node that went down during a job, and came back since, is still on record)."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="slurm_transitions")
    from_state = models.CharField(max_length=32, blank=True)
    to_state = models.CharField(max_length=32)
    reason = models.CharField(max_length=255, blank=True)
    at = models.DateTimeField()

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["node", "at"])]

    def __str__(self) -> str:
        return f"{self.node_id}: {self.from_state or '-'} -> {self.to_state}"


class NodeState(models.Model):
    """What Slurm last said about an inventory node (the sync also writes Node.slurm_state/reason)."""

    node = models.OneToOneField(Node, on_delete=models.CASCADE, primary_key=True, related_name="slurm")
    state = models.CharField(_("base state"), max_length=32, blank=True)
    display_state = models.CharField(_("state"), max_length=32, blank=True)
    flags = models.JSONField(default=list, blank=True)
    reason = models.CharField(max_length=255, blank=True)
    reason_set_by = models.CharField(max_length=64, blank=True)
    reason_changed_at = models.DateTimeField(null=True, blank=True)
    cpus = models.PositiveIntegerField(null=True, blank=True)
    cpus_alloc = models.PositiveIntegerField(null=True, blank=True)
    memory_mb = models.PositiveBigIntegerField(null=True, blank=True)
    gpus_total = models.PositiveIntegerField(default=0)
    gpus_alloc = models.PositiveIntegerField(default=0)
    gpu_type = models.CharField(max_length=64, blank=True)
    partitions = models.JSONField(default=list, blank=True)
    boot_time = models.DateTimeField(null=True, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["node__hostname"]

    def __str__(self) -> str:
        return f"{self.node_id}: {self.display_state}"


class Partition(models.Model):
    """A Slurm partition as last synced; job submission is validated against these rows."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="partitions")
    name = models.CharField(max_length=64)
    state = models.CharField(max_length=16)
    is_default = models.BooleanField(default=False)
    max_time_minutes = models.PositiveIntegerField(null=True, blank=True)
    max_gpus_per_node = models.PositiveIntegerField(null=True, blank=True)
    total_nodes = models.PositiveIntegerField(null=True, blank=True)
    nodes = models.CharField(max_length=1024, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="partition_unique_per_cluster")
        ]

    def __str__(self) -> str:
        return self.name


class JobTemplate(models.Model):
    """A reusable job script with defaults; locked fields cannot be changed by the submitter."""

    name = models.CharField(_("name"), max_length=100, unique=True)
    description = models.TextField(_("description"), blank=True)
    cluster = models.ForeignKey(
        Cluster, null=True, blank=True, on_delete=models.CASCADE, related_name="templates"
    )
    script = models.TextField(_("script"))
    defaults = models.JSONField(_("defaults"), default=dict, blank=True)
    locked_fields = models.JSONField(_("locked fields"), default=list, blank=True)
    checkpoint_dir = models.CharField(
        _("checkpoint directory"),
        max_length=4096,
        blank=True,
        help_text=_("Where the job's script saves its checkpoints; a resubmission can resume from there."),
    )
    resume_variable = models.CharField(
        _("resume variable"),
        max_length=128,
        blank=True,
        validators=[RegexValidator(r"^[A-Za-z_][A-Za-z0-9_]*$", _("An environment variable name."))],
        help_text=_(
            "Set to the checkpoint directory when a job is resubmitted to resume (e.g. RESUME_FROM); "
            "the script passes it to the trainer."
        ),
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    last_updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(checkpoint_dir="", resume_variable="")
                | (~Q(checkpoint_dir="") & ~Q(resume_variable="")),
                name="jobtemplate_checkpoint_and_resume_together",
                violation_error_message=_("A checkpoint directory and a resume variable go together."),
            )
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def can_resume(self) -> bool:
        return bool(self.checkpoint_dir and self.resume_variable)


class BurnInStatus(models.TextChoices):
    PENDING = "pending", _("Pending")
    RUNNING = "running", _("Running")
    PASSED = "passed", _("Passed")
    FAILED = "failed", _("Failed")
    ERROR = "error", _("Did not run")


ACTIVE_BURNIN_STATUSES = (BurnInStatus.PENDING, BurnInStatus.RUNNING)


class BurnInRun(models.Model):
    """A burn-in of some cards of one node: a Slurm job holding them runs a stress program while
    Rackpilot holds their telemetry against their model's acceptance criteria."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="burnin_runs")
    cards = models.ManyToManyField("inventory.Card", through="BurnInResult", related_name="burnin_runs")
    duration_minutes = models.PositiveIntegerField(_("duration (minutes)"))
    program = models.TextField(_("stress program"))
    status = models.CharField(
        _("status"), max_length=16, choices=BurnInStatus.choices, default=BurnInStatus.PENDING, db_index=True
    )
    action = models.ForeignKey(Action, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="burnin_runs")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    started = models.DateTimeField(_("started"), null=True, blank=True)
    finished = models.DateTimeField(_("finished"), null=True, blank=True)
    error = models.TextField(_("error"), blank=True)

    class Meta:
        ordering = ["-created"]
        permissions = [("run_burnin", _("Can start burn-in runs"))]
        constraints = [
            models.UniqueConstraint(
                fields=["node"],
                condition=Q(status__in=["pending", "running"]),
                name="burnin_one_active_per_node",
                violation_error_message=_("This node already has a burn-in in progress."),
            )
        ]

    def __str__(self) -> str:
        return f"burn-in #{self.pk}"

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_BURNIN_STATUSES


class BurnInVerdict(models.TextChoices):
    PENDING = "pending", _("Pending")
    PASS = "pass", _("Pass")
    FAIL = "fail", _("Fail")


class BurnInResult(models.Model):
    """One card's acceptance record from a run: a verdict and each criterion with its measurement."""

    run = models.ForeignKey(BurnInRun, on_delete=models.CASCADE, related_name="results")
    card = models.ForeignKey("inventory.Card", on_delete=models.CASCADE, related_name="burnin_results")
    verdict = models.CharField(
        _("verdict"), max_length=8, choices=BurnInVerdict.choices, default=BurnInVerdict.PENDING
    )
    #: [{"key", "status" (pass / fail / unmeasured / not_applicable), "value", "limit", "low", "high",
    #:   "counts"}], see jobs.burnin.criteria
    criteria = models.JSONField(default=list, blank=True)
    samples = models.PositiveIntegerField(_("telemetry samples"), default=0)
    evaluated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "card__slot"]
        constraints = [models.UniqueConstraint(fields=["run", "card"], name="burninresult_one_per_card")]

    def __str__(self) -> str:
        return f"{self.run_id}/{self.card_id}: {self.verdict}"


class Runbook(models.Model):
    """A remediation as data: ordered steps (``jobs.runbooks.STEP_KINDS``), each with an optional
    condition, a timeout and where to go on failure (the escalation path)."""

    name = models.CharField(_("name"), max_length=100, unique=True)
    description = models.TextField(_("description"), blank=True)
    steps = models.JSONField(_("steps"), default=list)
    trigger_check_kinds = models.JSONField(
        _("started by failing health checks of kinds"),
        default=list,
        blank=True,
        help_text=_(
            "A health check of one of these kinds turning failing on a node starts this runbook there."
        ),
    )
    enabled = models.BooleanField(_("enabled"), default=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("runbook")
        verbose_name_plural = _("runbooks")
        permissions = [("run_runbook", _("Can start and cancel runbooks"))]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        from jobs.runbooks import steps_clean

        self.steps = steps_clean(self.steps)


class RunStatus(models.TextChoices):
    RUNNING = "running", _("Running")
    WAITING = "waiting", _("Waiting for an operator")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")
    CANCELLED = "cancelled", _("Cancelled")


ACTIVE_RUN_STATUSES = (RunStatus.RUNNING, RunStatus.WAITING)


class RunbookRun(models.Model):
    """One runbook running on one node: the current step and what each step did (its Action rows)."""

    runbook = models.ForeignKey(
        Runbook, on_delete=models.PROTECT, related_name="runs", verbose_name=_("runbook")
    )
    node = models.ForeignKey(
        Node, on_delete=models.CASCADE, related_name="runbook_runs", verbose_name=_("node")
    )
    status = models.CharField(
        _("status"), max_length=16, choices=RunStatus.choices, default=RunStatus.RUNNING
    )
    step = models.CharField(_("current step"), max_length=64, blank=True)
    action = models.ForeignKey(
        Action, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    reason = models.CharField(_("why"), max_length=255, blank=True)
    #: the cards the run resets (empty: every active card of the node)
    cards = models.JSONField(_("cards"), default=list, blank=True)
    summary = models.TextField(_("summary"), blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(_("started"), auto_now_add=True)
    step_started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(_("finished"), null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        verbose_name = _("runbook run")
        verbose_name_plural = _("runbook runs")
        constraints = [
            models.UniqueConstraint(
                fields=["node"],
                condition=Q(status__in=["running", "waiting"]),
                name="runbookrun_one_active_per_node",
                violation_error_message=_("A runbook is already running on this node."),
            )
        ]

    def __str__(self) -> str:
        return f"{self.runbook} on {self.node} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_RUN_STATUSES
