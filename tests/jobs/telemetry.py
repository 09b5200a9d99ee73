"""Telemetry for job report tests: the seeded rig and pod, their simulated cards' collector output
(tt-smi JSON, nvidia-smi CSV, as portal.demo renders it) ingested every 10 s and rolled up."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.utils import timezone

from inventory import seed
from inventory.models import Cluster
from jobs.models import Job
from monitoring.services import telemetry_ingest_text
from monitoring.services.maintenance import telemetry_rollup
from portal.demo.nodes import NodeSim, node_sims

FIXTURES = Path(__file__).resolve().parents[1] / "parsers" / "fixtures"
NCCL_LOG = (FIXTURES / "job_nccl.log").read_text()
STEP_S = 10


def rig_seed() -> Cluster:
    return seed.seed_rig(seed.card_models(), seed.chassis_models())


def pod_seed() -> Cluster:
    return seed.seed_pod(seed.card_models(), seed.chassis_models())


def sims(hostname: str) -> NodeSim:
    return next(n for n in node_sims() if n.hostname == hostname)


def feed(
    sim: NodeSim,
    start: dt.datetime,
    seconds: int,
    *,
    load: float = 0.93,
    at: Callable[[int, NodeSim], None] | None = None,
    extra: Callable[[int, dt.datetime], None] | None = None,
) -> None:
    """The node's collector output every 10 s over [start, start + seconds], ingested; rolled up."""
    for card in sim.cards:
        card.load = load
    for t in range(0, seconds + 1, STEP_S):
        if at is not None:
            at(t, sim)
        for card in sim.cards:
            card.step(STEP_S)
        ts = start + dt.timedelta(seconds=t)
        telemetry_ingest_text(sim.fmt, sim.render(ts), node_hostname=sim.hostname, ts=ts)
        if extra is not None:
            extra(t, ts)
    telemetry_rollup(start=start - dt.timedelta(hours=1), end=start + dt.timedelta(seconds=seconds + 120))


def make_job(cluster: Cluster, nodes: str, *, state: str, start: dt.datetime, minutes: int, **kw: Any) -> Job:
    fields: dict[str, Any] = {
        "cluster": cluster, "job_id": 4000 + Job.objects.count(), "name": "train", "user": "alice",
        "state": state, "nodes": nodes, "node_names": f",{nodes},", "node_count": nodes.count(",") + 1,
        "start_time": start, "end_time": start + dt.timedelta(minutes=minutes), "time_limit": 60,
        **kw,
    }  # fmt: skip
    return Job.objects.create(**fields)


def start_ago(minutes_ago: int = 20) -> dt.datetime:
    return (timezone.now() - dt.timedelta(minutes=minutes_ago)).replace(microsecond=0)
