"""Remediation runbooks: steps as data, a run as a row, each step an Action row.

A step is ``{"id", "do", "timeout_s"?, "when"?, "then"?, "on_failure"?, "on_timeout"?}``:
``do`` is one of :data:`STEP_KINDS`; after success the run goes on with ``then`` (a step id, or
``"end"``: the run succeeded) or the next step; after a failure (or a timeout, or a ``when``
condition that does not hold: the step is skipped along its failure path) with ``on_failure`` (a
step id, or ``"fail"``). A ``wait_idle`` step may say ``"on_timeout": "ask"``: the run then waits
for an operator, who continues or cancels it.

Drain, reset, resume, reboot and power cycle are ordinary actions, executed by the workers with
their lease (jobs.leases) and idempotent retries; waiting until idle and verifying are judged by
the engine from database rows (the synced Slurm state, the stored telemetry), and never hold a
worker. A step's ``timeout_s`` bounds the waits and the verifications; a step a worker runs ends
with its action (its own retries and lease). While a run's step is active it is the node's one
active action: other node actions wait until it ends (or the run is cancelled).
:func:`runbook_advance` moves a run on; it is called when a step's action finishes and
by the beat every few seconds, so a run whose worker died goes on where its rows say it stands.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from inventory.choices import CARD_NOT_INSTALLED, BMCKind
from inventory.models import Card, Node
from jobs.models import (
    ENGINE_ACTION_KINDS,
    Action,
    ActionKind,
    ActionStatus,
    NodeState,
    Runbook,
    RunbookRun,
    RunStatus,
)
from portal.models import AuditEntry
from portal.services import audit_record

RUN_RUNBOOK = "jobs.run_runbook"
REASON_PREFIX = "rackpilot-runbook: "
#: Slurm display states of a drained node that runs no job any more
IDLE_STATES = frozenset({"drained", "down"})

STEP_KINDS: dict[str, str] = {
    "drain": ActionKind.DRAIN,
    "wait_idle": ActionKind.WAIT_IDLE,
    "reset_cards": ActionKind.RESET_CARDS,
    "verify": ActionKind.VERIFY,
    "resume": ActionKind.RESUME,
    "reboot": ActionKind.REBOOT,
    "power_cycle": ActionKind.POWER_CYCLE,
    "give_up": ActionKind.GIVE_UP,
}
#: what each kind of step does, in words (pages)
STEP_LABELS = {
    "drain": gettext_lazy("Drain"),
    "wait_idle": gettext_lazy("Wait until no job runs"),
    "reset_cards": gettext_lazy("Reset the cards"),
    "verify": gettext_lazy("Verify: the cards report and the health checks pass"),
    "resume": gettext_lazy("Resume"),
    "reboot": gettext_lazy("Reboot"),
    "power_cycle": gettext_lazy("Power cycle through the BMC"),
    "give_up": gettext_lazy("Leave drained and raise an alert"),
}
CONDITION_LABELS = {"has_bmc": gettext_lazy("the node has no BMC")}
CONDITIONS = {"has_bmc": lambda node: node.bmc_kind != BMCKind.NONE and bool(node.bmc_address)}

#: the card-fault runbook of issue 15
DEFAULT_STEPS: list[dict[str, Any]] = [
    {"id": "drain", "do": "drain"},
    {"id": "wait_idle", "do": "wait_idle", "timeout_s": 3600, "on_timeout": "ask"},
    {"id": "reset", "do": "reset_cards", "timeout_s": 300, "on_failure": "reboot"},
    {"id": "verify_reset", "do": "verify", "timeout_s": 300, "on_failure": "reboot"},
    {"id": "resume", "do": "resume", "then": "end"},
    {"id": "reboot", "do": "reboot", "timeout_s": 300, "on_failure": "power_cycle"},
    {"id": "verify_reboot", "do": "verify", "timeout_s": 900, "on_failure": "power_cycle"},
    {"id": "resume_after_reboot", "do": "resume", "then": "end"},
    {
        "id": "power_cycle",
        "do": "power_cycle",
        "when": "has_bmc",
        "timeout_s": 300,
        "on_failure": "keep_drained",
    },
    {"id": "verify_power_cycle", "do": "verify", "timeout_s": 900, "on_failure": "keep_drained"},
    {"id": "resume_after_power_cycle", "do": "resume", "then": "end"},
    # a power cycle may have brought the node back in service: it is drained again before the alert
    {"id": "keep_drained", "do": "drain", "on_failure": "give_up"},
    {"id": "give_up", "do": "give_up"},
]
DEFAULT_NAME = "Card fault: reset, reboot, power cycle"

_ID_RE = re.compile(r"^[a-z][a-z0-9_]{0,40}$")


def steps_clean(raw: Any) -> list[dict[str, Any]]:
    """The steps, checked: ValidationError({"steps": [...]}) naming each problem."""
    if not isinstance(raw, list) or not raw:
        raise ValidationError({"steps": [_("A runbook needs a list of steps.")]})
    errors: list[str] = []
    ids = [s.get("id") if isinstance(s, dict) else None for s in raw]
    for i, step in enumerate(raw, 1):
        if not isinstance(step, dict):
            errors.append(_("Step %(n)s is not an object.") % {"n": i})
            continue
        unknown = sorted(set(step) - {"id", "do", "timeout_s", "when", "then", "on_failure", "on_timeout"})
        sid = step.get("id")
        where = _("Step %(n)s") % {"n": i}
        if unknown:
            errors.append(f"{where}: " + _("unknown fields %(f)s") % {"f": ", ".join(unknown)})
        if not isinstance(sid, str) or not _ID_RE.match(sid) or ids.count(sid) > 1:
            errors.append(f"{where}: " + _("the id must be unique: lowercase letters, digits, '_'"))
        if step.get("do") not in STEP_KINDS:
            errors.append(f"{where}: " + _("'do' must be one of %(k)s") % {"k": ", ".join(STEP_KINDS)})
        timeout = step.get("timeout_s", 0)
        if not isinstance(timeout, int) or isinstance(timeout, bool) or not 0 <= timeout <= 7 * 86400:
            errors.append(f"{where}: " + _("timeout_s must be seconds (0: none, at most a week)"))
        if "when" in step and step["when"] not in CONDITIONS:
            errors.append(f"{where}: " + _("'when' must be one of %(c)s") % {"c": ", ".join(CONDITIONS)})
        for key, extra in (("then", "end"), ("on_failure", "fail"), ("on_timeout", "ask")):
            target = step.get(key)
            if (
                target is not None
                and target != extra
                and (target not in ids or key == "then" and extra == "ask")
            ):
                errors.append(f"{where}: " + _("%(k)s must name a step or be %(x)s") % {"k": key, "x": extra})
        if "on_timeout" in step and step.get("do") != "wait_idle":
            errors.append(f"{where}: " + _("only a wait_idle step has on_timeout"))
    if errors:
        raise ValidationError({"steps": errors})
    return [dict(s) for s in raw]


DEFAULT_RUNBOOK: dict[str, Any] = {
    "steps": DEFAULT_STEPS,
    # off until an admin says which health checks start it
    "trigger_check_kinds": [],
    "description": "drain → wait until idle (or ask) → reset the cards → verify → resume; "
    "else reboot → verify → BMC power cycle → verify; else leave drained and alert.",
}


def runbook_ensure_default() -> Runbook:
    """The card-fault runbook (installed by migration 0006; tests whose flush removed it call this)."""
    return Runbook.objects.get_or_create(name=DEFAULT_NAME, defaults=DEFAULT_RUNBOOK)[0]


# -- plans ----------------------------------------------------------------------------------------
def reset_argv(card: Card) -> list[str]:
    """The reset command of one card, by vendor (an argv list: the bus id is validated inventory data)."""
    bus = card.pci_bus_id or card.gpu_uuid
    if not bus:
        raise ValidationError(
            {"card": [_("Card %(slot)s has no PCI bus id to reset it by.") % {"slot": card.slot}]}
        )
    if card.card_model.vendor.lower() == "tenstorrent":
        return ["tt-smi", "-r", bus]
    return ["nvidia-smi", "-r", "-i", bus]


def _cards(node: Node, card_ids: list[int] | None) -> list[Card]:
    cards = node.cards.exclude(status__in=CARD_NOT_INSTALLED).select_related("card_model").order_by("slot")
    if card_ids:
        cards = cards.filter(pk__in=card_ids)
    return list(cards)


def runbook_plan(runbook: Runbook, node: Node, *, card_ids: list[int] | None = None) -> list[dict[str, Any]]:
    """What a run would do on ``node`` (a dry run: nothing is written or sent)."""
    plan = []
    for step in runbook.steps:
        item: dict[str, Any] = {
            "id": step["id"],
            "do": step["do"],
            "timeout_s": step.get("timeout_s", 0),
            "on_failure": step.get("on_failure", "fail"),
            "then": step.get("then", ""),
            "runs": True,
            "label": str(STEP_LABELS[step["do"]]),
        }
        if "when" in step and not CONDITIONS[step["when"]](node):
            item["runs"] = False
            item["note"] = _("skipped: %(why)s; goes to %(next)s") % {
                "why": CONDITION_LABELS[step["when"]],
                "next": item["on_failure"],
            }
        if step["do"] == "reset_cards":
            item["commands"] = [reset_argv(c) for c in _cards(node, card_ids)]
        if step["do"] == "drain":
            item["reason"] = f"{REASON_PREFIX}{runbook.name}"[:200]
        plan.append(item)
    return plan


# -- starting, cancelling, continuing -------------------------------------------------------------
def _may_run(user: Any) -> None:
    if user is not None and not user.has_perm(RUN_RUNBOOK):
        raise PermissionDenied(_("You may not run runbooks."))


def _enqueue(run_id: int) -> None:
    from jobs.tasks import runbook_advance_task

    transaction.on_commit(lambda: runbook_advance_task.delay(run_id))


@transaction.atomic
def runbook_run_start(
    *, runbook: Runbook, node: Node, user: Any, reason: str = "", card_ids: list[int] | None = None
) -> RunbookRun:
    """Start ``runbook`` on ``node`` (``user`` None: the health system). One run per node at a time."""
    _may_run(user)
    if not runbook.enabled:
        raise ValidationError({"runbook": [_("This runbook is disabled.")]})
    if node.cluster_id is None:
        raise ValidationError({"node": [_("This node belongs to no cluster.")]})
    if card_ids:
        found = set(node.cards.filter(pk__in=card_ids).values_list("pk", flat=True))
        if found != set(card_ids):
            raise ValidationError({"cards": [_("Every card must be a card of this node.")]})
    runbook_plan(runbook, node, card_ids=card_ids)  # a card that cannot be reset is refused now
    run = RunbookRun(
        runbook=runbook,
        node=node,
        step=runbook.steps[0]["id"],
        reason=(reason or _("started by hand"))[:255],
        requested_by=user if getattr(user, "is_authenticated", False) else None,
        cards=sorted(card_ids or []),
    )
    try:
        with transaction.atomic():
            run.save(force_insert=True)
    except IntegrityError:
        raise ValidationError({"node": [_("A runbook is already running on this node.")]}) from None
    audit_record(user=user, action=AuditEntry.Action.ACTION, instance=run,
                 after={"runbook": runbook.name, "node": node.hostname, "reason": run.reason},
                 message=f"runbook {runbook.name} started on {node.hostname}")  # fmt: skip
    _enqueue(run.pk)
    return run


@transaction.atomic
def runbook_run_cancel(*, run: RunbookRun, user: Any) -> RunbookRun:
    _may_run(user)
    run = RunbookRun.objects.select_for_update().get(pk=run.pk)
    if not run.is_active:
        return run
    now = timezone.now()
    who = getattr(user, "username", "") or "system"
    Action.objects.filter(run=run, kind__in=ENGINE_ACTION_KINDS, status__in=["pending", "running"]).update(
        status=ActionStatus.FAILED, error="cancelled", finished=now
    )
    run.status, run.finished = RunStatus.CANCELLED, now
    run.summary = _note(run.summary, f"cancelled by {who} at step {run.step}")
    run.save(update_fields=["status", "finished", "summary"])
    audit_record(
        user=user, action=AuditEntry.Action.ACTION, instance=run, message=f"runbook run {run.pk} cancelled"
    )
    return run


@transaction.atomic
def runbook_run_continue(*, run: RunbookRun, user: Any) -> RunbookRun:
    """An operator lets a run that waits (a wait_idle deadline passed) go on to the next step."""
    _may_run(user)
    run = RunbookRun.objects.select_for_update().get(pk=run.pk)
    if run.status != RunStatus.WAITING:
        raise ValidationError({"status": [_("Only a run that waits for an operator can be continued.")]})
    who = getattr(user, "username", "") or "system"
    steps = _steps(run)
    run.status = RunStatus.RUNNING
    run.summary = _note(run.summary, f"{run.step}: continued by {who}")
    _go(run, _following(steps, run.step), now=timezone.now())
    audit_record(
        user=user, action=AuditEntry.Action.ACTION, instance=run, message=f"runbook run {run.pk} continued"
    )
    _enqueue(run.pk)
    return run


def runbook_start_for_check(node_id: int, check_kind: str, check_name: str) -> RunbookRun | None:
    """A health check of ``check_kind`` turned failing on the node: start the runbook it triggers
    (the first enabled one, by name), unless one runs there already."""
    runbook = next(
        (
            r
            for r in Runbook.objects.filter(enabled=True).order_by("name")
            if check_kind in r.trigger_check_kinds
        ),
        None,
    )
    node = Node.objects.filter(pk=node_id).first()
    if runbook is None or node is None:
        return None
    try:
        return runbook_run_start(
            runbook=runbook, node=node, user=None, reason=f"health check failing: {check_name}"
        )
    except ValidationError:
        return None


# -- the engine -----------------------------------------------------------------------------------
def _note(summary: str, line: str) -> str:
    stamp = timezone.now().strftime("%H:%M:%S")
    return f"{summary}\n{stamp} {line}".strip()


def _steps(run: RunbookRun) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in run.runbook.steps}


def _following(steps: Mapping[str, dict[str, Any]], sid: str) -> str:
    step = steps[sid]
    if step.get("then"):
        return str(step["then"])
    order = list(steps)
    i = order.index(sid)
    return order[i + 1] if i + 1 < len(order) else "end"


def _go(run: RunbookRun, nxt: str, *, now: dt.datetime) -> None:
    """Move the (locked) run to step ``nxt``, or end it."""
    if nxt == "end":
        run.status, run.finished = RunStatus.SUCCEEDED, now
        from monitoring.health.services import health_verified

        health_verified(run.node_id, note=f"runbook {run.runbook.name} succeeded")
    elif nxt == "fail":
        run.status, run.finished = RunStatus.FAILED, now
    else:
        run.step, run.step_started = nxt, None
    run.action = None
    run.save()


def _start_step(run: RunbookRun, step: dict[str, Any], node: Node, *, now: dt.datetime) -> Action | None:
    kind = STEP_KINDS[step["do"]]
    params: dict[str, Any] = {"target": node.effective_slurm_name, "step": step["id"]}
    if kind == ActionKind.DRAIN:
        params["reason"] = f"{REASON_PREFIX}{run.runbook.name}"[:200]
    elif kind == ActionKind.REBOOT:
        # back "down" after the reboot: out of service until verified and resumed
        params.update(asap=False, next_state="down", reason=f"{REASON_PREFIX}{run.runbook.name}"[:200])
    if kind in (ActionKind.REBOOT, ActionKind.POWER_CYCLE):
        # the boot time Slurm showed before: the verify step after it waits for a new one
        state = NodeState.objects.filter(node=node).values_list("boot_time", flat=True).first()
        params["boot_before"] = state.isoformat() if state else ""
    if kind == ActionKind.RESET_CARDS:
        params.update(
            host=node.hostname,
            commands=[reset_argv(c) for c in _cards(node, run.cards or None)],
            sudo=bool(settings.PORTAL_CARD_RESET_SUDO),
        )
    engine = kind in ENGINE_ACTION_KINDS
    if node.cluster_id is None:  # taken out of its cluster meanwhile: nothing can run there
        return None
    action = Action(
        kind=kind,
        cluster_id=node.cluster_id,
        node=node,
        run=run,
        params=params,
        requested_by=run.requested_by,
        status=ActionStatus.RUNNING if engine else ActionStatus.PENDING,
        attempts=1 if engine else 0,
        started=now if engine else None,
    )
    try:
        with transaction.atomic():
            action.save(force_insert=True)
    except IntegrityError:  # another action on the node (a person's): this step starts when it ends
        return None
    if not engine:
        from jobs.services import action_changed_on_commit, action_enqueue

        action_id = str(action.pk)
        transaction.on_commit(lambda: action_enqueue(action_id))
        action_changed_on_commit(action.pk)
    run.action, run.step_started = action, now
    run.save(update_fields=["action", "step_started"])
    return action


def _judge(
    run: RunbookRun, step: dict[str, Any], action: Action, node: Node, now: dt.datetime
) -> tuple[bool | None, str]:
    """An engine step's verdict now: (True/False, what was seen), or (None, ...) to look again later."""
    if action.kind == ActionKind.WAIT_IDLE:
        # drained (the drain flag and no job left) or down, as the last sync saw it: a state synced
        # before the drain ("idle", "alloc") is not taken for idle
        if node.slurm_state in IDLE_STATES:
            return True, f"Slurm: {node.slurm_state}"
        return None, f"Slurm: {node.slurm_state or 'no state yet'}"
    if action.kind == ActionKind.VERIFY:
        from monitoring.health.services import health_verify

        booted = _booted_since_restart(run, action, node)
        if booted is not None:
            return None, booted
        ok, seen = health_verify(node.pk, since=run.step_started or now, now=now)
        # cards take a while to come back (a heartbeat needs two readings): a check that fails
        # now is looked at again until the step's timeout, which then fails it with what was seen
        return (True, seen) if ok else (None, seen)
    # give up: leave the node drained and raise an alert that says what was tried
    from monitoring.services.alerts import runbook_alert

    runbook_alert(node, f"{run.runbook.name} could not heal {node.hostname}; tried:\n{run.summary}")
    return True, "alert raised"


def _booted_since_restart(run: RunbookRun, action: Action, node: Node) -> str | None:
    """After a reboot or power cycle step: why the node is not back yet (None: it is, or there was none)."""
    previous = Action.objects.filter(run=run).exclude(pk=action.pk).order_by("-created").first()
    if previous is None or previous.kind not in (ActionKind.REBOOT, ActionKind.POWER_CYCLE):
        return None
    state = NodeState.objects.filter(node=node).values_list("boot_time", "flags", "display_state").first()
    boot, flags, shown = state if state else (None, [], "")
    if boot is None or boot.isoformat() == previous.params.get("boot_before", ""):
        return "waiting for the node to boot (Slurm's boot time has not changed)"
    if shown == "reboot" or "NOT_RESPONDING" in (flags or []):
        return f"waiting for the node to answer Slurm ({shown})"
    return None


def _finish_engine(action: Action, ok: bool, text: str, now: dt.datetime) -> None:
    Action.objects.filter(pk=action.pk).update(
        status=ActionStatus.SUCCEEDED if ok else ActionStatus.FAILED,
        output=text,
        error="" if ok else text,
        finished=now,
    )
    action.status = ActionStatus.SUCCEEDED if ok else ActionStatus.FAILED
    action.output = text


def runbook_advance(run_id: int, *, now: dt.datetime | None = None) -> RunbookRun | None:
    """Move a run on as far as its rows allow now (idempotent; safe to call from anywhere, any time)."""
    for _i in range(len(DEFAULT_STEPS) * 2 + 8):  # steps that finish at once are chained here
        with transaction.atomic():
            run = (
                RunbookRun.objects.select_for_update(skip_locked=True, of=("self",))
                .select_related("runbook", "action", "node")
                .filter(pk=run_id)
                .first()
            )
            if run is None or run.status != RunStatus.RUNNING:
                return run
            if not _advance_once(run, now or timezone.now()):
                return run
    return run


def _advance_once(run: RunbookRun, now: dt.datetime) -> bool:
    """One move of a locked running run; False when it has to wait (for a worker, Slurm, telemetry)."""
    steps = _steps(run)
    step = steps[run.step]
    node = run.node
    action = run.action
    if action is None or action.run_id != run.pk or action.params.get("step") != step["id"]:
        if "when" in step and not CONDITIONS[step["when"]](node):
            run.summary = _note(run.summary, f"{step['id']}: skipped ({step['when']} does not hold)")
            _go(run, step.get("on_failure", "fail"), now=now)
            return True
        drained_by_other = node.slurm_state in ("drained", "draining") and not node.slurm_reason.startswith(
            REASON_PREFIX.rstrip()
        )
        if step["do"] == "resume" and drained_by_other:
            # never undo a drain this runbook did not set (a person drained it meanwhile)
            run.summary = _note(
                run.summary, f"{step['id']}: not resumed, drained by someone else ({node.slurm_reason})"
            )
            _go(run, "fail", now=now)
            return True
        return _start_step(run, step, node, now=now) is not None
    timeout = step.get("timeout_s", 0)
    late = bool(timeout and run.step_started and (now - run.step_started).total_seconds() > timeout)
    if action.is_active and action.kind in ENGINE_ACTION_KINDS:
        verdict, text = _judge(run, step, action, node, now)
        if verdict is None and late:
            verdict, text = False, f"timed out after {timeout} s ({text})"
            if step.get("on_timeout") == "ask":
                _finish_engine(action, False, text, now)
                run.status = RunStatus.WAITING
                run.summary = _note(run.summary, f"{step['id']}: {text}; waiting for an operator")
                run.save(update_fields=["status", "summary"])
                return False
        if verdict is None:
            return False
        _finish_engine(action, verdict, text, now)
    if action.is_active:
        return False  # a worker has it (its lease recovers it if the worker dies)
    ok = action.status == ActionStatus.SUCCEEDED
    said = (action.output or action.error or "").strip().splitlines()
    run.summary = _note(
        run.summary, f"{step['id']}: {'ok' if ok else 'failed'}" + (f" ({said[-1][:200]})" if said else "")
    )
    if action.kind == ActionKind.GIVE_UP:
        _go(run, "fail", now=now)
    else:
        _go(run, _following(steps, step["id"]) if ok else step.get("on_failure", "fail"), now=now)
    return True


def runbook_runs_advance_all() -> int:
    """The beat: move every running run on (waits are judged, lost workers' steps picked up)."""
    ids = list(RunbookRun.objects.filter(status=RunStatus.RUNNING).values_list("pk", flat=True))
    for pk in ids:
        runbook_advance(pk)
    return len(ids)
