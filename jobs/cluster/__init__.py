"""Rackpilot's cluster layer: one interface to Slurm (over SSH or locally) and a simulator.

Pure Python, no Django. Celery tasks call a :class:`ClusterBackend` from :func:`get_backend`.
"""

from __future__ import annotations

from typing import Any

from .backend import ClusterBackend, NextState, ipmi_power_cycle_argv, power_cycle, redfish_reset
from .errors import (
    ClusterError,
    HostKeyError,
    RetryableError,
    SlurmOutputError,
    SlurmReportedError,
    TerminalError,
    ValidationError,
)
from .runners import LocalRunner, Runner, SSHRunner
from .simulator import Fault, SimNode, SimPartition, SimulatedCluster
from .slurm import SlurmBackend
from .slurm_parsers import ListingMemo
from .types import (
    BMC,
    FINISHED_JOB_STATES,
    TAG_PREFIX,
    CommandResult,
    JobInfo,
    JobSpec,
    NodeInfo,
    PartitionInfo,
    SacctRecord,
)

__all__ = [
    "BMC",
    "FINISHED_JOB_STATES",
    "TAG_PREFIX",
    "ClusterBackend",
    "ClusterError",
    "CommandResult",
    "Fault",
    "HostKeyError",
    "JobInfo",
    "JobSpec",
    "ListingMemo",
    "LocalRunner",
    "NextState",
    "NodeInfo",
    "PartitionInfo",
    "RetryableError",
    "Runner",
    "SSHRunner",
    "SacctRecord",
    "SimNode",
    "SimPartition",
    "SimulatedCluster",
    "SlurmBackend",
    "SlurmOutputError",
    "SlurmReportedError",
    "TerminalError",
    "ValidationError",
    "get_backend",
    "ipmi_power_cycle_argv",
    "power_cycle",
    "redfish_reset",
]

_SLURM_OPTIONS = ("slurm_conf", "use_sudo_for_admin", "timeout", "default_work_dir", "memo", "node_prefix")


def get_backend(kind: str, **config: Any) -> ClusterBackend:
    """Build a backend.

    * ``"simulator"``: ``SimulatedCluster(**config)``; ``description=`` uses
      :meth:`SimulatedCluster.from_description`.
    * ``"slurm-local"``: Slurm tools on this machine; config: slurm_conf, use_sudo_for_admin,
      timeout, default_work_dir, memo (a :class:`ListingMemo` kept per cluster).
    * ``"slurm-ssh"``: Slurm tools on a login/controller host over SSH; config: host, port,
      username, host_key (pinned ``ssh-ed25519 AAAA...`` or a known_hosts line), client_key
      (path) or client_key_data (PEM/OpenSSH text), connect_timeout, plus the slurm-local options.
    """
    if kind == "simulator":
        description = config.pop("description", None)
        if description is not None:
            return SimulatedCluster.from_description(description, **config)
        return SimulatedCluster(**config)
    slurm_opts = {k: config.pop(k) for k in _SLURM_OPTIONS if k in config}
    if kind == "slurm-local":
        if config:
            raise ValidationError(f"unknown options for slurm-local: {sorted(config)}")
        return SlurmBackend(LocalRunner(), **slurm_opts)
    if kind == "slurm-ssh":
        try:
            runner = SSHRunner(
                config.pop("host"),
                port=int(config.pop("port", 22)),
                username=config.pop("username"),
                host_key=config.pop("host_key"),
                client_key=config.pop("client_key", None),
                client_key_data=config.pop("client_key_data", None),
                connect_timeout=float(config.pop("connect_timeout", 10.0)),
            )
        except KeyError as exc:
            raise ValidationError(f"slurm-ssh needs {exc.args[0]!r}") from None
        if config:
            raise ValidationError(f"unknown options for slurm-ssh: {sorted(config)}")
        return SlurmBackend(runner, **slurm_opts)
    raise ValidationError(f"unknown cluster backend kind: {kind!r}")
