"""The demo's simulation loop: it stands in for the cluster, the node agents and Celery beat.

Every tick it
* runs the beat schedule's periodic tasks (cluster sync through the real jobs sync path, telemetry
  rollup, energy - more often than in production, so a finished job's energy shows within seconds)
  - in the demo Celery is eager, so they run here, in this process;
* moves each card's physical model (load from the synced Slurm node state), renders it as the real
  tool prints it (nvidia-smi CSV for the pod and the GB10 boxes, tt-smi JSON for the rig's p150a cards,
  dcgm-exporter text for one pod node) and feeds that through monitoring's parsers and ingest service;
* submits a few jobs as the demo researchers (jobs.services.job_submit -> action -> simulator);
* injects faults in turn: a card overheating on rig01, a QSFP link flapping while a job fails with an
  NCCL timeout, a pod node going down (and coming back), a p150a whose firmware hangs: the heartbeat
  health check fails and the default card-fault runbook drains the rig, waits for its job, resets
  the card, verifies and resumes it, on its own;
* starts a burn-in of the two second-hand cards on the bench (as the demo admin, a few minutes long):
  one of them has a bad 8-pin lead, its power dips under the stress program and the run rejects it.

On start (:meth:`DemoSimulation.setup`) the simulated clusters continue what the database remembers
(``PORTAL_SIMULATOR_CONTINUE``, see jobs.backends): a second ``scripts/demo`` goes on with the first
run's jobs and node states; nodes its own faults had left down come back as the fault would have
brought them back.

The same code runs against PostgreSQL in tests; only the settings differ.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from importlib import import_module

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import DatabaseError
from django.utils import timezone

from inventory.choices import CardStatus
from inventory.models import Cluster, Node
from jobs import services as job_services
from jobs.backends import simulator_get, simulator_restored, uses_simulator
from jobs.burnin.services import burnin_start
from jobs.cluster import ClusterError
from jobs.models import BurnInRun, ClusterAccount, Job
from monitoring.services import IngestError, telemetry_ingest_text
from portal.demo.nodes import BUSY_LOAD, DISK_IDLE_IOPS, LoadHint, NodeSim, node_sims, physics_step

logger = logging.getLogger(__name__)

#: beat entries the simulation stands in for (it *is* the pull collector of the demo)
BEAT_SKIP = frozenset({"telemetry-pull"})
FAULTS = ("overheat", "link_flap", "node_down", "card_hang")
NODE_DOWN_REASON = "Not responding"  # what Slurm (and the simulator) says of a node that stopped answering


@dataclass(frozen=True)
class DemoJob:
    cluster: str
    name: str
    seconds: int
    gpus: int
    nodes: int = 1
    lines: tuple[str, ...] = ()
    #: cards per node it keeps busy (None: all it holds), how busy, and the disk reads it makes
    busy_gpus: int | None = None
    load: float = BUSY_LOAD
    disk_iops: float = DISK_IDLE_IOPS


JOB_MIX: tuple[DemoJob, ...] = (
    DemoJob("h100-pod", "llama3-8b-sft", 300, 8, 2, ("epoch 1/3 step 200 loss=1.91", "epoch 2/3 step 400 loss=1.62")),
    DemoJob("rig-01", "ttnn-llama-decode", 240, 4, 1, ("tt-metal: 4 devices, mesh 2x2", "decode 24.1 tok/s/user")),
    DemoJob("gb10-desk", "qwen2.5-7b-lora", 200, 1, 1, ("lora r=16 step 100 loss=1.12",)),
    DemoJob("h100-pod", "eval-mmlu", 120, 4, 1, ("mmlu 5-shot acc=0.662",)),
    DemoJob("h100-pod", "pretrain-1b", 420, 8, 4, ("tokens/s=1.9M", "step 1000 loss=3.02")),
    DemoJob("rig-01", "ttnn-resnet50-bench", 150, 1, 1, ("resnet50 batch 16: 4120 img/s",)),
    DemoJob("gb10-desk", "whisper-transcribe", 150, 1, 1, ("transcribed 42 files",)),
    DemoJob("h100-pod", "dpo-ablation", 240, 8, 1, ("dpo beta=0.1 reward_acc=0.71",)),
    # holds a whole DGX, its code uses two of the eight GPUs (the report: 6 of 8 cards idle)
    DemoJob("h100-pod", "notebook-8gpu", 240, 8, 1, ("torch.cuda.device_count()=8, using cuda:0,1",), busy_gpus=2),
    # one DataLoader worker reading small files: the GPUs wait on the NVMe (the report: data loading)
    DemoJob("h100-pod", "vit-imagenet-1worker", 240, 8, 1, ("DataLoader(num_workers=1) 310 img/s",), load=0.06,
            disk_iops=9000.0),
)  # fmt: skip
HINTED = {j.name: j for j in JOB_MIX if j.busy_gpus is not None or j.load != BUSY_LOAD}

DEMO_USERS = (("researcher", "alice"), ("bob", "bob"))  # portal user, cluster account
#: the admin's own cluster account (the burn-in runs as it)
DEMO_ADMIN_ACCOUNT = "ops"
BENCH_HOST = "bench01"


@dataclass
class DemoSimulation:
    """Call :meth:`setup` once, then :meth:`tick` with the seconds elapsed, from one thread."""

    seed: int = 0
    submit_every: float = 30.0
    fault_every: float = 90.0
    first_fault_after: float = 20.0
    max_active_jobs: int = 5
    telemetry_every: float = 5.0
    sync_every: float = 5.0
    energy_every: float = 10.0
    #: the bench's burn-in: when it starts and how long the stress program runs (24 h in production)
    burnin_after: float = 40.0
    burnin_minutes: int = 3
    job_time_scale: float = 1.0  # the jobs' run times (JOB_MIX) times this
    #: the simulated clusters' clock (None: jobs.backends' choice, the wall clock in the demo)
    cluster_clock: Callable[[], datetime] | None = None
    clock: Callable[[], datetime] = timezone.now
    nodes: list[NodeSim] = field(default_factory=list)
    elapsed: float = 0.0
    _due: dict[str, float] = field(default_factory=dict)
    _rng: random.Random = field(init=False)
    _next_job: int = 0
    _next_fault: int = 0
    _undo: list[tuple[float, Callable[[], None], str]] = field(default_factory=list)
    _down: set[int] = field(default_factory=set)
    log: list[str] = field(default_factory=list)  # what happened, newest last (tests, console)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        """Build one card model per inventory card of every compute node; start each simulated
        cluster from what the database remembers of it."""
        self.nodes = node_sims(seed=self.seed)
        for cluster in Cluster.objects.order_by("name"):
            if uses_simulator(cluster):
                self._guard(f"continue {cluster.name}", partial(self._continue, cluster))
        self._guard("self-healing", self._self_healing)

    def _self_healing(self) -> None:
        """The heartbeat health check and the default card-fault runbook it starts; the simulated
        clusters answer a card reset (``tt-smi -r <bus>``) by un-hanging that card."""
        from jobs.runbooks import runbook_ensure_default
        from monitoring.models import HealthCheck

        HealthCheck.objects.get_or_create(
            name="Tenstorrent heartbeat and DRAM", defaults={"kind": "tt_heartbeat", "consecutive": 2}
        )
        runbook = runbook_ensure_default()
        if "tt_heartbeat" not in runbook.trigger_check_kinds:
            runbook.trigger_check_kinds = [*runbook.trigger_check_kinds, "tt_heartbeat"]
            runbook.save(update_fields=["trigger_check_kinds"])
        for cluster in Cluster.objects.order_by("name"):
            if uses_simulator(cluster):
                simulator_get(cluster, clock=self.cluster_clock).node_command_handler = self._node_command

    def _node_command(self, host: str, argv: Sequence[str]) -> tuple[int, str]:
        node = self._node(host)
        if node is None or list(argv[:2]) != ["tt-smi", "-r"] or len(argv) < 3:
            return 127, f"{argv[0]}: command not found"
        card = next((c for c in node.cards if c.bus_id == argv[2]), None)
        if card is None:
            return 1, f"No Tenstorrent device at {argv[2]}"
        if card.hung:
            card.hung = False
            self._note(f"{host} card {card.bus_id}: reset, the firmware beats again")
        return 0, f"Resetting board at {card.bus_id} ... done"

    def _continue(self, cluster: Cluster) -> None:
        sim = simulator_get(cluster, clock=self.cluster_clock)
        restored = simulator_restored(cluster)
        if restored:
            counts = {k: sum(1 for v in restored.values() if v == k) for k in ("resumed", "queued", "ended")}
            self._note(
                f"{cluster.name} continues from the database: {counts['resumed']} job(s) running, "
                f"{counts['queued']} queued, {counts['ended']} ended (demo restarted); next job id "
                f"{max(restored) + 1}"
            )
        for node in sim.list_nodes():
            if node.state == "down" and node.reason == NODE_DOWN_REASON:  # the node_down fault's
                self._later(30.0, partial(sim.resume_node, node.name), f"{cluster.name}/{node.name}: back up")

    # ------------------------------------------------------------------ the tick
    def tick(self, dt: float) -> None:
        self.elapsed += max(0.0, dt)
        self._guard("undo", self._run_undo)
        self._guard("faults", self._maybe_fault)
        # the collectors first: the cards have reported by the time a job starts on them, so the
        # power series brackets the job's whole run (its energy coverage)
        self._guard("physics", lambda: self._physics(dt))
        if self._is_due("telemetry", self.telemetry_every):
            for node in self.nodes:
                self._guard(f"telemetry {node.hostname}", partial(self._ingest, node))
        self._guard("beat", self._run_beat)
        self._guard("submit", self._maybe_submit)
        self._guard("burn-in", self._maybe_burnin)

    def _guard(self, what: str, fn: Callable[[], object]) -> None:
        try:
            fn()
        except (DatabaseError, ClusterError, IngestError) as exc:
            logger.warning("demo %s: %s", what, exc)
        except Exception:  # the loop must survive whatever one step does; log it with the traceback
            logger.exception("demo %s failed", what)

    def _is_due(self, key: str, every: float) -> bool:
        due = self._due.get(key, 0.0)
        if self.elapsed + 1e-9 < due:
            return False
        self._due[key] = self.elapsed + every
        return True

    def _note(self, text: str) -> None:
        logger.info("demo: %s", text)
        self.log.append(text)
        del self.log[:-200]

    # ------------------------------------------------------------------ beat
    def _run_beat(self) -> None:
        from celery import current_app

        for name, entry in settings.CELERY_BEAT_SCHEDULE.items():
            if name in BEAT_SKIP:
                continue
            every = {"jobs-cluster-sync": self.sync_every, "telemetry-energy": self.energy_every}.get(
                name, float(str(entry["schedule"]))
            )
            if self._is_due(f"beat:{name}", every):
                task_name = str(entry["task"])
                import_module(task_name.rpartition(".")[0])  # registers the app's tasks
                task = current_app.tasks.get(task_name)
                if task is None:
                    logger.warning("demo beat: no task %s", task_name)
                    continue
                self._guard(f"beat {name}", task.apply)  # what the worker would run, here and now

    # ------------------------------------------------------------------ telemetry
    def _physics(self, dt: float) -> None:
        self._down = physics_step(self.nodes, dt, hints=self._hints())

    def _hints(self) -> dict[int, LoadHint]:
        """Node id -> what the running demo jobs that do not use all they hold do on it."""
        running = Job.objects.filter(state="RUNNING", name__in=list(HINTED)).values_list("name", "node_names")
        names = {n.hostname.split(".")[0]: n.node_id for n in self.nodes}
        hints: dict[int, LoadHint] = {}
        for name, node_names in running:
            job = HINTED[name]
            for node in filter(None, (node_names or "").split(",")):
                if node in names:
                    hints[names[node]] = LoadHint(job.busy_gpus or job.gpus, job.load, job.disk_iops)
        return hints

    def _ingest(self, node: NodeSim) -> None:
        if node.node_id in self._down:
            return  # a node that is down answers no collector
        now = self.clock()
        telemetry_ingest_text(node.fmt, node.render(now), node_hostname=node.hostname, ts=now)
        telemetry_ingest_text(
            "node-exporter", node.render_node_exporter(), node_hostname=node.hostname, ts=now
        )

    # ------------------------------------------------------------------ jobs
    def _maybe_submit(self) -> None:
        if not self._is_due("submit", self.submit_every):
            return
        first = self.elapsed <= self.submit_every  # the first round fills every cluster at once
        for _ in range(len(JOB_MIX) if first else 1):
            job = JOB_MIX[self._next_job % len(JOB_MIX)]
            self._next_job += 1
            if first and any(j.cluster == job.cluster for j in JOB_MIX[: self._next_job - 1]):
                continue
            self._guard(f"submit {job.name}", partial(self._submit, job))

    def _submit(self, job: DemoJob) -> None:
        cluster = Cluster.objects.filter(name=job.cluster).first()
        if cluster is None:
            return
        active = Job.objects.filter(cluster=cluster, state__in=("PENDING", "RUNNING")).count()
        if active >= self.max_active_jobs:
            return
        username = DEMO_USERS[self._next_job % len(DEMO_USERS)][0]
        user = get_user_model().objects.filter(username=username).first()
        if user is None or not ClusterAccount.objects.filter(user=user, cluster=cluster).exists():
            return
        echo = "\n".join(f"echo '{line}'" for line in job.lines)
        script = (
            f"#!/bin/bash\n#SBATCH --job-name={job.name}\n"
            f"# sim: duration={max(1, round(job.seconds * self.job_time_scale))}\n"
            f"srun python train.py --config configs/{job.name}.yaml\n{echo}\n"
        )
        job_services.job_submit(
            user=user, cluster=cluster, name=job.name, script=script, gpus=job.gpus, nodes=job.nodes,
            time_limit_minutes=60,
        )  # fmt: skip
        self._note(f"{username} submitted {job.name} to {cluster.name}")

    # ------------------------------------------------------------------ burn-in
    def _maybe_burnin(self) -> None:
        """Once, after ``burnin_after`` seconds: burn in the bench's received cards as the demo admin."""
        if self.elapsed < self.burnin_after or self._due.get("burnin") is not None:
            return
        self._due["burnin"] = self.elapsed
        node = Node.objects.filter(hostname=BENCH_HOST).first()
        admin = get_user_model().objects.filter(username="admin").first()
        if node is None or admin is None or BurnInRun.objects.filter(node=node).exists():
            return  # not seeded, or burnt in by an earlier run of the demo
        if not node.cards.filter(status=CardStatus.RECEIVED).exists():
            return
        run = burnin_start(user=admin, node=node, duration_minutes=self.burnin_minutes)
        self._note(f"admin started burn-in #{run.pk} of {node.hostname} ({self.burnin_minutes} min)")

    # ------------------------------------------------------------------ faults
    def _maybe_fault(self) -> None:
        if self.elapsed < self.first_fault_after:
            return
        if not self._is_due("fault", self.fault_every):
            return
        kind = FAULTS[self._next_fault % len(FAULTS)]
        self._next_fault += 1
        getattr(self, f"_fault_{kind}")()

    def _later(self, seconds: float, fn: Callable[[], None], what: str) -> None:
        self._undo.append((self.elapsed + seconds, fn, what))

    def _run_undo(self) -> None:
        due = [u for u in self._undo if u[0] <= self.elapsed]
        self._undo = [u for u in self._undo if u[0] > self.elapsed]
        for _at, fn, what in due:
            fn()
            self._note(what)

    def _node(self, hostname: str) -> NodeSim | None:
        return next((n for n in self.nodes if n.hostname == hostname), None)

    def _sim(self, cluster_name: str):  # type: ignore[no-untyped-def]
        cluster = Cluster.objects.filter(name=cluster_name).first()
        return None if cluster is None else simulator_get(cluster)

    def _fault_overheat(self, hostname: str = "rig01", seconds: float = 240.0) -> None:
        """A fan on one p150a fails: its card heats past the 85 °C rule under load."""
        node = self._node(hostname)
        if node is None:
            return
        card = node.cards[min(2, len(node.cards) - 1)]
        card.fan_fault = True
        self._ensure_busy(node.cluster, gpus=len(node.cards))

        def recover() -> None:
            card.fan_fault = False

        self._later(seconds, recover, f"{hostname} card {card.bus_id}: fan back, cooling down")
        self._note(f"{hostname} card {card.bus_id}: fan failed, heating up")

    def _fault_card_hang(self, hostname: str = "rig01") -> None:
        """A p150a's firmware hangs (its heartbeat stops) until a reset: the heartbeat health check
        fails and starts the card-fault runbook, which drains the rig, waits for its job, resets the
        card, verifies and resumes, on its own."""
        node = self._node(hostname)
        if node is None:
            return
        card = node.cards[0]
        card.hung = True
        self._note(f"{hostname} card {card.bus_id}: firmware hung, heartbeat stopped")

    def _fault_link_flap(self, hostname: str = "rig01", seconds: float = 12.0) -> None:
        """A QSFP link between two p150a cards drops and comes back; a job on the rig dies of it."""
        node = self._node(hostname)
        if node is None or len(node.cards) < 2:
            return
        a, b = node.cards[0], node.cards[1]
        # the mesh's A/QSFP1 <-> B/QSFP1 cable: both ends' channels go down
        down = [(card, set(card.link_ports.get("QSFP1", ()))) for card in (a, b)]
        for card, channels in down:
            card.links_down |= channels

        def back() -> None:
            for card, channels in down:
                card.links_down -= channels

        self._later(seconds, back, f"{hostname}: QSFP link {a.bus_id} <-> {b.bus_id} back up")
        sim = self._sim(node.cluster)
        if sim is not None:
            running = [j for j in sim.list_jobs() if j.state == "RUNNING"]
            if running:
                sim.inject("job_fail_nccl_timeout", job_id=running[0].job_id, after_seconds=3)
            else:
                sim.inject("job_fail_nccl_timeout", after_seconds=20)
        self._note(f"{hostname}: QSFP link {a.bus_id} <-> {b.bus_id} flapping; NCCL timeout follows")

    def _fault_node_down(
        self, cluster: str = "h100-pod", name: str = "gpu03", seconds: float = 120.0
    ) -> None:
        """A DGX stops responding; Slurm marks it down and kills its jobs; it comes back later."""
        sim = self._sim(cluster)
        if sim is None or not any(n.name == name for n in sim.list_nodes()):
            return
        sim.inject("node_down", node=name)
        self._later(seconds, lambda: sim.resume_node(name), f"{cluster}/{name}: back up")
        self._note(f"{cluster}/{name}: not responding, Slurm set it down")

    def _ensure_busy(self, cluster_name: str, *, gpus: int) -> None:
        if Job.objects.filter(cluster__name=cluster_name, state="RUNNING").exists():
            return
        job = next((j for j in JOB_MIX if j.cluster == cluster_name and j.gpus == gpus), None)
        if job is not None:
            self._submit(job)
