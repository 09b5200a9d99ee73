"""Strict validators for everything that ends up in a Slurm or SSH command line.

Every function returns the value unchanged or raises :class:`ValidationError`. Values are
passed as separate argv items (never through a shell), so these checks exist to refuse
nonsense early and to keep option injection (leading '-') out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .errors import ValidationError
from .types import JobSpec

MAX_REASON_LENGTH = 200
MAX_PATH_LENGTH = 4096

_NODE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
_JOB_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+:@-]{0,127}")
_USER_RE = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")
_PARTITION_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_TAG_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,99}")
_GRES_TYPE_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}")
_HOST_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.:_-]{0,252}")


def _check(regex: re.Pattern[str], value: object, what: str) -> str:
    if not isinstance(value, str) or not regex.fullmatch(value):
        raise ValidationError(f"invalid {what}: {value!r}")
    return value


def validate_node_name(name: str) -> str:
    """One node name (no hostlist expressions): letters, digits, '.', '_', '-'."""
    return _check(_NODE_RE, name, "node name")


def validate_job_name(name: str) -> str:
    return _check(_JOB_NAME_RE, name, "job name")


def validate_username(name: str) -> str:
    return _check(_USER_RE, name, "user name")


def validate_partition(name: str) -> str:
    return _check(_PARTITION_RE, name, "partition name")


def validate_account(name: str) -> str:
    return _check(_PARTITION_RE, name, "account name")


def validate_tag(tag: str) -> str:
    return _check(_TAG_RE, tag, "job tag")


def validate_gres_type(name: str) -> str:
    return _check(_GRES_TYPE_RE, name, "GPU type")


def validate_host(host: str) -> str:
    return _check(_HOST_RE, host, "host")


def validate_env_name(name: str) -> str:
    return _check(_ENV_NAME_RE, name, "environment variable name")


def validate_env_value(value: str) -> str:
    if not isinstance(value, str) or any(c in value for c in "\x00\n\r,"):
        raise ValidationError(f"invalid environment value (no NUL, newline or ','): {value!r}")
    return value


def validate_reason(reason: str) -> str:
    """A drain/reboot reason: printable text, no control characters, 1..200 characters."""
    if not isinstance(reason, str) or not reason.strip():
        raise ValidationError("a reason is required")
    if len(reason) > MAX_REASON_LENGTH:
        raise ValidationError(f"reason longer than {MAX_REASON_LENGTH} characters")
    if not reason.isprintable():
        raise ValidationError(f"reason contains control characters: {reason!r}")
    return reason


def validate_path(path: str, *, absolute: bool = False) -> str:
    if not isinstance(path, str) or not path:
        raise ValidationError("empty path")
    if any(c in path for c in "\x00\n\r"):
        raise ValidationError(f"invalid path (NUL or newline): {path!r}")
    if len(path) > MAX_PATH_LENGTH:
        raise ValidationError("path too long")
    if path.startswith("-"):
        raise ValidationError(f"path must not start with '-': {path!r}")
    if absolute and not path.startswith("/"):
        raise ValidationError(f"path must be absolute: {path!r}")
    return path


def _positive(value: int | None, what: str, *, maximum: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise ValidationError(f"invalid {what}: {value!r}")


def validate_job_ids(job_ids: Sequence[int]) -> list[int]:
    """Positive int job ids (no bools, no strings), duplicates dropped, order kept."""
    for job_id in job_ids:
        if isinstance(job_id, bool) or not isinstance(job_id, int) or not 0 < job_id < 2**32:
            raise ValidationError(f"invalid job id: {job_id!r}")
    return list(dict.fromkeys(job_ids))


def validate_job_spec(spec: JobSpec) -> JobSpec:
    validate_job_name(spec.name)
    validate_tag(spec.tag)
    if spec.partition is not None:
        validate_partition(spec.partition)
    if spec.account is not None:
        validate_account(spec.account)
    if spec.gpu_type is not None:
        validate_gres_type(spec.gpu_type)
    _positive(spec.nodes, "node count", maximum=100_000)
    _positive(spec.ntasks_per_node, "tasks per node", maximum=100_000)
    _positive(spec.cpus_per_task, "CPUs per task", maximum=100_000)
    _positive(spec.time_limit_minutes, "time limit", maximum=525_600 * 10)
    if isinstance(spec.gpus, bool) or not isinstance(spec.gpus, int) or not 0 <= spec.gpus <= 1024:
        raise ValidationError(f"invalid GPU count: {spec.gpus!r}")
    if spec.work_dir is not None:
        validate_path(spec.work_dir, absolute=True)
    if spec.output is not None:
        validate_path(spec.output)
    if (
        isinstance(spec.exclude, str)
        or not isinstance(spec.exclude, tuple | list)
        or len(spec.exclude) > 1024
    ):
        raise ValidationError("exclude must be a list of node names")
    for name in spec.exclude:
        validate_node_name(name)
    for k, v in spec.environment.items():
        validate_env_name(k)
        validate_env_value(v)
    if not isinstance(spec.script, str) or not spec.script:
        raise ValidationError("empty job script")
    if "\x00" in spec.script:
        raise ValidationError("job script contains NUL")
    return spec
