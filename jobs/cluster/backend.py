"""The backend protocol every cluster implementation follows, and BMC power control."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

from .errors import RetryableError, TerminalError, ValidationError
from .runners import LocalRunner, Runner
from .types import BMC, CommandResult, JobInfo, JobSpec, NodeInfo, PartitionInfo
from .validation import validate_host

NextState = Literal["resume", "down"]


@runtime_checkable
class ClusterBackend(Protocol):
    """One cluster. Every method may raise RetryableError or TerminalError."""

    def list_nodes(self) -> list[NodeInfo]: ...

    def list_partitions(self) -> list[PartitionInfo]: ...

    def list_jobs(self, *, user: str | None = None) -> list[JobInfo]:
        """The queue plus recently finished jobs (as long as Slurm keeps them)."""
        ...

    def get_job(self, job_id: int) -> JobInfo | None: ...

    def list_finished_jobs(self, job_ids: Sequence[int]) -> list[JobInfo]:
        """Final records (state, end time, exit code) of those of ``job_ids`` that finished, from
        accounting (sacct) or the job completion log, also after the queue forgot them. Ids not
        found there (still running, unknown, or no such record) are left out."""
        ...

    def submit_job(self, spec: JobSpec, *, as_user: str) -> int:
        """Submit as the researcher's account. Idempotent on ``spec.tag``: if a job carrying
        the tag exists already, its id is returned and nothing is submitted."""
        ...

    def find_job_by_tag(self, tag: str, *, as_user: str) -> JobInfo | None: ...

    def cancel_job(self, job_id: int, *, as_user: str | None) -> None:
        """Cancel (as the owner, or as admin with as_user=None). Unknown job -> TerminalError;
        an already finished job is left alone."""
        ...

    def drain_node(self, name: str, reason: str) -> None: ...

    def resume_node(self, name: str) -> None: ...

    def reboot_node(
        self, name: str, *, asap: bool = False, next_state: NextState | None = None, reason: str | None = None
    ) -> None: ...

    def power_cycle_node(self, bmc: BMC) -> None: ...

    def run_on_node(
        self, host: str, argv: Sequence[str], *, timeout: float, sudo: bool = False
    ) -> CommandResult:
        """Run ``argv`` on node ``host`` (reached from the login host; as root on the node with
        ``sudo``) and return its result whatever the exit status."""
        ...

    def read_job_output(self, job: JobInfo | int, *, as_user: str, max_bytes: int = 65536) -> str:
        """The last max_bytes of the job's stdout file, read as the job's owner."""
        ...

    def close(self) -> None: ...


def ipmi_power_cycle_argv(bmc: BMC) -> list[str]:
    """``ipmitool -I lanplus -H <addr> -U <user> -E chassis power cycle`` (password in
    IPMI_PASSWORD, never on the command line)."""
    validate_host(bmc.address)
    if bmc.username.startswith("-") or any(c in bmc.username for c in "\x00\n\r"):
        raise ValidationError(f"invalid BMC user name: {bmc.username!r}")
    return [
        "ipmitool",
        "-I",
        "lanplus",
        "-H",
        bmc.address,
        "-U",
        bmc.username,
        "-E",
        "chassis",
        "power",
        "cycle",
    ]


def power_cycle(bmc: BMC, *, runner: Runner | None = None, timeout: float = 30.0) -> None:
    """Power-cycle a node through its BMC (IPMI via ipmitool, or Redfish ComputerSystem.Reset)."""
    if bmc.kind == "ipmi":
        r = runner or LocalRunner()
        res = r.run(ipmi_power_cycle_argv(bmc), timeout=timeout, env={"IPMI_PASSWORD": bmc.password})
        if res.exit_code != 0:
            msg = (res.stderr or res.stdout).strip() or f"ipmitool exited {res.exit_code}"
            if "Unable to establish" in msg or "timeout" in msg.lower():
                raise RetryableError(f"BMC {bmc.address}: {msg}", result=res)
            raise TerminalError(f"BMC {bmc.address}: {msg}", slurm_message=msg, result=res)
        return
    if bmc.kind == "redfish":
        redfish_reset(bmc, timeout=timeout)
        return
    raise ValidationError(f"unknown BMC kind: {bmc.kind!r}")


def redfish_reset(bmc: BMC, *, reset_type: str = "PowerCycle", timeout: float = 30.0) -> None:
    validate_host(bmc.address)
    if not bmc.system_path.startswith("/redfish/") or any(c in bmc.system_path for c in "?#\r\n "):
        raise ValidationError(f"invalid Redfish system path: {bmc.system_path!r}")
    url = f"https://{bmc.address}{bmc.system_path.rstrip('/')}/Actions/ComputerSystem.Reset"
    body = json.dumps({"ResetType": reset_type}).encode()
    token = base64.b64encode(f"{bmc.username}:{bmc.password}".encode()).decode()
    req = urllib.request.Request(  # noqa: S310 - https URL built above
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Basic {token}"},
    )
    ctx = ssl.create_default_context()
    if not bmc.verify_tls:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as resp:  # noqa: S310
            if resp.status not in (200, 202, 204):
                raise TerminalError(f"Redfish reset of {bmc.address} answered HTTP {resp.status}")
    except urllib.error.HTTPError as exc:
        detail = exc.read(2000).decode("utf-8", "replace")
        if exc.code >= 500:
            raise RetryableError(f"Redfish reset of {bmc.address}: HTTP {exc.code} {detail}") from None
        raise TerminalError(
            f"Redfish reset of {bmc.address}: HTTP {exc.code} {detail}", slurm_message=detail
        ) from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise RetryableError(f"Redfish reset of {bmc.address} failed: {exc}") from None
