"""Leases on running actions: a worker that dies mid-action does not leave it ``running`` for the
broker's visibility timeout (an hour).

While a worker executes an action it renews ``Action.heartbeat`` every
``PORTAL_ACTION_HEARTBEAT_S`` seconds (:func:`action_lease`, a thread with its own database
connection). The beat task ``jobs.tasks.action_leases_recover_task`` calls
:func:`action_leases_recover` every ``PORTAL_ACTION_LEASE_CHECK_S`` seconds: an action still
``running`` whose heartbeat is older than ``PORTAL_ACTION_LEASE_S`` lost its worker. It is put back
to ``pending`` and enqueued again (the next attempt recognises what the lost one did: a submit by
its tag, a drain, resume or reboot by the node's state in Slurm, see
``jobs.services._already_done``), or failed with a clear message when it has had
``PORTAL_ACTION_MAX_ATTEMPTS`` attempts or is a power cycle (a BMC keeps no trace of a cycle, so a
second one is never sent blindly).

The broker's own redelivery (after the visibility timeout) stays as a backstop; it finds the action
finished and does nothing.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from jobs.models import ENGINE_ACTION_KINDS, Action, ActionKind, ActionStatus

logger = logging.getLogger(__name__)

#: ``Action.error`` of an action put back to pending because its worker was lost
WORKER_LOST = "worker lost"


def lease_seconds() -> float:
    return float(getattr(settings, "PORTAL_ACTION_LEASE_S", 30))


def heartbeat_seconds() -> float:
    return float(getattr(settings, "PORTAL_ACTION_HEARTBEAT_S", 10))


def lease_expired(action: Action, now: datetime | None = None) -> bool:
    """Whether the worker running ``action`` stopped renewing its lease."""
    beat = action.heartbeat or action.started
    if beat is None:
        return True
    return beat < (now or timezone.now()) - timedelta(seconds=lease_seconds())


class _Renewer(threading.Thread):
    def __init__(self, action_id: Any, attempt: int) -> None:
        super().__init__(name=f"action-lease-{action_id}", daemon=True)
        self.action_id, self.attempt = action_id, attempt
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            while not self.stop.wait(heartbeat_seconds()):
                try:
                    Action.objects.filter(
                        pk=self.action_id, status=ActionStatus.RUNNING, attempts=self.attempt
                    ).update(heartbeat=timezone.now())
                except Exception:  # the database is briefly away: the next beat tries again
                    logger.warning("action %s: lease renewal failed", self.action_id, exc_info=True)
        finally:
            connection.close()  # this thread's own connection


@contextlib.contextmanager
def action_lease(action: Action) -> Iterator[None]:
    """Renew the lease of ``action`` (claimed as ``running``, attempt ``action.attempts``) while
    the block runs. Short actions never touch the database from the thread."""
    renewer = _Renewer(action.pk, action.attempts)
    renewer.start()
    try:
        yield
    finally:
        renewer.stop.set()
        renewer.join(timeout=5)


def _max_attempts() -> int:
    return int(getattr(settings, "PORTAL_ACTION_MAX_ATTEMPTS", 5))


def _note(output: str, line: str) -> str:
    return f"{output}\n{line}" if output else line


def action_leases_recover(*, now: datetime | None = None) -> dict[str, list[str]]:
    """Re-enqueue (or fail) every running action whose lease expired; returns the ids of each."""
    from jobs.services import action_changed_on_commit, action_enqueue

    now = now or timezone.now()
    cutoff = now - timedelta(seconds=lease_seconds())
    expired = Q(heartbeat__lt=cutoff) | Q(heartbeat__isnull=True, started__lt=cutoff)
    # a runbook's waits and checks are judged by the runbook engine, never by a worker (jobs.runbooks)
    candidates = list(
        Action.objects.filter(expired, status=ActionStatus.RUNNING)
        .exclude(kind__in=ENGINE_ACTION_KINDS)
        .values_list("pk", flat=True)
    )
    done: dict[str, list[str]] = {"requeued": [], "failed": []}
    for pk in candidates:
        with transaction.atomic():
            action = (
                Action.objects.select_for_update(skip_locked=True)
                .filter(expired, pk=pk, status=ActionStatus.RUNNING)
                .first()
            )
            if action is None:  # finished, renewed or taken by another beat meanwhile
                continue
            seen = (action.heartbeat or action.started or now).strftime("%H:%M:%S UTC")
            lost = f"attempt {action.attempts}: the worker stopped renewing its lease at {seen} (lost)"
            if action.kind == ActionKind.POWER_CYCLE:
                error = (
                    "The worker sending this power cycle was lost; whether the BMC received it is "
                    "unknown, so it is not sent again. Check the node and request a new one if needed."
                )
            elif action.attempts >= _max_attempts():
                error = f"Gave up after {action.attempts} attempts: the worker running it was lost."
            else:
                error = ""
            fields = {"output": _note(action.output, lost), "heartbeat": None}
            if error:
                Action.objects.filter(pk=pk).update(
                    status=ActionStatus.FAILED, error=error, finished=now, **fields
                )
                done["failed"].append(str(pk))
            else:
                Action.objects.filter(pk=pk).update(status=ActionStatus.PENDING, error=WORKER_LOST, **fields)
                action_id = str(pk)
                transaction.on_commit(lambda action_id=action_id: action_enqueue(action_id))  # type: ignore[misc]
                done["requeued"].append(str(pk))
            logger.warning("action %s: lease expired (%s); %s", pk, lost, error or "enqueued again")
            action_changed_on_commit(pk)
    return done
