"""The tail of a job's output file for the job page.

Slurm is reached from workers only: the page asks for a refresh (:func:`job_output_get`
enqueues :func:`job_output_refresh_task` at most every ``PORTAL_JOB_OUTPUT_REFRESH_S`` seconds
while the job runs, and once more after it ends) and shows what the worker last read, kept in
the cache. The file is read as the job's own cluster account.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from jobs.cluster import ClusterError, JobInfo
from jobs.models import Job

MAX_BYTES = 16384


def _refresh_s() -> int:
    return int(getattr(settings, "PORTAL_JOB_OUTPUT_REFRESH_S", 5))


def _key(job_pk: int) -> str:
    return f"jobs:output:{job_pk}"


def _lock(job_pk: int) -> str:
    return f"jobs:output-lock:{job_pk}"


@dataclass(frozen=True)
class JobOutput:
    text: str = ""
    error: str = ""
    fetched_at: datetime | None = None
    pending: bool = False


def expand_output_path(job: Job) -> str | None:
    """Slurm's filename pattern (``%x-%j.out``) of a job made concrete; relative to its work dir;
    ``slurm-<id>.out`` when none was given."""
    pattern = job.stdout_path or "slurm-%j.out"
    subs = {"%j": str(job.job_id), "%A": str(job.job_id), "%x": job.name, "%u": job.user, "%%": "%"}
    out, i = [], 0
    while i < len(pattern):
        two = pattern[i : i + 2]
        if two in subs:
            out.append(subs[two])
            i += 2
        elif pattern[i] == "%":
            return None  # a pattern we cannot expand (%N, %a ...)
        else:
            out.append(pattern[i])
            i += 1
    path = "".join(out)
    if not path.startswith("/"):
        if not job.work_dir:
            return None
        path = posixpath.join(job.work_dir, path)
    return path


def _needs_refresh(job: Job, data: dict[str, Any] | None) -> bool:
    if data is None:
        return True
    at: datetime = data["at"]
    if job.is_active:
        return (timezone.now() - at).total_seconds() >= _refresh_s()
    return job.end_time is not None and at < job.end_time and not data.get("final")


def job_output_get(job: Job) -> JobOutput:
    """What the worker last read; asks for a fresh read when due."""
    data = cache.get(_key(job.pk))
    pending = False
    if _needs_refresh(job, data):
        pending = True
        if cache.add(_lock(job.pk), 1, timeout=max(_refresh_s() * 4, 20)):
            job_pk = job.pk
            transaction.on_commit(lambda: _enqueue_refresh(job_pk))
    if data is None:
        return JobOutput(pending=pending)
    return JobOutput(text=data["text"], error=data["error"], fetched_at=data["at"], pending=pending)


def job_output_refresh(job_pk: int) -> None:
    """Read the tail of the output file as the job's owner and keep it in the cache."""
    from jobs.backends import cluster_backend

    job = Job.objects.select_related("cluster").filter(pk=job_pk).first()
    if job is None:
        return
    text, error = "", ""
    path = expand_output_path(job)
    try:
        if path is None or not job.user:
            raise ClusterError("the output file of this job is not known")
        info = JobInfo(job_id=job.job_id, name=job.name, user=job.user, state=job.state, stdout_path=path)
        with cluster_backend(job.cluster) as backend:
            text = backend.read_job_output(info, as_user=job.user, max_bytes=MAX_BYTES)
    except ClusterError as exc:
        previous = cache.get(_key(job.pk))
        text, error = (previous or {}).get("text", ""), str(exc)
    final = not job.is_active
    cache.set(
        _key(job.pk), {"text": text, "error": error, "at": timezone.now(), "final": final}, timeout=86400
    )
    cache.delete(_lock(job.pk))


def _enqueue_refresh(job_pk: int) -> None:
    from jobs.tasks import job_output_refresh_task  # tasks import this module

    job_output_refresh_task.delay(job_pk)
