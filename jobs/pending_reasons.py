"""Slurm's pending reasons and common failure signs, explained in plain words with what to do.

Pure data and pure functions (no database). Sources: the reasons listed in FORMATS.md section 5
and the troubleshooting table of the cluster field guide (pending jobs, invalid account,
distributed start-up hanging, idle GPUs, CUDA out of memory, slow InfiniBand).

- :func:`explain_pending_reason` turns ``squeue``'s reason (``Resources``,
  ``(ReqNodeNotAvail, UnavailableNodes:n[01-02])``, ``AssocGrpGRES`` …) into an :class:`Explanation`.
- :func:`explain_submit_error` explains ``sbatch: error: Batch job submission failed: …``.
- :func:`diagnose_output` recognises trouble in a job's output (OOM, NCCL timeouts …).

``{job_id}`` in a command is replaced by the job's id, and ``<partition>`` by its partition, when given.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from typing import Literal

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

Text = str | Promise
#: wait: nothing to do but wait; change: the researcher should change the job; admin: ask an admin.
Who = Literal["wait", "change", "admin"]


@dataclass(frozen=True)
class Explanation:
    code: str
    title: Text
    explanation: Text
    actions: tuple[Text, ...] = ()
    commands: tuple[str, ...] = ()
    who: Who = "wait"
    detail: str = ""  # e.g. the unavailable nodes, or the raw text that matched
    known: bool = True


def _e(
    code: str,
    title: Text,
    explanation: Text,
    actions: tuple[Text, ...] = (),
    commands: tuple[str, ...] = (),
    who: Who = "wait",
) -> Explanation:
    return Explanation(code, title, explanation, actions, commands, who)


_PENDING_TABLE = ("scontrol show partition", "sinfo -R", "sprio -j {job_id}")

PENDING_REASONS: dict[str, Explanation] = {
    e.code: e
    for e in [
        _e(
            "Resources",
            _("Waiting for free resources"),
            _(
                "The job is next in line, but the nodes, GPUs, CPUs or memory it asks for are busy "
                "with other jobs. It starts by itself as soon as they are released."
            ),
            (
                _("Nothing to do: it will start when enough resources are free."),
                _("To start sooner, ask for fewer GPUs or nodes, or a shorter time limit (backfill)."),
            ),
            ("squeue -p <partition> -t RUNNING", "sinfo -p <partition>"),
        ),
        _e(
            "Priority",
            _("Other jobs are ahead in the queue"),
            _(
                "Jobs with a higher priority are waiting for the same resources. Priority grows "
                "while a job waits and depends on how much your account has used recently."
            ),
            (
                _("Nothing to do: the job moves up as it waits."),
                _("A shorter time limit lets the scheduler fit it into gaps (backfill)."),
            ),
            ("sprio -j {job_id}", "sshare -u $USER"),
        ),
        _e(
            "ReqNodeNotAvail",
            _("A node the job needs is not available"),
            _(
                "One or more nodes the job requires (or that are the only ones able to run it) are "
                "down, drained, reserved or being rebooted."
            ),
            (
                _("If you asked for particular nodes, remove that request or pick others."),
                _("Otherwise ask an admin when the listed nodes come back."),
            ),
            ("sinfo -R", "scontrol show job {job_id}"),
            "admin",
        ),
        _e(
            "Dependency",
            _("Waiting for another job to finish"),
            _("The job was submitted with a dependency and waits until that job reaches the required state."),
            (_("Nothing to do: it starts when the job it depends on is done."),),
            ("scontrol show job {job_id} | grep -i dependency",),
        ),
        _e(
            "DependencyNeverSatisfied",
            _("The job it depends on can never satisfy the dependency"),
            _(
                "The job this one depends on ended in a way that does not meet the condition (for "
                "example it failed while this job needs afterok). It will never start by itself."
            ),
            (_("Cancel this job and resubmit it without the dependency, or fix and rerun the first job."),),
            ("scancel {job_id}",),
            "change",
        ),
        _e(
            "QOSMaxJobsPerUserLimit",
            _("You are running as many jobs as your QOS allows"),
            _(
                "The quality of service (QOS) caps how many jobs one user may run at once; you are at "
                "that cap. The job starts when one of your running jobs ends."
            ),
            (_("Wait for one of your jobs to finish, or cancel one you no longer need."),),
            ("squeue -u $USER -t RUNNING", "sacctmgr show qos"),
        ),
        _e(
            "AssociationJobLimit",
            _("Your account has reached its job limit"),
            _(
                "The limits of your Slurm account (association) allow no more running jobs right now. "
                "It starts when the account's other jobs finish."
            ),
            (_("Wait, or ask an admin to raise the account's limit."),),
            ("sacctmgr show assoc user=$USER format=account,maxjobs,grpjobs",),
        ),
        _e(
            "PartitionNodeLimit",
            _("More nodes than the partition allows"),
            _(
                "The job asks for more nodes than this partition has or lets one job use. "
                "It will not start as it is."
            ),
            (_("Cancel and resubmit with fewer nodes, or choose a partition with more nodes."),),
            ("scontrol show partition", "scancel {job_id}"),
            "change",
        ),
        _e(
            "PartitionTimeLimit",
            _("Time limit longer than the partition allows"),
            _(
                "The requested time limit exceeds the partition's maximum run time. "
                "It will not start as it is."
            ),
            (
                _("Cancel and resubmit with a time limit within the partition's maximum."),
                _("Or choose a partition with a longer limit."),
            ),
            ("scontrol show partition", "scancel {job_id}"),
            "change",
        ),
        _e(
            "PartitionDown",
            _("The partition is down"),
            _("The partition is not accepting jobs for scheduling right now (usually maintenance)."),
            (_("Ask an admin when it comes back, or choose another partition."),),
            ("sinfo -s",),
            "admin",
        ),
        _e(
            "PartitionInactive",
            _("The partition is inactive"),
            _("The partition neither accepts nor schedules jobs."),
            (_("Choose another partition or ask an admin."),),
            ("sinfo -s",),
            "admin",
        ),
        _e(
            "JobHeldAdmin",
            _("Held by an administrator"),
            _("An administrator put this job on hold. It will not start until they release it."),
            (_("Ask an admin why it is held and to release it."),),
            ("scontrol show job {job_id}",),
            "admin",
        ),
        _e(
            "JobHeldUser",
            _("Held by you"),
            _("The job was put on hold by its owner (or submitted with --hold)."),
            (_("Release it when you want it to run."),),
            ("scontrol release {job_id}",),
            "change",
        ),
        _e(
            "BeginTime",
            _("Waiting for its start time"),
            _("The job was submitted with a start time (--begin) that has not come yet."),
            (_("Nothing to do, or change the start time."),),
            ("scontrol update jobid={job_id} StartTime=now",),
        ),
        _e(
            "NodeDown",
            _("A node the job needs is down"),
            _(
                "A node required by the job is down. "
                "The job waits until it is back, or runs elsewhere if it can."
            ),
            (_("Tell an admin if this lasts; remove any request for that particular node."),),
            ("sinfo -R",),
            "admin",
        ),
        _e(
            "InvalidAccount",
            _("Invalid account"),
            _(
                "The Slurm account the job was submitted under does not exist, or you are not a member "
                "of it, or it may not use this partition. It will never start."
            ),
            (
                _("Cancel and resubmit with an account you belong to."),
                _("Ask an admin to add you to the account if it should be yours."),
            ),
            ("sacctmgr show user $USER withassoc", "scancel {job_id}"),
            "change",
        ),
        _e(
            "InvalidQOS",
            _("Invalid QOS"),
            _(
                "The quality of service (QOS) the job asks for does not exist "
                "or is not allowed for your account."
            ),
            (_("Cancel and resubmit without the QOS option or with one you may use."),),
            ("sacctmgr show assoc user=$USER format=account,qos", "scancel {job_id}"),
            "change",
        ),
        _e(
            "WaitingForScheduling",
            _("Waiting for the scheduler"),
            _("The scheduler has not looked at this job yet; this normally takes seconds."),
            (_("Nothing to do."),),
        ),
        _e(
            "None",
            _("Just submitted"),
            _("Slurm has not evaluated the job yet."),
            (_("Nothing to do."),),
        ),
        _e(
            "Reservation",
            _("Waiting for its reservation"),
            _("The job runs in a reservation that has not started yet."),
            (_("Nothing to do, or submit without the reservation."),),
            ("scontrol show reservation",),
        ),
        _e(
            "BadConstraints",
            _("No node matches the job's constraints"),
            _("The features, GPU type or memory requested match no node of the partition."),
            (_("Cancel and resubmit with constraints some node satisfies."),),
            ("sinfo -o '%N %f %G %m'", "scancel {job_id}"),
            "change",
        ),
    ]
}

# The Assoc*/QOS* limit family: AssocGrpGRES, AssocMaxJobsLimit, QOSGrpCpuLimit, QOSMaxGRESPerUser ...
_LIMIT_RE = re.compile(r"^(Assoc|QOS)(Grp|Max)[A-Za-z]+$")
_RESOURCES: tuple[tuple[str, Text], ...] = (
    ("GRESRunMinutes", _("GPU-minutes of running jobs")),
    ("GRES", _("GPUs")),
    ("CpuRunMinutes", _("CPU-minutes of running jobs")),
    ("CpuMinutes", _("CPU-minutes")),
    ("Cpu", _("CPUs")),
    ("MemRunMinutes", _("memory-minutes of running jobs")),
    ("Mem", _("memory")),
    ("NodeRunMinutes", _("node-minutes of running jobs")),
    ("Node", _("nodes")),
    ("Wall", _("run time")),
    ("Submit", _("submitted jobs")),
    ("Jobs", _("running jobs")),
    ("Billing", _("billing units")),
)


def _limit_family(code: str) -> Explanation | None:
    m = _LIMIT_RE.match(code)
    if not m:
        return None
    scope_is_qos = m.group(1) == "QOS"
    rest = code[len(m.group(1)) :]
    resource: Text = _("resources")
    for key, label in _RESOURCES:
        if key.lower() in rest.lower():
            resource = label
            break
    per_user = "PerUser" in rest
    group = rest.startswith("Grp")
    if scope_is_qos:
        owner = _("the quality of service (QOS) of the job")
    else:
        owner = _("your Slurm account (association)")
    if group:
        how = _("the total in use by everyone sharing %(owner)s has reached its limit of %(resource)s")
    elif per_user:
        how = _("you personally have reached the per-user limit of %(resource)s set by %(owner)s")
    else:
        how = _("the job, or jobs in %(owner)s, would exceed the limit of %(resource)s")
    explanation = _(
        "A limit set by the admins holds the job back: %(how)s. It starts when usage drops below the limit."
    ) % {"how": how % {"owner": owner, "resource": resource}}
    title = _("Limit on %(resource)s reached") % {"resource": resource}
    return Explanation(
        code=code,
        title=title,
        explanation=explanation,
        actions=(
            _("Wait for running jobs (yours or your group's) to finish."),
            _("Ask for fewer %(resource)s, or ask an admin to raise the limit.") % {"resource": resource},
        ),
        commands=("sacctmgr show assoc user=$USER", "sacctmgr show qos", "squeue -A <account>"),
        who="wait",
    )


def _split_reason(reason: str) -> tuple[str, str]:
    text = reason.strip().strip("()").strip()
    code, _sep, detail = text.partition(",")
    return code.strip(), detail.strip()


def _with_job(e: Explanation, job_id: int | None, partition: str = "") -> Explanation:
    def fill(command: str) -> str:
        if job_id is not None:
            command = command.replace("{job_id}", str(job_id))
        if partition:
            command = command.replace("<partition>", shlex.quote(partition))
        return command

    return replace(e, commands=tuple(fill(c) for c in e.commands))


def explain_pending_reason(
    reason: str | None, *, job_id: int | None = None, partition: str = ""
) -> Explanation | None:
    """The explanation of a pending reason; None for an empty reason. Unknown reasons get a
    generic explanation with ``known=False`` (and the pending-job checklist)."""
    if not reason or not reason.strip():
        return None
    code, detail = _split_reason(reason)
    found = PENDING_REASONS.get(code) or _limit_family(code)
    if found is None:
        found = Explanation(
            code=code,
            title=_("Waiting: %(reason)s") % {"reason": code},
            explanation=_(
                "Slurm gives this reason for holding the job. It usually means the request exceeds a "
                "partition limit, a node it needs is down or drained, or other jobs have priority."
            ),
            actions=(
                _("Check the partition's limits (MaxNodes, MaxTime) against your request."),
                _("Check for down or drained nodes."),
                _("Check the job's priority; adjust the request or contact an admin."),
            ),
            commands=_PENDING_TABLE,
            known=False,
        )
    if detail:
        m = re.search(r"UnavailableNodes:(\S*)", detail)
        found = replace(found, detail=m.group(1) if m else detail)
    return _with_job(found, job_id, partition)


# -- submission errors --------------------------------------------------------------------------

_SUBMIT_ERRORS: tuple[tuple[re.Pattern[str], Explanation], ...] = (
    (
        re.compile(r"Invalid account or account/partition combination", re.I),
        _e(
            "InvalidAccount",
            _("Invalid account or account/partition combination"),
            _("No valid account was given, or the account may not use this partition."),
            (
                _("Check which accounts you belong to."),
                _("Pick one of them as the account (#SBATCH --account=your_account)."),
                _("Make sure the partition name is right."),
            ),
            ("sacctmgr show user $USER withassoc",),
            "change",
        ),
    ),
    (
        re.compile(r"Requested node configuration is not available", re.I),
        _e(
            "NodeConfig",
            _("No node can satisfy the request"),
            _("No node in the partition has that many GPUs, CPUs or that much memory."),
            (_("Ask for fewer GPUs/CPUs per node or spread the job over more nodes."),),
            ("sinfo -o '%N %c %m %G'",),
            "change",
        ),
    ),
    (
        re.compile(r"Invalid generic resource \(gres\) specification", re.I),
        _e(
            "InvalidGres",
            _("Invalid GPU request"),
            _("The GPU type or count does not exist on this cluster."),
            (_("Choose a GPU type the cluster has."),),
            ("sinfo -o '%N %G'",),
            "change",
        ),
    ),
    (
        re.compile(r"Invalid partition name specified", re.I),
        _e(
            "InvalidPartition",
            _("No such partition"),
            _("The partition does not exist."),
            (_("Choose one of the cluster's partitions."),),
            ("sinfo -s",),
            "change",
        ),
    ),
    (
        re.compile(r"Required partition not available", re.I),
        _e(
            "PartitionDown",
            _("The partition is down or draining"),
            _("The partition does not accept jobs right now."),
            (_("Choose another partition or ask an admin."),),
            ("sinfo -s",),
            "admin",
        ),
    ),
    (
        re.compile(r"Requested time limit is invalid", re.I),
        _e(
            "PartitionTimeLimit",
            _("Time limit not allowed"),
            _("The time limit exceeds what the partition or your QOS allows."),
            (_("Ask for less time."),),
            ("scontrol show partition",),
            "change",
        ),
    ),
    (
        re.compile(r"Job violates accounting/QOS policy", re.I),
        _e(
            "QOSPolicy",
            _("Refused by an accounting or QOS limit"),
            _("The request exceeds a limit of your account or QOS (job size, time or number of jobs)."),
            (_("Ask for less, wait for your other jobs, or ask an admin about the limits."),),
            ("sacctmgr show assoc user=$USER", "sacctmgr show qos"),
            "change",
        ),
    ),
    (
        re.compile(r"Invalid qos specification", re.I),
        PENDING_REASONS["InvalidQOS"],
    ),
    (
        re.compile(r"Unable to contact slurm controller", re.I),
        _e(
            "ControllerDown",
            _("The Slurm controller cannot be reached"),
            _("The scheduler is down or unreachable; nothing was submitted."),
            (_("Try again in a minute; tell an admin if it persists."),),
            (),
            "admin",
        ),
    ),
)


def explain_submit_error(message: str | None) -> Explanation | None:
    """Explain Slurm's refusal of a submission (the text after ``Batch job submission failed:``)."""
    if not message:
        return None
    for pattern, e in _SUBMIT_ERRORS:
        if pattern.search(message):
            return replace(e, detail=message.strip())
    return None


# -- trouble seen in a job's output (the field guide's table) -------------------------------------

_OUTPUT_SIGNS: tuple[tuple[re.Pattern[str], Explanation], ...] = (
    (
        re.compile(r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED", re.I),
        _e(
            "CudaOOM",
            _("CUDA out of memory"),
            _(
                "The model or its activations need more GPU memory than the card has, memory is "
                "fragmented (e.g. by gradient accumulation), or another process holds GPU memory."
            ),
            (
                _("Reduce the batch size or use gradient checkpointing."),
                _("Use model parallelism or optimizer-state sharding (e.g. DeepSpeed ZeRO)."),
                _("Check nvidia-smi for other processes holding memory."),
            ),
            ("nvidia-smi",),
            "change",
        ),
    ),
    (
        re.compile(
            r"init_process_group.*(timed? ?out|timeout)|DistNetworkError|"
            r"(NCCL|c10d|rendezvous).*(timed? ?out|timeout|connection refused)|"
            r"Socket Timeout|Connection timed out",
            re.I | re.S,
        ),
        _e(
            "DistInitTimeout",
            _("Distributed start-up timed out"),
            _(
                "The processes could not reach each other: the network between nodes is broken, "
                "MASTER_ADDR/MASTER_PORT point to the wrong place, or a firewall blocks the ports."
            ),
            (
                _("Check connectivity between the nodes (ping, ibstat)."),
                _("Make sure MASTER_ADDR is the first node of the job on every node."),
                _("Open MASTER_PORT (e.g. 29500) and NCCL's port range in the firewall."),
            ),
            ('scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1', "ibstat"),
            "change",
        ),
    ),
    (
        re.compile(r"NCCL WARN .*(ib|IB|net)|ibv_|IBV_|transport retry counter exceeded", re.S),
        _e(
            "InfinibandTrouble",
            _("InfiniBand trouble"),
            _("A cable or switch fault, non-optimal communication settings, or congestion."),
            (
                _("Run ibstat or ibdiagnet."),
                _("Set NCCL_IB_HCA to the right adapter; NCCL_IB_GID_INDEX=3 for RoCEv2."),
                _("Spread jobs to avoid network hot spots; tell an admin about link errors."),
            ),
            ("ibstat", "export NCCL_DEBUG=INFO"),
            "admin",
        ),
    ),
    (
        re.compile(r"Invalid account or account/partition combination", re.I),
        _SUBMIT_ERRORS[0][1],
    ),
)


def diagnose_output(text: str | None) -> list[Explanation]:
    """Known trouble signs found in a job's output, each once, in the table's order."""
    if not text:
        return []
    found: list[Explanation] = []
    for pattern, e in _OUTPUT_SIGNS:
        m = pattern.search(text)
        if m:
            found.append(replace(e, detail=m.group(0)[:200]))
    return found


#: The field guide's note on idle GPUs: shown on a running job's page when its GPUs idle.
LOW_GPU_UTILISATION = _e(
    "LowGpuUtilisation",
    _("GPUs nearly idle"),
    _(
        "Data loading or CPU preprocessing cannot keep up, the batch is too small, or the code waits "
        "at a synchronisation barrier or deadlock."
    ),
    (
        _("Check storage I/O (iostat); cache data on local NVMe or in memory."),
        _("Raise DataLoader num_workers; use a faster loader (e.g. webdataset)."),
        _("Use a larger batch if memory allows."),
        _("Debug with NCCL_DEBUG=INFO and torch.distributed.barrier()."),
    ),
    ("iostat -x 5", "export NCCL_DEBUG=INFO"),
    "change",
)

__all__ = [
    "LOW_GPU_UTILISATION",
    "PENDING_REASONS",
    "Explanation",
    "diagnose_output",
    "explain_pending_reason",
    "explain_submit_error",
]
