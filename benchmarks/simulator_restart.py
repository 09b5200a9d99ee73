"""What a restarted demo pays to continue its world, and what the wall clock costs the simulator (issue 19).

No database: the simulator alone (jobs/cluster, Django-free), on a clock the benchmark moves.
- ``restore``: a new simulator taking over N remembered jobs (the demo hands it at most 10,000):
  90 % finished (each gets its output file back), 5 % running (resumed), 5 % queued;
- catch-up: one call after the clock moved 5 s / 60 s / 1 h, with 40 jobs queued or running on
  8 nodes (the simulator replays the time second by second);
- output: a job's printed lines for the torchrun template (Slurm variables expanded) at start.

Run: .venv/bin/python benchmarks/simulator_restart.py [--jobs N]
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import measure, row  # noqa: E402
from jobs.cluster import JobInfo, JobSpec, SimNode, SimulatedCluster  # noqa: E402

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
SCRIPT = '#!/bin/bash\n# sim: duration=600\necho "nodes: $SLURM_JOB_NODELIST id $SLURM_JOB_ID"\n'


class Clock:
    def __init__(self) -> None:
        self.at = T0

    def __call__(self) -> datetime:
        return self.at


def _nodes() -> list[SimNode]:
    return [SimNode(f"gpu{i:02d}", gpus=8, gpu_type="h100", cpus=64) for i in range(1, 9)]


def remembered(n: int) -> list[tuple[JobInfo, str]]:
    out = []
    for i in range(n):
        job_id = 1000 + i
        kind = i % 20
        start = T0 - timedelta(seconds=n - i)
        common = {
            "job_id": job_id, "name": f"job{i}", "user": "alice", "partition": "gpu", "gpus": 1,
            "node_count": 1, "time_limit_minutes": 60, "submit_time": start,
            "stdout_path": f"/home/alice/slurm-{job_id}.out", "work_dir": "/home/alice",
        }  # fmt: skip
        if kind == 0:
            info = JobInfo(state="RUNNING", start_time=start, nodes=f"gpu{i % 8 + 1:02d}", **common)  # type: ignore[arg-type]
        elif kind == 1:
            info = JobInfo(state="PENDING", **common)  # type: ignore[arg-type]
        else:
            info = JobInfo(
                state="COMPLETED", start_time=start, end_time=start + timedelta(seconds=1), exit_code=0,
                nodes=f"gpu{i % 8 + 1:02d}", **common,  # type: ignore[arg-type]
            )  # fmt: skip
        out.append((info, SCRIPT))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=10_000)
    args = parser.parse_args()
    jobs = remembered(args.jobs)
    print(f"restore: {args.jobs} remembered jobs, 8 nodes", flush=True)

    def restore() -> None:
        SimulatedCluster(_nodes(), seed=1, clock=Clock()).restore(jobs=jobs, last_seen=T0)

    row(f"restore {args.jobs} jobs", measure(restore, runs=5, warmup=1))

    def restore_and_read() -> None:
        sim = SimulatedCluster(_nodes(), seed=1, clock=Clock())
        sim.restore(jobs=jobs, last_seen=T0)
        sim.read_job_output(1002, as_user="alice")

    row("restore, then read one finished job's output", measure(restore_and_read, runs=5, warmup=1))

    for seconds in (5, 60, 3600):
        sims = [_busy(seconds) for _ in range(8)]
        row(
            f"catch up {seconds} s (40 jobs, 8 nodes)",
            measure(lambda sims=sims: sims.pop().list_jobs(), runs=6, warmup=1),
        )


def _busy(seconds: float) -> SimulatedCluster:
    """A simulator with 40 jobs queued or running whose clock has moved ``seconds`` since its last call."""
    clock = Clock()
    sim = SimulatedCluster(_nodes(), seed=1, clock=clock)
    for k in range(40):
        sim.submit_job(JobSpec(name=f"j{k}", script=SCRIPT, tag=f"t{k}", gpus=4), as_user="alice")
    clock.at += timedelta(seconds=seconds)
    return sim


if __name__ == "__main__":
    main()
