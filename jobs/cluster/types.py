"""Plain frozen dataclasses describing nodes, jobs, partitions, job specs and command results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

TAG_PREFIX = "rackpilot:"

#: Job states after which a job will not change any more.
FINISHED_JOB_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "REVOKED",
        "SPECIAL_EXIT",
    }
)
ACTIVE_JOB_STATES = frozenset(
    {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"}
)


def slurm_job_display_id(
    job_id: int, array_job_id: int | None, array_task_id: int | None, array_tasks: str | None
) -> str:
    """``1234`` (a plain job), ``1234_7`` (array 1234, task 7), ``1234_[3-10%2]`` (its pending tasks)."""
    if not array_job_id:
        return str(job_id)
    if array_task_id is not None:
        return f"{array_job_id}_{array_task_id}"
    if array_tasks:
        return f"{array_job_id}_[{array_tasks}]"
    return str(job_id)


@dataclass(frozen=True)
class NodeInfo:
    """One compute node.

    ``state`` is Slurm's base state, lowercase (idle, mixed, allocated, down, completing,
    future, unknown, error, planned). ``flags`` are Slurm's state flags, uppercase (DRAIN,
    REBOOT_REQUESTED, REBOOT_ISSUED, NOT_RESPONDING, COMPLETING, MAINTENANCE, ...).
    """

    name: str
    state: str
    flags: frozenset[str] = frozenset()
    reason: str | None = None
    reason_set_by: str | None = None
    reason_changed_at: datetime | None = None
    cpus: int | None = None
    cpus_alloc: int | None = None
    memory_mb: int | None = None
    gpus_total: int = 0
    gpus_used: int = 0
    gpu_type: str | None = None
    partitions: tuple[str, ...] = ()
    boot_time: datetime | None = None

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.flags

    @property
    def display_state(self) -> str:
        """What sinfo would call it: reboot, drained, draining, down, alloc, mixed, idle, ..."""
        if self.flags & {"REBOOT_REQUESTED", "REBOOT_ISSUED"} or self.state == "reboot":
            return "reboot"
        if self.state == "down" or "NOT_RESPONDING" in self.flags:
            return "down"
        if "DRAIN" in self.flags:
            if self.state in ("mixed", "allocated", "completing") or "COMPLETING" in self.flags:
                return "draining"
            return "drained"
        if self.state == "allocated":
            return "alloc"
        return self.state


@dataclass(frozen=True)
class JobInfo:
    """One Slurm job (queued, running or recently finished).

    ``gpus`` is the number of GPUs per node the job asked for (``--gres=gpu:N``).
    ``exit_code`` is the real exit status (a signal N gives 128+N), None while not finished.
    ``time_limit_minutes`` None means unlimited (or unknown).
    """

    job_id: int
    name: str
    user: str | None
    state: str
    account: str | None = None
    partition: str | None = None
    state_reason: str | None = None
    nodes: str = ""
    node_count: int | None = None
    gpus: int = 0
    gpu_type: str | None = None
    cpus: int | None = None
    submit_time: datetime | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    time_limit_minutes: int | None = None
    exit_code: int | None = None
    stdout_path: str | None = None
    work_dir: str | None = None
    comment: str | None = None
    #: an element of a job array: the array's job id and the element's task id (``1234_7``); the
    #: array's record whose tasks are not yet split off has ``array_tasks`` instead (``3-10%2``)
    array_job_id: int | None = None
    array_task_id: int | None = None
    array_tasks: str | None = None

    @property
    def slurm_id(self) -> str:
        """The id as Slurm writes it: ``1234``, ``1234_7`` or ``1234_[3-10%2]``."""
        return slurm_job_display_id(self.job_id, self.array_job_id, self.array_task_id, self.array_tasks)

    @property
    def tag(self) -> str | None:
        """The idempotency tag from ``--comment=rackpilot:<tag>``, if any."""
        if self.comment and self.comment.startswith(TAG_PREFIX):
            return self.comment[len(TAG_PREFIX) :]
        return None

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_JOB_STATES

    @property
    def active(self) -> bool:
        return not self.finished


@dataclass(frozen=True)
class PartitionInfo:
    name: str
    state: str  # up / down / drain / inactive
    max_time_minutes: int | None = None  # None = unlimited
    nodes: str = ""
    is_default: bool = False
    max_gpus_per_node: int | None = None
    total_nodes: int | None = None


@dataclass(frozen=True)
class JobSpec:
    """What to submit. ``script`` goes to sbatch on stdin, byte for byte.

    ``gpus`` is GPUs per node. ``tag`` must be unique per submission: it is stored as
    ``--comment=rackpilot:<tag>`` so a retry finds the job the first try created.
    ``environment`` is exported on top of the submitting user's environment (values must not
    contain ',' — Slurm's ``--export`` cannot escape it). ``exclude``: plain node names, no hostlist
    expressions.
    """

    name: str
    script: str
    tag: str
    partition: str | None = None
    account: str | None = None
    nodes: int = 1
    ntasks_per_node: int | None = None
    cpus_per_task: int | None = None
    gpus: int = 0
    gpu_type: str | None = None
    time_limit_minutes: int | None = None
    work_dir: str | None = None
    output: str | None = None
    environment: Mapping[str, str] = field(default_factory=dict)
    #: node names the job must not run on (``sbatch --exclude``)
    exclude: Sequence[str] = ()


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str
    duration: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True)
class SacctRecord:
    """One line of ``sacct --parsable2 -o JobID,State,ExitCode``."""

    job_id: int
    step: str | None  # None for the job itself, "batch", "extern", "0", ...
    state: str
    exit_code: int | None
    signal: int | None


@dataclass(frozen=True)
class BMC:
    """How to reach a node's baseboard management controller."""

    kind: Literal["ipmi", "redfish"]
    address: str
    username: str
    password: str = field(repr=False)
    #: Redfish only: the ComputerSystem resource to reset.
    system_path: str = "/redfish/v1/Systems/1"
    #: Redfish only: BMCs often have self-signed certificates; pin or disable deliberately.
    verify_tls: bool = True
