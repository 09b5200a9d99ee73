"""Errors raised by the cluster layer.

Callers (Celery tasks) retry :class:`RetryableError` and record :class:`TerminalError` as a
failed action with Slurm's own message.
"""

from __future__ import annotations

from collections.abc import Sequence

from .types import CommandResult


class ClusterError(Exception):
    """Base class of every error raised by jobs.cluster."""

    def __init__(self, message: str, *, result: CommandResult | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.result = result

    def __str__(self) -> str:
        return self.message


class RetryableError(ClusterError):
    """Transient: connection refused, timeout, controller unreachable. Try again later."""


class TerminalError(ClusterError):
    """The cluster said no (bad partition, permission denied, ...). Retrying will not help.

    ``slurm_message`` carries Slurm's own text (e.g. ``Invalid partition name specified``).
    """

    def __init__(
        self, message: str, *, slurm_message: str | None = None, result: CommandResult | None = None
    ) -> None:
        super().__init__(message, result=result)
        self.slurm_message = slurm_message if slurm_message is not None else message


class HostKeyError(TerminalError):
    """The SSH host key is unknown or differs from the pinned one."""


class ValidationError(TerminalError):
    """A name, reason, path or spec was refused before anything ran."""


class SlurmOutputError(TerminalError, ValueError):
    """Slurm's output could not be understood (structurally invalid document)."""


class SlurmReportedError(SlurmOutputError):
    """Slurm's JSON carried a non-empty ``errors`` list.

    Slurm 22.05 exits 0 with ``"errors": [{"error": "Unspecified error", ...}]`` beside an EMPTY
    ``nodes``/``jobs`` list when slurmctld cannot be reached: such a listing must never be taken
    for an empty cluster. ``errors`` are Slurm's texts, ``error_numbers`` its error numbers (-1 for
    "Unspecified error"). The backend decides whether it is retryable.
    """

    def __init__(
        self,
        message: str,
        *,
        errors: Sequence[str] = (),
        error_numbers: Sequence[int] = (),
        result: CommandResult | None = None,
    ) -> None:
        super().__init__(message, slurm_message="; ".join(errors) or message, result=result)
        self.errors = tuple(errors)
        self.error_numbers = tuple(error_numbers)
