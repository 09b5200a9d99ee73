"""A deterministic simulated Slurm cluster implementing the ClusterBackend protocol.

Time moves when :meth:`SimulatedCluster.advance` is called (or ``auto_advance`` seconds on every
call) and, given a ``clock`` (the demo passes the wall clock, tests a clock they move), up to that
clock's time on every call. Randomness comes from a seeded RNG; every public method holds one lock.

Job scripts drive the simulation (:mod:`.simscript`): ``sleep N`` lines add to the run time,
``echo`` lines appear in the output with the job's Slurm variables expanded, ``exit N`` sets the
exit status, and a ``# sim: duration=N exit=N`` comment overrides both. Jobs without any of these
run for a seeded random 60-600 s.

A restarted simulator continues the world its caller remembers (:meth:`SimulatedCluster.restore`):
node states, queued and running jobs, and the output files of finished ones.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar

from .backend import NextState
from .errors import RetryableError, TerminalError, ValidationError
from .simscript import ScriptPlan, job_environment, script_output, script_plan
from .types import BMC, TAG_PREFIX, CommandResult, JobInfo, JobSpec, NodeInfo, PartitionInfo
from .validation import (
    validate_host,
    validate_job_ids,
    validate_job_spec,
    validate_node_name,
    validate_reason,
    validate_tag,
    validate_username,
)

FaultKind = Literal["node_down", "job_fail_nccl_timeout", "controller_unreachable", "refuse_submit"]
T = TypeVar("T")

CONTROLLER_DOWN_MESSAGE = "Unable to contact slurm controller (connect failure)"
#: where a simulator without a clock or a start time begins
DEFAULT_START = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
#: node flags a restored node keeps (the ones this simulator acts on)
RESTORED_FLAGS = frozenset({"DRAIN", "NOT_RESPONDING", "REBOOT_REQUESTED", "REBOOT_ISSUED"})


@dataclass(frozen=True)
class SimNode:
    name: str
    gpus: int = 8
    gpu_type: str = "sim"
    cpus: int = 64
    memory_mb: int = 512_000
    partitions: tuple[str, ...] = ()


@dataclass(frozen=True)
class SimPartition:
    name: str
    nodes: tuple[str, ...] = ()  # empty = all nodes
    max_time_minutes: int | None = None
    is_default: bool = False
    state: str = "up"


@dataclass(frozen=True)
class Fault:
    """``count`` = how many times it fires (None = until cleared)."""

    kind: FaultKind
    node: str | None = None
    job_id: int | None = None
    message: str | None = None
    after_seconds: float = 5.0
    count: int | None = 1


@dataclass
class _Node:
    spec: SimNode
    state: str = "idle"
    flags: set[str] = field(default_factory=set)
    reason: str | None = None
    reason_set_by: str | None = None
    reason_changed_at: datetime | None = None
    boot_time: datetime | None = None
    reboot_started: datetime | None = None
    reboot_next_state: str | None = None
    gpus_used: int = 0
    cpus_used: int = 0


@dataclass
class _Job:
    job_id: int
    spec: JobSpec
    user: str
    state: str
    submit_time: datetime
    duration: float
    planned_exit: int
    steps: tuple[tuple[str, str], ...]
    reason: str | None = "None"
    start_time: datetime | None = None
    end_time: datetime | None = None
    nodes: list[str] = field(default_factory=list)
    exit_code: int | None = None
    output: list[str] = field(default_factory=list)
    fail_at: datetime | None = None
    partition: str = ""


def _default_nodes() -> list[SimNode]:
    return [SimNode(f"gpu{i:02d}", gpus=8, gpu_type="a100") for i in range(1, 5)] + [
        SimNode(f"tt{i:02d}", gpus=4, gpu_type="n300", cpus=32, memory_mb=256_000) for i in range(1, 3)
    ]


class SimulatedCluster:
    """In-memory Slurm look-alike for the demo and for tests (same protocol as SlurmBackend).

    ``users`` are the cluster's Unix accounts (submissions as anyone else fail as sudo would): the
    researchers alice and bob, as on the loopback lab, and ops, the operators' account (burn-ins).
    """

    def __init__(
        self,
        nodes: Sequence[SimNode] | None = None,
        partitions: Sequence[SimPartition] | None = None,
        *,
        seed: int = 0,
        start_time: datetime | None = None,
        users: Iterable[str] | None = ("alice", "bob", "ops"),
        auto_advance: float = 0.0,
        min_job_age: float = 600.0,
        reboot_seconds: float = 30.0,
        first_job_id: int = 1000,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._lock = threading.RLock()
        self._rng = random.Random(seed)
        self._clock = clock
        self._now = start_time or (clock() if clock is not None else DEFAULT_START)
        if self._now.tzinfo is None:
            raise ValidationError("start_time must be timezone-aware")
        #: the longest stretch of the clock's time a call replays second by second (longer gaps,
        #: a suspended laptop, are jumped over: what was due then happens at once)
        self.max_catch_up_seconds = 3600.0
        specs = list(nodes) if nodes is not None else _default_nodes()
        if partitions is None:
            partitions = [
                SimPartition("gpu", is_default=True, max_time_minutes=1440),
                SimPartition("debug", max_time_minutes=30),
            ]
        self._partitions = {p.name: p for p in partitions}
        self._nodes: dict[str, _Node] = {}
        for s in specs:
            validate_node_name(s.name)
            parts = s.partitions or tuple(p.name for p in partitions if not p.nodes or s.name in p.nodes)
            self._nodes[s.name] = _Node(spec=replace(s, partitions=parts), boot_time=self._now)
        self._users = set(users) if users is not None else None
        self._jobs: dict[int, _Job] = {}
        self._finished: dict[int, JobInfo] = {}  # purged jobs' final records, oldest first
        #: output files of jobs no longer queued: (user, path, text, or the restored job to write it from)
        self._files: dict[int, tuple[str, str, str | tuple[JobInfo, str]]] = {}
        self.max_finished_records = 100_000
        self._next_id = first_job_id
        self._faults: list[Fault] = []
        self.auto_advance = auto_advance
        self.min_job_age = min_job_age
        self.reboot_seconds = reboot_seconds
        self.power_cycles: list[BMC] = []
        #: commands run on nodes: (host, argv, sudo); a test (or the demo) sets what they return
        self.node_commands: list[tuple[str, tuple[str, ...], bool]] = []
        #: program name -> (exit code, output) of the next runs of it; unset: exit 0, no output
        self.node_command_results: dict[str, tuple[int, str]] = {}
        #: what runs a node command instead (the demo's cards answer a reset): (host, argv) -> (exit, output)
        self.node_command_handler: Callable[[str, Sequence[str]], tuple[int, str]] | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_description(cls, description: Mapping[str, Any], **kwargs: Any) -> SimulatedCluster:
        """``{"nodes": [{"name": "gpu01", "gpus": 8, "gpu_type": "a100", "cpus": 64,
        "memory_mb": 512000, "partitions": ["gpu"]}, ...], "partitions": [{"name": "gpu",
        "default": true, "max_time_minutes": 1440, "nodes": ["gpu01"]}], "seed": 1}``"""
        nodes = [
            SimNode(
                name=str(n["name"]),
                gpus=int(n.get("gpus", 0)),
                gpu_type=str(n.get("gpu_type", "sim")),
                cpus=int(n.get("cpus", 64)),
                memory_mb=int(n.get("memory_mb", 256_000)),
                partitions=tuple(n.get("partitions", ())),
            )
            for n in description.get("nodes", [])
        ]
        parts = None
        if "partitions" in description:
            parts = [
                SimPartition(
                    name=str(p["name"]),
                    nodes=tuple(p.get("nodes", ())),
                    max_time_minutes=p.get("max_time_minutes"),
                    is_default=bool(p.get("default", False)),
                    state=str(p.get("state", "up")),
                )
                for p in description["partitions"]
            ]
        if "seed" in description:
            kwargs.setdefault("seed", int(description["seed"]))
        return cls(nodes or None, parts, **kwargs)

    # ------------------------------------------------------------------ clock & faults
    def now(self) -> datetime:
        """The simulation's time (caught up with the clock, when it has one)."""
        with self._lock:
            self._catch_up()
            return self._now

    def _catch_up(self) -> None:
        if self._clock is None:
            return
        target = self._clock()
        gap = (target - self._now).total_seconds()
        if gap <= 0:
            return
        if gap > self.max_catch_up_seconds:
            self._now = target - timedelta(seconds=self.max_catch_up_seconds)
            self._tick()  # what fell due in the skipped time happens at once
        self.advance((target - self._now).total_seconds())
        self._now = max(self._now, target)

    def advance(self, seconds: float) -> None:
        """Move simulated time forward, running the scheduler every simulated second."""
        if seconds < 0:
            raise ValueError("cannot go back in time")
        with self._lock:
            remaining = float(seconds)
            while remaining > 0:
                step = min(1.0, remaining)
                self._now += timedelta(seconds=step)
                remaining -= step
                self._tick()
            self._tick()

    def inject(self, fault: Fault | FaultKind, **params: Any) -> None:
        """Inject a fault: ``inject("node_down", node="gpu01")``,
        ``inject("job_fail_nccl_timeout", job_id=1001)`` (or the next job to start),
        ``inject("controller_unreachable", count=3)`` (None = until cleared),
        ``inject("refuse_submit", message="Job violates accounting/QOS policy")``."""
        f = fault if isinstance(fault, Fault) else Fault(kind=fault, **params)
        with self._lock:
            if f.kind == "node_down":
                if f.node not in self._nodes:
                    raise ValidationError(f"unknown node: {f.node!r}")
                self._node_down(self._nodes[f.node], "Not responding")
                return
            if f.kind == "job_fail_nccl_timeout" and f.job_id is not None:
                job = self._jobs.get(f.job_id)
                if job is None:
                    raise ValidationError(f"unknown job: {f.job_id}")
                if job.state == "RUNNING":
                    job.fail_at = self._now + timedelta(seconds=f.after_seconds)
                    return
            self._faults.append(f)

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def _take_fault(self, kind: FaultKind) -> Fault | None:
        for i, f in enumerate(self._faults):
            if f.kind == kind:
                if f.count is not None:
                    if f.count <= 1:
                        del self._faults[i]
                    else:
                        self._faults[i] = replace(f, count=f.count - 1)
                return f
        return None

    def _call(self, fn: Callable[[], T]) -> T:
        with self._lock:
            if self.auto_advance:
                self.advance(self.auto_advance)
            self._catch_up()
            f = self._take_fault("controller_unreachable")
            if f is not None:
                raise RetryableError(f.message or CONTROLLER_DOWN_MESSAGE)
            return fn()

    # ------------------------------------------------------------------ scheduler
    def _usable(self, n: _Node) -> bool:
        return n.state in ("idle", "mixed") and not (n.flags & {"DRAIN", "REBOOT_REQUESTED", "REBOOT_ISSUED"})

    def _node_down(self, n: _Node, reason: str) -> None:
        n.state = "down"
        n.flags.add("NOT_RESPONDING")
        n.reason, n.reason_set_by, n.reason_changed_at = reason, "slurm", self._now
        for job in self._jobs.values():
            if job.state == "RUNNING" and n.spec.name in job.nodes:
                job.output.append(
                    f"slurmstepd: error: *** JOB {job.job_id} ON {n.spec.name} CANCELLED "
                    f"AT {self._now:%Y-%m-%dT%H:%M:%S} DUE TO NODE FAILURE ***"
                )
                self._finish(job, "NODE_FAIL", None)

    def _release(self, job: _Job) -> None:
        for name in job.nodes:
            n = self._nodes[name]
            n.gpus_used = max(0, n.gpus_used - job.spec.gpus)
            n.cpus_used = max(0, n.cpus_used - self._cpus_per_node(job.spec))
            if n.state in ("mixed", "allocated"):
                n.state = "idle" if n.cpus_used == 0 and n.gpus_used == 0 else "mixed"

    def _finish(self, job: _Job, state: str, exit_code: int | None) -> None:
        job.state = state
        job.end_time = self._now
        job.exit_code = exit_code
        job.reason = "NonZeroExitCode" if state == "FAILED" else "None"
        self._release(job)

    @staticmethod
    def _cpus_per_node(spec: JobSpec) -> int:
        return (spec.ntasks_per_node or 1) * (spec.cpus_per_task or 1)

    def _fits(self, n: _Node, spec: JobSpec) -> bool:
        if spec.gpu_type and spec.gpu_type != n.spec.gpu_type:
            return False
        return n.spec.gpus - n.gpus_used >= spec.gpus and n.spec.cpus - n.cpus_used >= self._cpus_per_node(
            spec
        )

    def _start(self, job: _Job, nodes: list[_Node]) -> None:
        job.state, job.reason, job.start_time = "RUNNING", "None", self._now
        job.nodes = [n.spec.name for n in nodes]
        self._allocate(job, nodes)
        if (f := self._take_fault("job_fail_nccl_timeout")) is not None:
            job.fail_at = self._now + timedelta(seconds=f.after_seconds)
        job.output += self._start_lines(job)

    def _allocate(self, job: _Job, nodes: list[_Node]) -> None:
        for n in nodes:
            n.gpus_used += job.spec.gpus
            n.cpus_used += self._cpus_per_node(job.spec)
            full = n.gpus_used >= n.spec.gpus or n.cpus_used >= n.spec.cpus
            n.state = "allocated" if full else "mixed"

    def _work_dir(self, job: _Job) -> str:
        return job.spec.work_dir or f"/home/{job.user}"

    def _start_lines(self, job: _Job) -> list[str]:
        """What the job has printed by the time it started: the batch step's first lines and its
        script's echo lines, expanded in the environment Slurm gives it."""
        assert job.start_time is not None and job.nodes
        head = job.nodes[0]
        env = job_environment(
            job_id=job.job_id, name=job.spec.name, user=job.user, nodes=job.nodes, partition=job.partition,
            account=job.spec.account, gpus=job.spec.gpus, ntasks_per_node=job.spec.ntasks_per_node or 1,
            cpus_per_task=job.spec.cpus_per_task, work_dir=self._work_dir(job), extra=job.spec.environment,
        )  # fmt: skip
        return [
            f"[{job.start_time:%Y-%m-%d %H:%M:%S}] job {job.job_id} ({job.spec.name}) started on "
            f"{','.join(job.nodes)} as {job.user}",
            f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']}" if job.spec.gpus else "no GPUs requested",
            f"{head}:{1000 + job.job_id % 1000}:0 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>"
            if job.spec.gpus
            else f"running on {head}",
            *script_output(
                job.steps, env, hostname=head, now=job.start_time, cpus=self._cpus_per_node(job.spec)
            ),
        ]

    def _tick(self) -> None:
        now = self._now
        # reboots
        for n in self._nodes.values():
            if "REBOOT_REQUESTED" in n.flags and n.gpus_used == 0 and n.cpus_used == 0:
                n.flags.discard("REBOOT_REQUESTED")
                n.flags.add("REBOOT_ISSUED")
                n.state = "down"
                n.reboot_started = now
            if (
                "REBOOT_ISSUED" in n.flags
                and n.reboot_started is not None
                and (now - n.reboot_started).total_seconds() >= self.reboot_seconds
            ):
                n.flags -= {"REBOOT_ISSUED", "NOT_RESPONDING"}
                n.boot_time = now
                n.reboot_started = None
                if n.reboot_next_state == "down":
                    n.state = "down"
                    n.reason, n.reason_set_by, n.reason_changed_at = "Reboot complete", "root", now
                else:
                    n.state = "idle"
                    n.flags.discard("DRAIN")
                    n.reason = n.reason_set_by = n.reason_changed_at = None
                n.reboot_next_state = None
        # running jobs
        for job in self._jobs.values():
            if job.state != "RUNNING" or job.start_time is None:
                continue
            elapsed = (now - job.start_time).total_seconds()
            limit = job.spec.time_limit_minutes
            if job.fail_at is not None and now >= job.fail_at:
                job.output += [
                    f"{job.nodes[0]}:{1000 + job.job_id % 1000}:0 [0] NCCL WARN [Service thread] "
                    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4211, OpType=ALLREDUCE, "
                    "NumelIn=262144, Timeout(ms)=600000) ran for 600035 milliseconds before timing out.",
                    "torch.distributed.DistBackendError: NCCL communicator was aborted on rank 0.",
                    f"srun: error: {job.nodes[0]}: task 0: Exited with exit code 1",
                ]
                self._finish(job, "FAILED", 1)
            elif limit is not None and elapsed >= limit * 60 and elapsed < job.duration:
                job.output.append(
                    f"slurmstepd: error: *** JOB {job.job_id} ON {job.nodes[0]} CANCELLED AT "
                    f"{now:%Y-%m-%dT%H:%M:%S} DUE TO TIME LIMIT ***"
                )
                self._finish(job, "TIMEOUT", 128 + 15)
            elif elapsed >= job.duration:
                code = job.planned_exit
                if not any(kind == "echo" for kind, _raw in job.steps) and job.spec.gpus:
                    loss = 2.5 + self._rng.random()
                    job.output.append(f"step {int(job.duration)}/{int(job.duration)} loss={loss / 2:.4f}")
                job.output.append(f"[{now:%Y-%m-%d %H:%M:%S}] done, exit {code}")
                self._finish(job, "COMPLETED" if code == 0 else "FAILED", code)
        # purge old finished jobs
        for jid in [
            j.job_id
            for j in self._jobs.values()
            if j.end_time is not None and (now - j.end_time).total_seconds() > self.min_job_age
        ]:
            # like Slurm's job completion log: the record outlives the queue's view (and the output
            # file stays where the job wrote it)
            job = self._jobs.pop(jid)
            info = self._finished[jid] = self._job_info(job)
            self._files[jid] = (job.user, info.stdout_path or "", "".join(line + "\n" for line in job.output))
            while len(self._finished) > self.max_finished_records:
                del self._finished[next(iter(self._finished))]
            while len(self._files) > self.max_finished_records:
                del self._files[next(iter(self._files))]
        self._schedule()

    def _schedule(self) -> None:
        blocked = False
        for job in sorted(self._jobs.values(), key=lambda j: j.job_id):
            if job.state != "PENDING":
                continue
            part = self._partitions[job.partition]
            members = [
                n
                for n in self._nodes.values()
                if job.partition in n.spec.partitions
                and n.spec.name not in job.spec.exclude
                and (not job.spec.nodelist or n.spec.name in job.spec.nodelist)
            ]
            if job.spec.nodes > len(members):
                job.reason = "PartitionNodeLimit"
                continue
            if (
                part.max_time_minutes is not None
                and job.spec.time_limit_minutes is not None
                and job.spec.time_limit_minutes > part.max_time_minutes
            ):
                job.reason = "PartitionTimeLimit"
                continue
            if part.state != "up":
                job.reason = "PartitionInactive" if part.state == "inactive" else "PartitionDown"
                continue
            free = [n for n in members if self._usable(n) and self._fits(n, job.spec)]
            if len(free) >= job.spec.nodes:
                self._start(job, sorted(free, key=lambda n: n.spec.name)[: job.spec.nodes])
                continue
            up = [
                n
                for n in members
                if n.state != "down"
                and not n.flags & {"DRAIN", "NOT_RESPONDING", "REBOOT_REQUESTED", "REBOOT_ISSUED"}
            ]
            capable = [n for n in up if n.spec.gpus >= job.spec.gpus]
            if len(capable) < job.spec.nodes:
                unavailable = sorted(n.spec.name for n in members if n not in up)
                job.reason = f"ReqNodeNotAvail, UnavailableNodes:{','.join(unavailable)}"
            elif blocked:
                job.reason = "Priority"
            else:
                job.reason = "Resources"
                blocked = True

    # ------------------------------------------------------------------ views
    def _node_info(self, n: _Node) -> NodeInfo:
        return NodeInfo(
            name=n.spec.name,
            state=n.state,
            flags=frozenset(n.flags),
            reason=n.reason,
            reason_set_by=n.reason_set_by,
            reason_changed_at=n.reason_changed_at,
            cpus=n.spec.cpus,
            cpus_alloc=n.cpus_used,
            memory_mb=n.spec.memory_mb,
            gpus_total=n.spec.gpus,
            gpus_used=n.gpus_used,
            gpu_type=n.spec.gpu_type,
            partitions=n.spec.partitions,
            boot_time=n.boot_time,
        )

    def _job_info(self, j: _Job) -> JobInfo:
        work_dir = j.spec.work_dir or f"/home/{j.user}"
        out = j.spec.output or "slurm-%j.out"
        out = out.replace("%j", str(j.job_id)).replace("%x", j.spec.name).replace("%u", j.user)
        if not out.startswith("/"):
            out = f"{work_dir.rstrip('/')}/{out}"
        nodes = j.nodes
        return JobInfo(
            job_id=j.job_id,
            name=j.spec.name,
            user=j.user,
            state=j.state,
            account=j.spec.account,
            partition=j.partition,
            state_reason=None if j.reason in (None, "None") else j.reason,
            nodes=",".join(nodes),
            node_count=j.spec.nodes,
            gpus=j.spec.gpus,
            gpu_type=j.spec.gpu_type,
            cpus=self._cpus_per_node(j.spec) * j.spec.nodes,
            submit_time=j.submit_time,
            start_time=j.start_time,
            end_time=j.end_time,
            time_limit_minutes=j.spec.time_limit_minutes or self._partitions[j.partition].max_time_minutes,
            exit_code=j.exit_code,
            stdout_path=out,
            work_dir=work_dir,
            comment=TAG_PREFIX + j.spec.tag,
        )

    # ------------------------------------------------------------------ restart
    def _new_job(
        self,
        job_id: int,
        spec: JobSpec,
        user: str,
        plan: ScriptPlan,
        *,
        partition: str,
        submit_time: datetime,
    ) -> _Job:
        return _Job(
            job_id=job_id, spec=spec, user=user, state="PENDING", submit_time=submit_time,
            duration=plan.duration, planned_exit=plan.exit_code, steps=plan.steps, partition=partition,
        )  # fmt: skip

    def restore(
        self,
        *,
        nodes: Sequence[NodeInfo] = (),
        jobs: Sequence[tuple[JobInfo, str]] = (),
        last_seen: datetime | None = None,
        reason: str = "demo restarted",
    ) -> dict[int, str]:
        """Continue the world a caller remembers (the demo's database, after a restart).

        ``nodes``: the node states last seen (state, drain/down/reboot flags, reason, boot time).
        ``jobs``: (job, its batch script) as last seen. Queued jobs queue again; running jobs whose
        script has time left resume on their nodes; running jobs that cannot (their time ran out
        while nothing simulated them, or their nodes are gone) end as CANCELLED at ``last_seen``
        (when the caller last heard of them) with ``reason``; finished jobs keep their records, and
        every job that started has its output file again. Ids already known are left alone; new
        jobs get ids above all of them. Returns {job id: "queued" | "resumed" | "ended" | "finished"}.
        """
        with self._lock:
            self._catch_up()
            for node_info in nodes:
                n = self._nodes.get(node_info.name)
                if n is not None:
                    self._restore_node(n, node_info)
            outcome: dict[int, str] = {}
            for info, script in sorted(jobs, key=lambda js: js[0].job_id):
                self._next_id = max(self._next_id, info.job_id + 1)
                if info.job_id in self._jobs or info.job_id in self._finished or not info.user:
                    continue
                outcome[info.job_id] = self._restore_job(info, script, last_seen or self._now, reason)
            self._schedule()
            return outcome

    def _restore_node(self, n: _Node, info: NodeInfo) -> None:
        n.flags = set(info.flags & RESTORED_FLAGS)
        n.state = "down" if info.state == "down" else "idle"
        n.reason, n.reason_set_by, n.reason_changed_at = (
            info.reason,
            info.reason_set_by,
            info.reason_changed_at,
        )
        n.boot_time = info.boot_time or n.boot_time
        if n.flags & {"REBOOT_REQUESTED", "REBOOT_ISSUED"}:
            n.reboot_next_state = "resume"
            n.reboot_started = self._now if "REBOOT_ISSUED" in n.flags else None

    def _restore_job(self, info: JobInfo, script: str, last_seen: datetime, reason: str) -> str:
        names = [x for x in info.nodes.split(",") if x]
        if info.finished:
            self._finished[info.job_id] = info
            if info.start_time is not None and names:  # its output file, written when first read
                self._files[info.job_id] = (info.user or "", info.stdout_path or "", (info, script))
            return "finished"
        job = self._remembered_job(info, script)
        self._jobs[job.job_id] = job
        if info.state == "PENDING" or info.start_time is None or not names:
            return "queued"
        job.start_time, job.nodes = info.start_time, names
        job.output = self._start_lines(job)
        placed = [self._nodes[x] for x in names if x in self._nodes]
        ends = info.start_time + timedelta(seconds=job.duration)
        if job.spec.time_limit_minutes is not None:
            ends = min(ends, info.start_time + timedelta(minutes=job.spec.time_limit_minutes))
        alive = all(n.state != "down" and not n.flags & {"NOT_RESPONDING", "REBOOT_ISSUED"} for n in placed)
        if (
            len(placed) == len(names)
            and alive
            and all(self._fits(n, job.spec) for n in placed)
            and ends > self._now
        ):
            job.state = "RUNNING"
            self._allocate(job, placed)
            return "resumed"
        end = min(max(last_seen, info.start_time), ends, self._now)
        job.output.append(
            f"slurmstepd: error: *** JOB {job.job_id} ON {names[0]} CANCELLED AT {end:%Y-%m-%dT%H:%M:%S} "
            f"({reason}) ***"
        )
        job.state, job.end_time, job.exit_code, job.reason = "CANCELLED", end, 128 + 15, reason
        return "ended"

    def _remembered_job(self, info: JobInfo, script: str) -> _Job:
        count = max(1, info.node_count or 1)
        partition = info.partition if info.partition in self._partitions else None
        partition = partition or next((p.name for p in self._partitions.values() if p.is_default), "")
        spec = JobSpec(
            name=info.name, script=script or "#!/bin/bash\n", tag=info.tag or f"restored-{info.job_id}",
            partition=partition, account=info.account, nodes=count, gpus=info.gpus, gpu_type=info.gpu_type,
            cpus_per_task=max(1, (info.cpus or count) // count), time_limit_minutes=info.time_limit_minutes,
            work_dir=info.work_dir, output=info.stdout_path,
        )  # fmt: skip
        plan = script_plan(spec.script, random.Random(info.job_id))
        submitted = info.submit_time or self._now
        return self._new_job(
            info.job_id, spec, info.user or "", plan, partition=partition, submit_time=submitted
        )

    def _file_text(self, content: str | tuple[JobInfo, str]) -> str:
        """A stored output file's text; a restored finished job's is written as its run printed it."""
        if isinstance(content, str):
            return content
        info, script = content
        job = self._remembered_job(info, script)
        job.start_time, job.nodes = info.start_time, [x for x in info.nodes.split(",") if x]
        return "".join(x + "\n" for x in [*self._start_lines(job), *self._end_lines(job, info)])

    @staticmethod
    def _end_lines(job: _Job, info: JobInfo) -> list[str]:
        """The last line a finished job's output file has, from how it ended."""
        end = info.end_time or job.start_time
        assert end is not None
        head = job.nodes[0]
        if info.state == "NODE_FAIL":
            return [f"slurmstepd: error: *** JOB {job.job_id} ON {head} CANCELLED AT {end:%Y-%m-%dT%H:%M:%S} "
                    "DUE TO NODE FAILURE ***"]  # fmt: skip
        if info.state == "TIMEOUT":
            return [f"slurmstepd: error: *** JOB {job.job_id} ON {head} CANCELLED AT {end:%Y-%m-%dT%H:%M:%S} "
                    "DUE TO TIME LIMIT ***"]  # fmt: skip
        if info.state == "CANCELLED":
            why = f" ({info.state_reason})" if info.state_reason else ""
            return [
                f"slurmstepd: error: *** JOB {job.job_id} ON {head} CANCELLED AT {end:%Y-%m-%dT%H:%M:%S}{why} ***"
            ]
        return [f"[{end:%Y-%m-%d %H:%M:%S}] done, exit {info.exit_code if info.exit_code is not None else 0}"]

    # ------------------------------------------------------------------ protocol
    def list_nodes(self) -> list[NodeInfo]:
        return self._call(lambda: [self._node_info(n) for n in self._nodes.values()])

    def list_partitions(self) -> list[PartitionInfo]:
        def build() -> list[PartitionInfo]:
            out = []
            for p in self._partitions.values():
                members = [n for n in self._nodes.values() if p.name in n.spec.partitions]
                out.append(
                    PartitionInfo(
                        name=p.name,
                        state=p.state,
                        max_time_minutes=p.max_time_minutes,
                        nodes=",".join(n.spec.name for n in members),
                        is_default=p.is_default,
                        max_gpus_per_node=max((n.spec.gpus for n in members), default=None),
                        total_nodes=len(members),
                    )
                )
            return out

        return self._call(build)

    def list_jobs(self, *, user: str | None = None) -> list[JobInfo]:
        return self._call(
            lambda: [
                self._job_info(j)
                for j in sorted(self._jobs.values(), key=lambda j: j.job_id)
                if user is None or j.user == user
            ]
        )

    def get_job(self, job_id: int) -> JobInfo | None:
        return self._call(lambda: self._job_info(self._jobs[job_id]) if job_id in self._jobs else None)

    def list_finished_jobs(self, job_ids: Sequence[int]) -> list[JobInfo]:
        ids = validate_job_ids(job_ids)

        def find() -> list[JobInfo]:
            out = []
            for jid in ids:
                job = self._jobs.get(jid)
                info = self._job_info(job) if job is not None else self._finished.get(jid)
                if info is not None and info.finished:
                    out.append(info)
            return out

        return self._call(find)

    def find_job_by_tag(self, tag: str, *, as_user: str) -> JobInfo | None:
        validate_tag(tag)

        def find() -> JobInfo | None:
            for j in sorted(self._jobs.values(), key=lambda j: j.job_id):
                if j.spec.tag == tag and j.user == as_user:
                    return self._job_info(j)
            return None

        return self._call(find)

    def submit_job(self, spec: JobSpec, *, as_user: str) -> int:
        validate_username(as_user)
        validate_job_spec(spec)

        def submit() -> int:
            if self._users is not None and as_user not in self._users:
                raise TerminalError(f"sudo: unknown user {as_user}", slurm_message=f"unknown user {as_user}")
            for j in self._jobs.values():
                if j.spec.tag == spec.tag and j.user == as_user:
                    return j.job_id
            if (f := self._take_fault("refuse_submit")) is not None:
                msg = (
                    f.message
                    or "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
                )
                raise TerminalError(f"sbatch: {msg}", slurm_message=msg)
            if not spec.script.startswith("#!"):
                msg = (
                    "This does not look like a batch script.  The first line must start with #! "
                    "followed by the path to an interpreter."
                )
                raise TerminalError(f"sbatch: {msg}", slurm_message=msg)
            partition = spec.partition or next(
                (p.name for p in self._partitions.values() if p.is_default), None
            )
            if partition is None or partition not in self._partitions:
                msg = "Invalid partition name specified"
                raise TerminalError(f"sbatch: {msg}", slurm_message=msg)
            members = [n for n in self._nodes.values() if partition in n.spec.partitions]
            unknown = sorted(set(spec.nodelist) - {n.spec.name for n in members})
            if unknown:
                msg = "Invalid node name specified"
                raise TerminalError(f"sbatch: {msg}", slurm_message=msg)
            if spec.nodelist:
                members = [n for n in members if n.spec.name in spec.nodelist]
            if spec.gpus and not any(
                n.spec.gpus >= spec.gpus and (spec.gpu_type in (None, n.spec.gpu_type)) for n in members
            ):
                msg = "Requested node configuration is not available"
                raise TerminalError(f"sbatch: {msg}", slurm_message=msg)
            plan = script_plan(spec.script, self._rng)
            job = self._new_job(
                self._next_id, spec, as_user, plan, partition=partition, submit_time=self._now
            )
            self._next_id += 1
            self._jobs[job.job_id] = job
            self._schedule()
            return job.job_id

        return self._call(submit)

    def cancel_job(self, job_id: int, *, as_user: str | None) -> None:
        def cancel() -> None:
            job = self._jobs.get(job_id)
            if job is None:
                raise TerminalError(f"no such job: {job_id}", slurm_message="Invalid job id specified")
            if as_user is not None and job.user != as_user:
                raise TerminalError(
                    f"job {job_id} belongs to {job.user}, not {as_user}",
                    slurm_message="Access/permission denied",
                )
            if job.state in ("PENDING", "RUNNING"):
                if job.state == "RUNNING":
                    job.output.append(
                        f"slurmstepd: error: *** JOB {job_id} ON {job.nodes[0]} CANCELLED AT "
                        f"{self._now:%Y-%m-%dT%H:%M:%S} ***"
                    )
                    self._finish(job, "CANCELLED", 128 + 15)
                else:
                    job.state, job.end_time, job.exit_code = "CANCELLED", self._now, None
                self._schedule()

        self._call(cancel)

    def _get_node(self, name: str) -> _Node:
        validate_node_name(name)
        n = self._nodes.get(name)
        if n is None:
            raise TerminalError(
                f"Invalid node name specified: {name}", slurm_message="Invalid node name specified"
            )
        return n

    def drain_node(self, name: str, reason: str) -> None:
        validate_reason(reason)

        def drain() -> None:
            n = self._get_node(name)
            n.flags.add("DRAIN")
            n.reason, n.reason_set_by, n.reason_changed_at = reason, "root", self._now

        self._call(drain)

    def resume_node(self, name: str) -> None:
        def resume() -> None:
            n = self._get_node(name)
            if n.flags & {"REBOOT_ISSUED"}:
                raise TerminalError(
                    "Invalid node state specified", slurm_message="Invalid node state specified"
                )
            n.flags -= {"DRAIN", "NOT_RESPONDING", "REBOOT_REQUESTED"}
            if n.state == "down":
                n.state = "idle" if n.gpus_used == 0 and n.cpus_used == 0 else "mixed"
            n.reason = n.reason_set_by = n.reason_changed_at = None
            self._schedule()

        self._call(resume)

    def reboot_node(
        self, name: str, *, asap: bool = False, next_state: NextState | None = None, reason: str | None = None
    ) -> None:
        if reason is not None:
            validate_reason(reason)
        if next_state not in (None, "resume", "down"):
            raise ValidationError(f"invalid next state: {next_state!r}")

        def reboot() -> None:
            n = self._get_node(name)
            n.flags.add("REBOOT_REQUESTED")
            if asap:
                n.flags.add("DRAIN")
            if reason is not None:
                n.reason, n.reason_set_by, n.reason_changed_at = reason, "root", self._now
            n.reboot_next_state = next_state or "resume"
            self._tick()

        self._call(reboot)

    def power_cycle_node(self, bmc: BMC) -> None:
        def cycle() -> None:
            self.power_cycles.append(bmc)
            for n in self._nodes.values():
                if n.spec.name == bmc.address.split(".")[0].removesuffix("-bmc"):
                    self._node_down(n, "power cycle")
                    n.flags.add("REBOOT_ISSUED")
                    n.reboot_started = self._now
                    n.reboot_next_state = "resume"

        self._call(cycle)

    def run_on_node(
        self, host: str, argv: Sequence[str], *, timeout: float, sudo: bool = False
    ) -> CommandResult:
        validate_host(host)

        def run() -> CommandResult:
            self.node_commands.append((host, tuple(argv), sudo))
            if self.node_command_handler is not None:
                code, out = self.node_command_handler(host, argv)
            else:
                code, out = self.node_command_results.get(argv[0], (0, ""))
            return CommandResult(argv=tuple(argv), exit_code=code, stdout=out, stderr="", duration=0.0)

        return self._call(run)

    def read_job_output(self, job: JobInfo | int, *, as_user: str, max_bytes: int = 65536) -> str:
        job_id = job if isinstance(job, int) else job.job_id

        def read() -> str:
            j = self._jobs.get(job_id)
            if j is None:
                if job_id not in self._files:
                    raise TerminalError(f"no such job: {job_id}")
                owner, path, content = self._files[job_id]
                text = self._file_text(content)
                self._files[job_id] = (owner, path, text)
            else:
                owner, path = j.user, self._job_info(j).stdout_path or ""
                text = "".join(line + "\n" for line in j.output)
            if owner != as_user:
                raise TerminalError(f"tail: cannot open '{path}' for reading: Permission denied")
            if j is not None and j.state == "PENDING":
                raise TerminalError(f"tail: cannot open '{path}' for reading: No such file or directory")
            data = text.encode()
            return data[-max_bytes:].decode("utf-8", "replace") if len(data) > max_bytes else text

        return self._call(read)

    def close(self) -> None:
        return None
