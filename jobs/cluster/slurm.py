"""The real Slurm backend: builds argv lists, runs them through a Runner, parses the output."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from .backend import NextState, power_cycle
from .errors import (
    ClusterError,
    RetryableError,
    SlurmOutputError,
    SlurmReportedError,
    TerminalError,
    ValidationError,
)
from .runners import LocalRunner, Runner
from .slurm_parsers import (
    ListingMemo,
    load_json,
    parse_jobcomp_filetxt,
    parse_partitions,
    parse_sacct_json,
    parse_sacct_parsable,
    parse_sbatch_error,
    parse_sbatch_parsable,
    parse_scontrol_config,
    parse_sinfo_json,
    parse_squeue_json,
    slurm_warnings,
)
from .types import BMC, TAG_PREFIX, CommandResult, JobInfo, JobSpec, NodeInfo, PartitionInfo
from .validation import (
    validate_host,
    validate_job_ids,
    validate_job_spec,
    validate_node_name,
    validate_path,
    validate_reason,
    validate_tag,
    validate_username,
)

_RETRYABLE = re.compile(
    r"Unable to contact slurm controller|Connection refused|Socket timed out|timed out|"
    r"Zero Bytes were transmitted|Communication connection failure|Transport endpoint|"
    r"Slurm backup controller in standby mode|Network is unreachable|No route to host|"
    r"Resource temporarily unavailable|Munge encode failed|Unable to establish",
    re.IGNORECASE,
)

logger = logging.getLogger(__name__)

#: Job ids per sacct/grep call of list_finished_jobs (keeps the command line short).
_FINISHED_CHUNK = 500


#: Slurm error numbers of a controller that could not be reached or answered too late: -1
#: ("Unspecified error", what 22.05's ``sinfo/squeue --json`` report when slurmctld is down),
#: SLURM_COMMUNICATIONS_* (1001-1004), SLURMCTLD_COMMUNICATIONS_* (1800-1804), socket timeouts
#: (5004, 5005) and ESLURM_... "Unable to contact slurm controller" (1007 in newer releases).
_RETRYABLE_ERRNO = frozenset({-1, 1001, 1002, 1003, 1004, 1007, 1800, 1801, 1802, 1803, 1804, 5004, 5005})

T = TypeVar("T")


def _slurm_message(res: CommandResult) -> str:
    text = (res.stderr.strip() or res.stdout.strip()) or f"exit status {res.exit_code}"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # drop sudo/ssh noise, keep Slurm's lines
    return "\n".join(lines[-5:])


def classify_failure(res: CommandResult, what: str, message: str | None = None) -> ClusterError:
    """The error of a failed command: retryable when Slurm (or the link to it) was unreachable,
    terminal when it said no. ``message`` defaults to the last lines of stderr (or stdout)."""
    msg = message or _slurm_message(res)
    if _RETRYABLE.search(msg):
        return RetryableError(f"{what}: {msg}", result=res)
    if "a password is required" in msg or "is not allowed to execute" in msg:
        return TerminalError(
            f"{what}: sudo refused (check the sudoers rules for the service account): {msg}",
            slurm_message=msg,
            result=res,
        )
    return TerminalError(f"{what}: {msg}", slurm_message=msg, result=res)


def classify_output_error(exc: SlurmOutputError, res: CommandResult, what: str) -> ClusterError:
    """An output that could not be believed (exit status 0): a document carrying ``errors``, or
    text instead of the document. Retryable when the controller was unreachable (22.05 reports
    that as ``"Unspecified error"``, error number -1, and prints the reason nowhere else), or when
    the text says so ("Unable to contact slurm controller"); terminal otherwise."""
    text = "\n".join(p for p in (str(exc), res.stderr.strip(), res.stdout.strip()[:2000]) if p)
    if isinstance(exc, SlurmReportedError):
        retryable = bool(set(exc.error_numbers) & _RETRYABLE_ERRNO) or any(
            e.startswith("Unspecified error") for e in exc.errors
        )
        message = f"{what}: {exc}"
        if res.stderr.strip():
            message += f" ({_slurm_message(res)})"
        if retryable or _RETRYABLE.search(text):
            return RetryableError(message, result=res)
        return SlurmReportedError(message, errors=exc.errors, error_numbers=exc.error_numbers, result=res)
    if _RETRYABLE.search(text):
        return RetryableError(f"{what}: {_slurm_message(res)}", result=res)
    return SlurmOutputError(f"{what}: {exc}", slurm_message=exc.slurm_message, result=res)


class SlurmBackend:
    """Talks to Slurm with its command-line tools (22.05+) through ``runner``.

    * reads: ``sinfo --json``, ``squeue --json``, ``scontrol show partition -o`` as the runner's
      account (the portal's service account);
    * submit/cancel/read output: as the researcher, ``sudo -n -u <user> sbatch|scancel|tail``;
    * admin (drain, resume, reboot, cancel as admin): ``sudo -n scontrol|scancel`` when
      ``use_sudo_for_admin`` (else the runner's account must be Slurm admin).

    ``slurm_conf`` is exported as SLURM_CONF outside sudo (sudoers must env_keep it).
    ``default_work_dir`` ("{user}" is replaced) is used when a JobSpec has no work_dir.
    ``memo``: kept between the backends of one cluster, so that the records of a listing equal
    to the previous listing's are not parsed again (see :class:`RecordMemo`).
    """

    def __init__(
        self,
        runner: Runner,
        *,
        slurm_conf: str | None = None,
        use_sudo_for_admin: bool = True,
        timeout: float = 30.0,
        default_work_dir: str | None = "/home/{user}",
        bmc_runner: Runner | None = None,
        node_prefix: Sequence[str] = ("ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "{host}"),
        memo: ListingMemo | None = None,
    ) -> None:
        self.runner = runner
        #: argv put before a command to run it on a node from the login host ({host}: its hostname)
        self.node_prefix = tuple(node_prefix)
        self.slurm_conf = validate_path(slurm_conf, absolute=True) if slurm_conf else None
        self.use_sudo_for_admin = use_sudo_for_admin
        self.timeout = timeout
        self.default_work_dir = default_work_dir
        self.bmc_runner = bmc_runner
        self.memo = memo or ListingMemo()
        self._finished_source: tuple[str, str | None] | None = None
        #: Slurm's warnings of the documents read so far (shown with the cluster, never errors)
        self.warnings: list[str] = []

    # ------------------------------------------------------------------ plumbing
    def _env(self) -> Mapping[str, str] | None:
        return {"SLURM_CONF": self.slurm_conf} if self.slurm_conf else None

    def _exec(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        as_user: str | None = None,
        sudo: bool = False,
        timeout: float | None = None,
    ) -> CommandResult:
        return self.runner.run(
            argv,
            stdin=stdin,
            timeout=timeout or self.timeout,
            as_user=as_user,
            sudo=sudo,
            env=self._env(),
        )

    def _check(self, res: CommandResult, what: str, message: str | None = None) -> CommandResult:
        if res.exit_code == 0:
            return res
        raise classify_failure(res, what, message)

    def _parse(
        self,
        res: CommandResult,
        what: str,
        parse: Callable[[Any], T],
        *,
        as_json: bool = True,
        raw_key: str | None = None,
    ) -> T:
        """``parse`` the output of a command that exited 0; a document carrying ``errors`` or
        text that is not the document becomes a classified error (never an empty listing).
        The documents' ``warnings`` are kept in :attr:`warnings`. ``raw_key``: the listing's
        records, left as JSON text for ``parse`` (see :func:`load_json`)."""
        try:
            if not as_json:
                return parse(res.stdout)
            doc = load_json(res.stdout, raw_key=raw_key)
            for w in slurm_warnings(doc):
                text = f"{what}: {w}"
                if text not in self.warnings:
                    self.warnings.append(text)
            return parse(doc)
        except SlurmOutputError as exc:
            raise classify_output_error(exc, res, what) from None

    def _run(
        self,
        argv: Sequence[str],
        what: str,
        *,
        stdin: str | None = None,
        as_user: str | None = None,
        sudo: bool = False,
    ) -> CommandResult:
        return self._check(self._exec(argv, stdin=stdin, as_user=as_user, sudo=sudo), what)

    def _admin(self, argv: Sequence[str], what: str) -> CommandResult:
        return self._run(argv, what, sudo=self.use_sudo_for_admin)

    # ------------------------------------------------------------------ reads
    def list_nodes(self) -> list[NodeInfo]:
        res = self._run(["sinfo", "--json"], "sinfo")
        nodes = self._parse(res, "sinfo", partial(parse_sinfo_json, memo=self.memo.nodes), raw_key="nodes")
        return sorted(nodes, key=lambda n: _natural(n.name))

    def list_partitions(self) -> list[PartitionInfo]:
        res = self._run(["scontrol", "show", "partition", "-o"], "scontrol show partition")
        parts = self._parse(res, "scontrol show partition", parse_partitions, as_json=False)
        if any(p.max_gpus_per_node is None for p in parts):
            nodes = self.list_nodes()
            out = []
            for p in parts:
                if p.max_gpus_per_node is None:
                    gpus = [n.gpus_total for n in nodes if p.name in n.partitions]
                    p = PartitionInfo(**{**p.__dict__, "max_gpus_per_node": max(gpus) if gpus else None})
                out.append(p)
            parts = out
        return parts

    def list_jobs(self, *, user: str | None = None) -> list[JobInfo]:
        # squeue --json ignores filters in 22.05: filter here
        res = self._run(["squeue", "--json"], "squeue")
        jobs = self._parse(res, "squeue", partial(parse_squeue_json, memo=self.memo.jobs), raw_key="jobs")
        if user is not None:
            jobs = [j for j in jobs if j.user == user]
        return sorted(jobs, key=lambda j: j.job_id)

    def get_job(self, job_id: int) -> JobInfo | None:
        for j in self.list_jobs():
            if j.job_id == job_id:
                return j
        return None

    def finished_jobs_source(self) -> tuple[str, str | None]:
        """Where finished jobs are looked up, from ``scontrol show config`` (asked once):
        ``("sacct", None)`` with accounting storage, ``("jobcomp", JobCompLoc)`` with
        ``JobCompType=jobcomp/filetxt``, else ``("none", None)``."""
        if self._finished_source is None:
            res = self._run(["scontrol", "show", "config"], "scontrol show config")
            conf = self._parse(res, "scontrol show config", parse_scontrol_config, as_json=False)
            location = conf.get("JobCompLoc", "")
            if conf.get("AccountingStorageType", "accounting_storage/none") != "accounting_storage/none":
                self._finished_source = ("sacct", None)
            elif conf.get("JobCompType") == "jobcomp/filetxt" and location.startswith("/"):
                self._finished_source = ("jobcomp", validate_path(location, absolute=True))
            else:
                self._finished_source = ("none", None)
        return self._finished_source

    def list_finished_jobs(self, job_ids: Sequence[int]) -> list[JobInfo]:
        ids = validate_job_ids(job_ids)
        if not ids:
            return []
        kind, location = self.finished_jobs_source()
        found: dict[int, JobInfo] = {}
        for start in range(0, len(ids), _FINISHED_CHUNK):
            chunk = ids[start : start + _FINISHED_CHUNK]
            if kind == "sacct":
                records = self._sacct_finished(chunk)
            elif kind == "jobcomp" and location is not None:
                records = self._jobcomp_finished(chunk, location)
            else:
                records = []
            for job in records:  # the last record of an id wins (requeued jobs finish again)
                if job.finished:
                    found[job.job_id] = job
        return [found[i] for i in ids if i in found]

    def _sacct_finished(self, ids: Sequence[int]) -> list[JobInfo]:
        wanted = ",".join(map(str, ids))
        jobs = self._parse(self._run(["sacct", "--json", "-j", wanted], "sacct"), "sacct", parse_sacct_json)
        # sacct --json of 22.05 reports non-zero exits as 0: take exit codes from the parsable form
        # (JobIDRaw: an array element's own id, where JobID says 1234_7)
        res = self._run(
            ["sacct", "--parsable2", "--noheader", "-X", "-o", "JobIDRaw,State,ExitCode", "-j", wanted],
            "sacct",
        )
        codes = {
            r.job_id: (128 + r.signal if r.signal else r.exit_code)
            for r in self._parse(res, "sacct", parse_sacct_parsable, as_json=False)
            if r.step is None
        }
        return [
            replace(j, exit_code=codes.get(j.job_id, j.exit_code))
            for j in jobs
            if j.job_id in codes or j.job_id in ids
        ]

    def _jobcomp_finished(self, ids: Sequence[int], location: str) -> list[JobInfo]:
        # the job completion log is world-readable by default: no sudo rule needed
        pattern = "^JobId=(" + "|".join(map(str, ids)) + ") "
        res = self._exec(["grep", "-E", "-e", pattern, "--", location])
        if res.exit_code == 1 and not res.stderr.strip():  # grep: no line matched
            return []
        self._check(res, "read the job completion log")
        errors: list[str] = []
        jobs = self._parse(
            res,
            "read the job completion log",
            lambda text: parse_jobcomp_filetxt(text, errors=errors),
            as_json=False,
        )
        for error in errors:
            logger.warning("job completion log %s: %s", location, error)
        return jobs

    def find_job_by_tag(self, tag: str, *, as_user: str) -> JobInfo | None:
        validate_tag(tag)
        want = TAG_PREFIX + tag
        matches = [j for j in self.list_jobs(user=as_user) if j.comment == want]
        return matches[0] if matches else None

    # ------------------------------------------------------------------ jobs
    def sbatch_argv(self, spec: JobSpec, *, as_user: str) -> list[str]:
        validate_job_spec(spec)
        argv = ["sbatch", "--parsable", f"--job-name={spec.name}"]
        if spec.partition:
            argv.append(f"--partition={spec.partition}")
        if spec.account:
            argv.append(f"--account={spec.account}")
        argv.append(f"--nodes={spec.nodes}")
        if spec.ntasks_per_node:
            argv.append(f"--ntasks-per-node={spec.ntasks_per_node}")
        if spec.cpus_per_task:
            argv.append(f"--cpus-per-task={spec.cpus_per_task}")
        if spec.gpus:
            gres = f"gpu:{spec.gpu_type}:{spec.gpus}" if spec.gpu_type else f"gpu:{spec.gpus}"
            argv.append(f"--gres={gres}")
        if spec.nodelist:
            argv.append(f"--nodelist={','.join(spec.nodelist)}")
        if spec.time_limit_minutes:
            argv.append(f"--time={spec.time_limit_minutes}")
        if spec.exclude:
            argv.append(f"--exclude={','.join(spec.exclude)}")
        work_dir = spec.work_dir
        if work_dir is None and self.default_work_dir:
            work_dir = self.default_work_dir.replace("{user}", as_user)
        if work_dir:
            argv.append(f"--chdir={validate_path(work_dir, absolute=True)}")
        if spec.output:
            argv.append(f"--output={spec.output}")
        argv.append(f"--comment={TAG_PREFIX}{spec.tag}")
        if spec.environment:
            argv.append("--export=" + ",".join(["ALL", *(f"{k}={v}" for k, v in spec.environment.items())]))
        return argv

    def submit_job(self, spec: JobSpec, *, as_user: str) -> int:
        validate_username(as_user)
        argv = self.sbatch_argv(spec, as_user=as_user)
        existing = self.find_job_by_tag(spec.tag, as_user=as_user)
        if existing is not None:
            return existing.job_id
        res = self._exec(argv, stdin=spec.script, as_user=as_user)
        if res.exit_code != 0:
            self._check(res, "sbatch", parse_sbatch_error(res.stderr or res.stdout))
        return self._parse(res, "sbatch", parse_sbatch_parsable, as_json=False)

    def cancel_job(self, job_id: int, *, as_user: str | None) -> None:
        if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id <= 0:
            raise ValidationError(f"invalid job id: {job_id!r}")
        job = self.get_job(job_id)
        if job is None:
            raise TerminalError(f"no such job: {job_id}", slurm_message="Invalid job id specified")
        if as_user is not None:
            validate_username(as_user)
            if job.user is not None and job.user != as_user:
                raise TerminalError(
                    f"job {job_id} belongs to {job.user}, not {as_user}",
                    slurm_message="Access/permission denied",
                )
        if job.finished:
            return
        argv = ["scancel", str(job_id)]
        if as_user is not None:
            self._run(argv, "scancel", as_user=as_user)
        else:
            self._admin(argv, "scancel")

    def read_job_output(self, job: JobInfo | int, *, as_user: str, max_bytes: int = 65536) -> str:
        validate_username(as_user)
        info = self.get_job(job) if isinstance(job, int) else job
        if info is None:
            raise TerminalError(f"no such job: {job}")
        if not info.stdout_path or "%" in info.stdout_path:
            raise TerminalError(f"job {info.job_id} has no known output file")
        path = validate_path(info.stdout_path, absolute=True)
        n = max(1, min(int(max_bytes), 16 * 1024 * 1024))
        res = self._exec(["tail", "-c", str(n), "--", path], as_user=as_user)
        self._check(res, "read job output")
        return res.stdout

    # ------------------------------------------------------------------ nodes
    def drain_node(self, name: str, reason: str) -> None:
        validate_node_name(name)
        validate_reason(reason)
        self._admin(["scontrol", "update", f"nodename={name}", "state=drain", f"reason={reason}"], "drain")

    def resume_node(self, name: str) -> None:
        validate_node_name(name)
        res = self._exec(
            ["scontrol", "update", f"nodename={name}", "state=resume"], sudo=self.use_sudo_for_admin
        )
        if res.exit_code != 0 and "Invalid node state specified" in (res.stderr + res.stdout):
            # resuming a node that is not drained/down: nothing to do (idempotent)
            node = next((n for n in self.list_nodes() if n.name == name), None)
            if node is not None and not node.drained and node.state != "down":
                return
        self._check(res, "resume")

    def reboot_node(
        self, name: str, *, asap: bool = False, next_state: NextState | None = None, reason: str | None = None
    ) -> None:
        validate_node_name(name)
        argv = ["scontrol", "reboot"]
        if asap:
            argv.append("ASAP")
        if next_state is not None:
            if next_state not in ("resume", "down"):
                raise ValidationError(f"invalid next state: {next_state!r}")
            argv.append(f"nextstate={next_state}")
        if reason is not None:
            argv.append(f"reason={validate_reason(reason)}")
        argv.append(name)
        self._admin(argv, "reboot")

    def power_cycle_node(self, bmc: BMC) -> None:
        power_cycle(bmc, runner=self.bmc_runner or LocalRunner(), timeout=self.timeout)

    def run_on_node(
        self, host: str, argv: Sequence[str], *, timeout: float, sudo: bool = False
    ) -> CommandResult:
        validate_host(host)
        prefix = [part.replace("{host}", host) for part in self.node_prefix]
        return self.runner.run([*prefix, *(["sudo", "-n", "--"] if sudo else []), *argv], timeout=timeout)

    def close(self) -> None:
        self.runner.close()

    # ------------------------------------------------------------------ helpers for callers
    def wait_for_job(self, job_id: int, *, timeout: float, poll: float = 0.5) -> JobInfo:
        """Poll until the job finished (or timeout -> RetryableError)."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.get_job(job_id)
            if job is not None and job.finished:
                return job
            if time.monotonic() > deadline:
                raise RetryableError(f"job {job_id} not finished after {timeout:g}s")
            time.sleep(poll)


def _natural(name: str) -> tuple[object, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))
