"""What the runbook tests share: a node's telemetry agent posting tt-smi snapshots (the recorded
p150a fixture, first card at 0000:01:00.0) whose heartbeat rises while the card lives, and the
steps a run went through."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone

from jobs.models import Action, RunbookRun
from monitoring import services as telemetry
from tests.monitoring.conftest import fixture_text

TT_SNAPSHOT = fixture_text("tt_smi_4x_p150a.json")
BUS = "0000:01:00.0"
#: the default runbook's steps when the reset fails and the reboot heals
ESCALATED_TO_REBOOT = ["drain", "wait_idle", "reset", "reboot", "verify_reboot", "resume_after_reboot"]


class Agent:
    """Posts a snapshot per call; a dead card's heartbeat stands still (``alive = False``)."""

    def __init__(self, node: Any) -> None:
        self.node, self.beat, self.alive = node, 5120, True

    def post(self, at: dt.datetime | None = None) -> None:
        if self.alive:
            self.beat += 10
        text = TT_SNAPSHOT.replace('"heartbeat": "5120"', f'"heartbeat": "{self.beat}"', 1)
        telemetry.telemetry_ingest_text(
            "tt-smi", text, node_hostname=self.node.hostname, ts=at or timezone.now()
        )


def run_steps(run: RunbookRun) -> list[tuple[str, str]]:
    """(step id, status) of each step's action, in order."""
    return [(a.params["step"], a.status) for a in Action.objects.filter(run=run).order_by("created")]
