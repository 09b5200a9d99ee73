"""Jobs writes: request an action (a row first, then a task on commit), execute it idempotently,
submit a job validated against the synced partitions.

Callers check permissions; these services also assert the rules (only operators touch nodes,
researchers only cancel their own jobs, jobs run as the requester's own cluster account).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.dispatch import Signal
from django.utils import timezone
from django.utils.translation import gettext as _

from inventory.choices import BMCKind
from inventory.models import Cluster, Node
from jobs.backends import cluster_backend
from jobs.cluster import BMC, ClusterBackend, JobSpec, RetryableError, TerminalError
from jobs.cluster import ValidationError as ClusterValidationError
from jobs.cluster import validation as v
from jobs.leases import WORKER_LOST, action_lease, lease_expired
from jobs.models import (
    ACTIVE_ACTION_STATUSES,
    NODE_ACTION_KINDS,
    Action,
    ActionKind,
    ActionStatus,
    ClusterAccount,
    Job,
    JobTemplate,
    Partition,
)
from jobs.selectors import cluster_account_for
from portal.models import AuditEntry
from portal.services import audit_record

logger = logging.getLogger(__name__)

#: sent on commit when an action is created or changes status: send(sender=Action, action_ids=[...])
action_changed = Signal()


def _action_changed(action_id: Any) -> None:
    transaction.on_commit(lambda: action_changed.send(sender=Action, action_ids=[action_id]))


action_changed_on_commit = _action_changed


OPERATE_NODES = "jobs.operate_nodes"
CANCEL_ANY_JOB = "jobs.cancel_any_job"
SUBMIT_JOB = "jobs.submit_job"


def _check(validator: Callable[[Any], Any], value: Any, field: str) -> Any:
    try:
        return validator(value)
    except ClusterValidationError as exc:
        raise ValidationError({field: [str(exc)]}) from None


# ---------------------------------------------------------------------------- requests


def _node_params(kind: str, node: Node, params: Mapping[str, Any]) -> dict[str, Any]:
    target = _check(v.validate_node_name, node.effective_slurm_name, "node")
    out: dict[str, Any] = {"target": target}
    if kind == ActionKind.DRAIN:
        out["reason"] = _check(v.validate_reason, params.get("reason", ""), "reason")
    elif kind == ActionKind.REBOOT:
        asap = params.get("asap", False)
        if not isinstance(asap, bool):
            raise ValidationError({"asap": [_("Must be true or false.")]})
        next_state = params.get("next_state") or None
        if next_state not in (None, "resume", "down"):
            raise ValidationError({"next_state": [_("Must be 'resume' or 'down'.")]})
        out.update(asap=asap, next_state=next_state)
        if params.get("reason"):
            out["reason"] = _check(v.validate_reason, params["reason"], "reason")
    elif kind == ActionKind.POWER_CYCLE:
        if node.bmc_kind == BMCKind.NONE or not node.bmc_address:
            raise ValidationError({"node": [_("This node has no BMC configured.")]})
        _check(v.validate_host, node.bmc_address, "node")
    return out


def _cancel_params(user: Any, job: Job) -> dict[str, Any]:
    owns = job.owner_id is not None and job.owner_id == getattr(user, "pk", None)
    if not owns and not user.has_perm(CANCEL_ANY_JOB):
        raise PermissionDenied(_("You may only cancel your own jobs."))
    if not job.is_active:
        raise ValidationError({"job": [_("Job %(id)s has already finished.") % {"id": job.job_id}]})
    # the owner cancels as their own cluster account; operators cancel through the service account
    return {"target": str(job.job_id), "as_user": job.user if owns and job.user else None}


def _cancel_in_progress(job: Job) -> Action | None:
    """The cancel of ``job`` that a new request is answered with: an active one, or one that
    succeeded after the sync last saw the job (Slurm has cancelled it; the next sync will say so)."""
    latest = Action.objects.filter(job=job, kind=ActionKind.CANCEL).order_by("-created").first()
    if latest is None or latest.status == ActionStatus.FAILED:
        return None
    if latest.is_active or job.last_seen is None or (latest.finished and latest.finished >= job.last_seen):
        latest.reused = True
        return latest
    return None


def _create_action(action: Action, *, user: Any, audit: str, message: str) -> Action:
    try:
        with transaction.atomic():
            action.save(force_insert=True)
    except IntegrityError:
        if action.kind == ActionKind.CANCEL and action.job is not None:
            existing = _cancel_in_progress(action.job)  # a concurrent request created it first
            if existing is not None:
                return existing
            raise ValidationError({"job": [_("This job is already being cancelled.")]}) from None
        raise ValidationError({"node": [_("This node already has an action in progress.")]}) from None
    audit_record(
        user=user,
        action=audit,
        instance=action,
        after={"kind": action.kind, **action.params},
        message=message,
    )
    action_id = str(action.pk)
    transaction.on_commit(lambda: action_enqueue(action_id))
    _action_changed(action.pk)
    return action


def action_enqueue(action_id: str) -> None:
    from jobs.tasks import action_execute_task

    action_execute_task.apply_async(args=[action_id], task_id=action_id)


#: actions whose effect only a sync shows (the node's Slurm state, the job's): their success
#: syncs the cluster at once, so the pages show ``drained`` now rather than at the next beat
SYNC_AFTER_KINDS = frozenset({ActionKind.DRAIN, ActionKind.RESUME, ActionKind.REBOOT, ActionKind.CANCEL})


def cluster_sync_enqueue(cluster_id: int) -> None:
    from jobs.tasks import cluster_sync_task

    cluster_sync_task.apply_async(
        args=[cluster_id], expires=int(getattr(settings, "PORTAL_SYNC_INTERVAL", 15))
    )


@transaction.atomic
def action_request(
    kind: str,
    *,
    user: Any,
    node: Node | None = None,
    job: Job | None = None,
    cluster: Cluster | None = None,
    params: Mapping[str, Any] | None = None,
) -> Action:
    """Record a drain/resume/reboot/power_cycle (of a node) or a cancel (of a job) and enqueue it.

    ``submit`` is routed to :func:`job_submit` (``cluster`` and the spec fields in ``params``).
    """
    params = dict(params or {})
    if kind == ActionKind.SUBMIT:
        if cluster is None:
            raise ValidationError({"cluster": [_("A cluster is required.")]})
        missing = [f for f in ("name", "script") if f not in params]
        if missing:
            raise ValidationError({"params": [_("Required job fields: %(f)s") % {"f": ", ".join(missing)}]})
        unknown = sorted(set(params) - {"name", "script", *SPEC_FIELDS})
        if unknown:
            raise ValidationError({"params": [_("Unknown job fields: %(f)s") % {"f": ", ".join(unknown)}]})
        return job_submit(user=user, cluster=cluster, **params)
    if kind in NODE_ACTION_KINDS:
        if node is None:
            raise ValidationError({"node": [_("A node is required.")]})
        # user None = the portal itself (an alert rule an admin configured to drain)
        if user is not None and not user.has_perm(OPERATE_NODES):
            raise PermissionDenied(_("You may not operate nodes."))
        if node.cluster_id is None:
            raise ValidationError({"node": [_("This node belongs to no cluster.")]})
        action = Action(
            kind=kind,
            cluster_id=node.cluster_id,
            node=node,
            params=_node_params(kind, node, params),
            requested_by=user if getattr(user, "is_authenticated", False) else None,
        )
    elif kind == ActionKind.CANCEL:
        if job is None:
            raise ValidationError({"job": [_("A job is required.")]})
        params = _cancel_params(user, job)
        existing = _cancel_in_progress(job)
        if existing is not None:  # one cancel per job: a repeated request is answered with it
            return existing
        action = Action(kind=kind, cluster_id=job.cluster_id, job=job, params=params, requested_by=user)
    else:
        raise ValidationError({"kind": [_("Unknown action kind: %(kind)s") % {"kind": kind}]})
    audit = AuditEntry.Action.CANCEL if kind == ActionKind.CANCEL else AuditEntry.Action.ACTION
    return _create_action(action, user=user, audit=audit, message=f"{kind} {action.params['target']}")


def node_drain_request(node: Node, *, user: Any, reason: str) -> Action:
    return action_request(ActionKind.DRAIN, user=user, node=node, params={"reason": reason})


def node_resume_request(node: Node, *, user: Any) -> Action:
    return action_request(ActionKind.RESUME, user=user, node=node)


def node_reboot_request(
    node: Node, *, user: Any, asap: bool = False, next_state: str | None = None, reason: str | None = None
) -> Action:
    params = {"asap": asap, "next_state": next_state, "reason": reason}
    return action_request(ActionKind.REBOOT, user=user, node=node, params=params)


def node_power_cycle_request(node: Node, *, user: Any) -> Action:
    return action_request(ActionKind.POWER_CYCLE, user=user, node=node)


def job_cancel_request(job: Job, *, user: Any) -> Action:
    return action_request(ActionKind.CANCEL, user=user, job=job)


# ---------------------------------------------------------------------------- submit

SPEC_FIELDS = ("partition", "account", "nodes", "ntasks_per_node", "cpus_per_task", "gpus", "gpu_type",
               "time_limit_minutes", "work_dir", "output", "environment", "exclude")  # fmt: skip


def _validate_against_partitions(cluster: Cluster, spec: JobSpec) -> str | None:
    """Check the spec against the synced partitions; returns the partition used (None = unknown)."""
    partitions = {p.name: p for p in Partition.objects.filter(cluster=cluster)}
    if not partitions:
        return spec.partition  # never synced: Slurm decides, and its message reaches the action's output
    name = spec.partition or next((p.name for p in partitions.values() if p.is_default), None)
    part = partitions.get(name or "")
    if part is None:
        raise ValidationError({"partition": [_("No such partition on %(c)s.") % {"c": cluster.name}]})
    if part.state != "up":
        raise ValidationError(
            {"partition": [_("Partition %(p)s is %(s)s.") % {"p": part.name, "s": part.state}]}
        )
    if spec.gpus and part.max_gpus_per_node is not None and spec.gpus > part.max_gpus_per_node:
        raise ValidationError(
            {
                "gpus": [
                    _("At most %(n)s GPUs per node in %(p)s.") % {"n": part.max_gpus_per_node, "p": part.name}
                ]
            }
        )
    if (
        spec.time_limit_minutes
        and part.max_time_minutes is not None
        and spec.time_limit_minutes > part.max_time_minutes
    ):
        raise ValidationError(
            {
                "time_limit_minutes": [
                    _("The time limit of %(p)s is %(n)s minutes.")
                    % {"p": part.name, "n": part.max_time_minutes}
                ]
            }
        )
    if part.total_nodes is not None and spec.nodes > part.total_nodes:
        raise ValidationError(
            {"nodes": [_("%(p)s has %(n)s nodes.") % {"p": part.name, "n": part.total_nodes}]}
        )
    return part.name


@transaction.atomic
def job_submit_check(
    *,
    user: Any,
    cluster: Cluster,
    name: str,
    script: str,
    template: JobTemplate | None = None,
    nodelist: Sequence[str] = (),
    **spec_fields: Any,
) -> tuple[ClusterAccount, dict[str, Any]]:
    """Every check a submission passes before anything is written (the form's inline validation runs
    exactly this): returns the user's cluster account and the action's parameters. ``template``: the
    job template it came from (recorded, so that a resubmission can resume from its checkpoints);
    ``nodelist`` pins the job to those nodes (a burn-in; not offered to researchers' submissions)."""
    if not user.has_perm(SUBMIT_JOB):
        raise PermissionDenied(_("You may not submit jobs."))
    unknown = sorted(set(spec_fields) - set(SPEC_FIELDS))
    if unknown:
        raise ValidationError({"params": [_("Unknown job fields: %(f)s") % {"f": ", ".join(unknown)}]})
    account = cluster_account_for(user=user, cluster_id=cluster.pk)
    if account is None:
        raise ValidationError(
            {
                "cluster": [
                    _("You have no account on %(c)s; ask an administrator to map one.") % {"c": cluster.name}
                ]
            }
        )
    fields = {k: val for k, val in spec_fields.items() if val is not None and val != ""}
    fields.setdefault("nodes", 1)
    fields.setdefault("gpus", 0)
    if "exclude" in fields:
        if isinstance(fields["exclude"], str) or not isinstance(fields["exclude"], list | tuple):
            raise ValidationError({"exclude": [_("A list of node names.")]})
        fields["exclude"] = list(fields["exclude"])
    if account.default_account and "account" not in fields:
        fields["account"] = account.default_account
    _check(v.validate_job_name, name, "name")
    if not isinstance(script, str) or not script.startswith("#!"):
        raise ValidationError({"script": [_("A batch script must start with #! and an interpreter.")]})
    if nodelist:
        fields["nodelist"] = tuple(nodelist)
    try:
        spec = JobSpec(name=name, script=script, tag="validation", **fields)
        v.validate_job_spec(spec)
    except (TypeError, ClusterValidationError) as exc:
        raise ValidationError({"params": [str(exc)]}) from None
    partition = _validate_against_partitions(cluster, spec)
    if partition and not spec.partition:
        fields["partition"] = partition
    params: dict[str, Any] = {
        "target": name,
        "cluster_user": account.username,
        "name": name,
        "script": script,
        "spec": {
            **fields,
            "environment": dict(fields.get("environment") or {}),
            **({"nodelist": list(nodelist)} if nodelist else {}),
        },
    }
    if template is not None:
        params["template"] = template.pk
    return account, params


def job_submit(
    *,
    user: Any,
    cluster: Cluster,
    name: str,
    script: str,
    template: JobTemplate | None = None,
    nodelist: Sequence[str] = (),
    **spec_fields: Any,
) -> Action:
    """Validate a job for ``cluster`` and record a submit action run as the user's cluster account."""
    account, params = job_submit_check(
        user=user,
        cluster=cluster,
        name=name,
        script=script,
        template=template,
        nodelist=nodelist,
        **spec_fields,
    )
    action = Action(kind=ActionKind.SUBMIT, cluster=cluster, params=params, requested_by=user)
    return _create_action(
        action,
        user=user,
        audit=AuditEntry.Action.SUBMIT,
        message=f"submit {name} as {account.username} on {cluster.name}",
    )


def _submitted_as(job: Job) -> dict[str, Any]:
    """The name, script and spec ``job`` was submitted with: its submit action's, or (a job the
    portal did not submit) what the sync recorded of it."""
    action = job.submitted_by_action
    if action is not None and action.kind == ActionKind.SUBMIT:
        p = action.params
        return {"name": p["name"], "script": p["script"], "template": p.get("template"), **p.get("spec", {})}
    if not job.script:
        raise ValidationError({"job": [_("The script of job %(id)s is not known.") % {"id": job.slurm_id}]})
    spec = {"partition": job.partition, "account": job.account, "nodes": job.node_count or 1, "gpus": job.gpus,
            "gpu_type": job.gpu_type, "time_limit_minutes": job.time_limit, "work_dir": job.work_dir}  # fmt: skip
    return {"name": job.name or f"job-{job.job_id}", "script": job.script, "template": None, **spec}


def job_resubmit(job: Job, *, user: Any, exclude: str = "", resume: bool = False) -> Action:
    """Submit ``job`` again as it was submitted, through :func:`job_submit` (the same checks and
    action), as its owner. ``exclude``: one of its nodes to leave out (``sbatch --exclude``);
    ``resume``: set its template's resume variable to the template's checkpoint directory."""
    if job.owner_id is None or job.owner_id != getattr(user, "pk", None):
        raise PermissionDenied(_("You may only resubmit your own jobs."))
    if job.is_active:
        raise ValidationError({"job": [_("Job %(id)s has not finished.") % {"id": job.slurm_id}]})
    fields = _submitted_as(job)
    template_id = fields.pop("template", None)
    template = JobTemplate.objects.filter(pk=template_id).first() if template_id else None
    if exclude:
        if f",{exclude}," not in (job.node_names or ""):
            raise ValidationError(
                {
                    "exclude": [
                        _("%(node)s is not a node of job %(id)s.") % {"node": exclude, "id": job.slurm_id}
                    ]
                }
            )
        fields["exclude"] = sorted({*(fields.get("exclude") or []), exclude})
    if resume:
        if template is None or not template.can_resume:
            raise ValidationError({"resume": [_("This job's template saves no checkpoints to resume from.")]})
        fields["environment"] = {
            **(fields.get("environment") or {}),
            template.resume_variable: template.checkpoint_dir,
        }
    return job_submit(user=user, cluster=job.cluster, template=template, **fields)


# ---------------------------------------------------------------------------- execution


def _max_attempts() -> int:
    return int(getattr(settings, "PORTAL_ACTION_MAX_ATTEMPTS", 5))


def _perform(action: Action, backend: ClusterBackend) -> str:
    p = action.params
    target = p.get("target", "")
    kind = action.kind
    if kind == ActionKind.DRAIN:
        backend.drain_node(target, p["reason"])
        return f"Drained {target}: {p['reason']}"
    if kind == ActionKind.RESUME:
        backend.resume_node(target)
        return f"Resumed {target}"
    if kind == ActionKind.REBOOT:
        backend.reboot_node(
            target, asap=bool(p.get("asap")), next_state=p.get("next_state"), reason=p.get("reason")
        )
        return f"Reboot of {target} requested" + (" (ASAP)" if p.get("asap") else "")
    if kind == ActionKind.POWER_CYCLE:
        node = Node.objects.get(pk=action.node_id or 0)
        bmc = BMC(
            kind=node.bmc_kind,  # type: ignore[arg-type]
            address=node.bmc_address,
            username=node.bmc_username,
            password=node.bmc_password,
        )
        backend.power_cycle_node(bmc)
        return f"Power cycle of {target} sent to {node.bmc_address}"
    if kind == ActionKind.CANCEL:
        job_id = int(target)
        backend.cancel_job(job_id, as_user=p.get("as_user"))
        return f"Cancelled job {job_id}"
    if kind == ActionKind.SUBMIT:
        return _perform_submit(action, backend)
    if kind == ActionKind.RESET_CARDS:
        return _perform_reset(action, backend)
    raise TerminalError(f"unknown action kind {kind!r}")


def _perform_reset(action: Action, backend: ClusterBackend) -> str:
    """Run each card's reset command on the node as root; a non-zero exit fails the step with the
    output. (tt-smi may exit 0 on a failed reset: the runbook's verify step judges the outcome.)"""
    lines = []
    for argv in action.params.get("commands", []):
        res = backend.run_on_node(
            action.params["host"], argv, timeout=120.0, sudo=action.params.get("sudo", True)
        )
        text = (res.stdout + res.stderr).strip()
        lines.append(f"$ {' '.join(argv)}  (exit {res.exit_code})" + (f"\n{text[-2000:]}" if text else ""))
        if res.exit_code != 0:
            raise TerminalError(f"{argv[0]} exited {res.exit_code}", slurm_message="\n".join(lines))
    return "\n".join(lines) or "no cards to reset"


def _perform_submit(action: Action, backend: ClusterBackend) -> str:
    p = action.params
    fields = dict(p.get("spec", {}))
    if "nodelist" in fields:
        fields["nodelist"] = tuple(fields["nodelist"])
    spec = JobSpec(name=p["name"], script=p["script"], tag=str(action.pk), **fields)
    job_id = backend.submit_job(spec, as_user=p["cluster_user"])  # finds the job a first try created
    job, created = Job.objects.get_or_create(
        cluster_id=action.cluster_id, job_id=job_id,
        defaults={"name": spec.name, "user": p["cluster_user"], "owner_id": action.requested_by_id,
                  "partition": spec.partition or "", "account": spec.account or "", "state": "PENDING",
                  "gpus": spec.gpus, "gpu_type": spec.gpu_type or "", "node_count": spec.nodes,
                  "time_limit": spec.time_limit_minutes, "script": spec.script, "tag": spec.tag,
                  "submitted_by_action": action, "last_seen": timezone.now()},
    )  # fmt: skip
    if not created:
        Job.objects.filter(pk=job.pk).update(script=spec.script, tag=spec.tag, submitted_by_action=action)
    Action.objects.filter(pk=action.pk).update(job=job)
    return f"Submitted batch job {job_id}"


def _with_history(action: Action, text: str) -> str:
    """``text``, after the notes of attempts lost with their worker (kept: they explain attempts)."""
    prior = action.output if action.error == WORKER_LOST else ""
    return f"{prior}\n{text}" if prior and text else (prior or text)


def _already_done(action: Action, backend: ClusterBackend) -> str | None:
    """On a later attempt: what an earlier one (lost with its worker, or cut off by a timeout
    after Slurm acted) already did, read from Slurm's state; None = run the action."""
    p, kind = action.params, action.kind
    if kind not in (ActionKind.DRAIN, ActionKind.RESUME, ActionKind.REBOOT):
        return None  # a submit finds its job by tag; a cancel of a finished job is left alone
    target = p.get("target", "")
    info = next((n for n in backend.list_nodes() if n.name == target), None)
    if info is None:
        return None
    if kind == ActionKind.DRAIN and info.drained and (info.reason or "") == p.get("reason"):
        return f"Drained {target}: {p['reason']} (Slurm shows the drain of an earlier attempt)"
    if kind == ActionKind.RESUME and not info.drained and info.display_state not in ("down", "reboot"):
        return f"Resumed {target} (Slurm shows it resumed by an earlier attempt)"
    rebooted = info.boot_time is not None and action.started is not None and info.boot_time > action.started
    if kind == ActionKind.REBOOT and (info.display_state == "reboot" or rebooted):
        return f"Reboot of {target} requested (Slurm shows the reboot of an earlier attempt)"
    return None


def _finish(action: Action, status: str, *, output: str = "", error: str = "") -> Action:
    # only the attempt that claimed the row records its end (a worker whose lease was taken over
    # cannot overwrite the outcome of the attempt that followed)
    Action.objects.filter(pk=action.pk, status__in=ACTIVE_ACTION_STATUSES, attempts=action.attempts).update(
        status=status, output=_with_history(action, output), error=error, finished=timezone.now(),
        heartbeat=None,
    )  # fmt: skip
    _action_changed(action.pk)
    action.refresh_from_db()
    return action


def action_execute(action_id: str) -> Action | None:
    """Run one action. Harmless to call again for the same action (redelivery, retry).

    Locks the row only to claim it; the cluster is called outside any row lock. Raises
    RetryableError when the caller should try again later (the row is left pending with the
    error); terminal errors and the last failed attempt end as ``failed`` with the output.
    """
    with transaction.atomic():
        action = Action.objects.select_for_update().filter(pk=action_id).first()
        if action is None:
            logger.warning("action %s does not exist", action_id)
            return None
        if action.status not in ACTIVE_ACTION_STATUSES:
            return action
        if action.status == ActionStatus.RUNNING and not lease_expired(action):
            # another worker holds it (a duplicate delivery): the lease recovers it if that one dies
            logger.info("action %s is running on another worker; this delivery does nothing", action_id)
            return action
        action.status = ActionStatus.RUNNING
        action.attempts += 1
        action.started = action.started or timezone.now()
        action.heartbeat = timezone.now()
        action.save(update_fields=["status", "attempts", "started", "heartbeat"])
        _action_changed(action.pk)
    cluster = Cluster.objects.get(pk=action.cluster_id)
    try:
        with action_lease(action), cluster_backend(cluster) as backend:
            output = (action.attempts > 1 and _already_done(action, backend)) or _perform(action, backend)
    except RetryableError as exc:
        note = f"attempt {action.attempts}: {exc}"
        if action.attempts >= _max_attempts():
            return _finish(action, ActionStatus.FAILED, output=note, error=str(exc))
        Action.objects.filter(pk=action.pk, attempts=action.attempts).update(
            status=ActionStatus.PENDING, error=str(exc), output=_with_history(action, note), heartbeat=None
        )
        _action_changed(action.pk)
        raise
    except TerminalError as exc:
        return _finish(action, ActionStatus.FAILED, output=exc.slurm_message, error=str(exc))
    except Exception as exc:
        logger.exception("action %s failed unexpectedly", action_id)
        return _finish(action, ActionStatus.FAILED, error=f"internal error: {exc!r}")
    done = _finish(action, ActionStatus.SUCCEEDED, output=output)
    if done.kind in SYNC_AFTER_KINDS:
        cluster_id = done.cluster_id
        transaction.on_commit(lambda: cluster_sync_enqueue(cluster_id))
    return done
