"""Command runners: a local subprocess and SSH with a pinned host key.

Both take an argv list, never a shell string. ``as_user`` runs the command as that account via
``sudo -n -u <user> --``; ``sudo=True`` via ``sudo -n --`` (root). ``env`` is set *outside*
sudo, so sudo's ``env_keep`` decides what survives (SLURM_CONF in the lab's sudoers).
Runners return a :class:`CommandResult` for any exit status; they raise
:class:`RetryableError` for timeouts/unreachable hosts and :class:`HostKeyError` for host keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any, Protocol, runtime_checkable

from .errors import ClusterError, HostKeyError, RetryableError, TerminalError
from .types import CommandResult
from .validation import validate_env_name, validate_username


@runtime_checkable
class Runner(Protocol):
    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        timeout: float,
        as_user: str | None = None,
        sudo: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult: ...

    def close(self) -> None: ...


def build_argv(argv: Sequence[str], *, as_user: str | None, sudo: bool, sudo_path: str = "sudo") -> list[str]:
    """Prefix argv with ``sudo -n [-u user] --`` as asked."""
    if not argv or not all(isinstance(a, str) for a in argv):
        raise TerminalError("empty or non-string argv")
    if any("\x00" in a for a in argv):
        raise TerminalError("NUL byte in argv")
    if as_user is not None:
        validate_username(as_user)
        return [sudo_path, "-n", "-u", as_user, "--", *argv]
    if sudo:
        return [sudo_path, "-n", "--", *argv]
    return list(argv)


class LocalRunner:
    """Runs commands on this machine with subprocess (argv list, no shell)."""

    def __init__(self, *, env: Mapping[str, str] | None = None, sudo_path: str = "sudo") -> None:
        self.env = dict(env or {})
        self.sudo_path = sudo_path

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        timeout: float,
        as_user: str | None = None,
        sudo: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        full = build_argv(argv, as_user=as_user, sudo=sudo, sudo_path=self.sudo_path)
        proc_env = {**os.environ, **self.env, **(env or {})}
        started = time.monotonic()
        try:
            proc = subprocess.run(
                full,
                input=stdin.encode() if stdin is not None else None,
                stdin=None if stdin is not None else subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
                env=proc_env,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise RetryableError(f"timed out after {timeout:g}s: {shlex.join(full)}") from None
        except FileNotFoundError as exc:
            raise TerminalError(f"command not found: {exc.filename or full[0]}") from None
        except OSError as exc:
            raise RetryableError(f"could not run {full[0]}: {exc}") from None
        return CommandResult(
            argv=tuple(full),
            exit_code=proc.returncode,
            stdout=proc.stdout.decode("utf-8", "replace"),
            stderr=proc.stderr.decode("utf-8", "replace"),
            duration=time.monotonic() - started,
        )

    def close(self) -> None:
        return None


def parse_host_key(line: str) -> str:
    """A pinned host key as ``ssh-ed25519 AAAA...`` or a known_hosts line
    (``[host]:port ssh-ed25519 AAAA... comment``) -> ``type base64``."""
    tokens = line.strip().split()
    for i, tok in enumerate(tokens):
        if tok.startswith(("ssh-", "ecdsa-sha2-", "sk-ssh-", "sk-ecdsa-", "rsa-sha2-")) and i + 1 < len(
            tokens
        ):
            return f"{tok} {tokens[i + 1]}"
    raise HostKeyError(f"not a host key line: {line[:60]!r}")


class SSHRunner:
    """Runs commands on a remote host over SSH (asyncssh, driven from a private event loop
    thread, exposed as a synchronous API). The connection is reused across calls.

    The host key must match ``host_key`` (pinned); unknown or changed keys raise HostKeyError.
    """

    def __init__(
        self,
        host: str,
        *,
        username: str,
        host_key: str,
        port: int = 22,
        client_key: str | None = None,
        client_key_data: str | None = None,
        connect_timeout: float = 10.0,
        env: Mapping[str, str] | None = None,
        sudo_path: str = "sudo",
    ) -> None:
        import asyncssh

        self.host = host
        self.port = port
        self.username = username
        self.connect_timeout = connect_timeout
        self.env = dict(env or {})
        for k in self.env:
            validate_env_name(k)
        self.sudo_path = sudo_path
        self._host_key_text = parse_host_key(host_key)
        try:
            self._host_key = asyncssh.import_public_key(self._host_key_text)
        except (asyncssh.KeyImportError, ValueError) as exc:
            raise HostKeyError(f"invalid pinned host key: {exc}") from None
        if client_key_data is not None:
            self._client_keys: list[Any] = [asyncssh.import_private_key(client_key_data)]
        elif client_key is not None:
            self._client_keys = [asyncssh.read_private_key(client_key)]
        else:
            raise TerminalError("SSHRunner needs client_key (path) or client_key_data")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._conn: Any = None
        self._lock = threading.Lock()

    # -- event loop plumbing
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                t = threading.Thread(target=loop.run_forever, name="rackpilot-ssh", daemon=True)
                t.start()
                self._loop, self._thread = loop, t
            return self._loop

    def _call(self, coro: Any, timeout: float) -> Any:
        loop = self._ensure_loop()
        fut = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return fut.result(timeout + 5)
        except FutureTimeoutError:
            fut.cancel()
            raise RetryableError(f"timed out after {timeout:g}s talking to {self.host}") from None

    async def _connect(self) -> Any:
        import asyncssh

        if self._conn is not None:
            return self._conn
        try:
            conn = await asyncio.wait_for(
                asyncssh.connect(
                    self.host,
                    port=self.port,
                    username=self.username,
                    client_keys=self._client_keys,
                    known_hosts=([self._host_key], [], []),
                    agent_path=None,
                    password=None,
                    kbdint_auth=False,
                    config=[],
                    connect_timeout=self.connect_timeout,
                ),
                timeout=self.connect_timeout + 1,
            )
        except asyncssh.HostKeyNotVerifiable as exc:
            raise HostKeyError(
                f"SSH host key of {self.host}:{self.port} does not match the pinned key "
                f"({self._host_key_text.split()[0]}): {exc.reason}"
            ) from None
        except asyncssh.PermissionDenied as exc:
            raise TerminalError(
                f"SSH authentication as {self.username}@{self.host}:{self.port} refused: {exc.reason}"
            ) from None
        except TimeoutError:
            raise RetryableError(f"SSH connection to {self.host}:{self.port} timed out") from None
        except (OSError, asyncssh.Error) as exc:
            raise RetryableError(f"SSH connection to {self.host}:{self.port} failed: {exc}") from None
        self._conn = conn
        return conn

    async def _run(self, command: str, stdin: str | None, timeout: float) -> tuple[int, str, str]:
        import asyncssh

        conn = await self._connect()
        try:
            res = await asyncio.wait_for(
                conn.run(
                    command,
                    # empty/no input: give the command an immediate EOF, never a dangling stdin
                    input=stdin if stdin else None,
                    stdin=asyncssh.PIPE if stdin else asyncssh.DEVNULL,
                    check=False,
                    encoding="utf-8",
                    errors="replace",
                ),
                timeout=timeout,
            )
        except TimeoutError:
            raise RetryableError(f"timed out after {timeout:g}s: {command[:200]}") from None
        except (OSError, asyncssh.Error) as exc:
            self._conn = None
            with contextlib.suppress(Exception):
                conn.close()
            raise RetryableError(f"SSH session to {self.host} failed: {exc}") from None
        code = res.exit_status
        if code is None:
            code = 128 + 15 if res.exit_signal else 255
        out = res.stdout if isinstance(res.stdout, str) else ""
        err = res.stderr if isinstance(res.stderr, str) else ""
        return (int(code), out, err)

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        timeout: float,
        as_user: str | None = None,
        sudo: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        full = build_argv(argv, as_user=as_user, sudo=sudo, sudo_path=self.sudo_path)
        merged = {**self.env, **(env or {})}
        if merged:
            for k in merged:
                validate_env_name(k)
            full = ["env", *(f"{k}={v}" for k, v in merged.items()), *full]
        command = shlex.join(full)
        started = time.monotonic()
        try:
            code, out, err = self._call(self._run(command, stdin, timeout), timeout + self.connect_timeout)
        except ClusterError:
            raise
        return CommandResult(
            argv=tuple(full), exit_code=code, stdout=out, stderr=err, duration=time.monotonic() - started
        )

    def close(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        async def _close() -> None:
            if self._conn is not None:
                self._conn.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._conn.wait_closed(), 2)
                self._conn = None

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(_close(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        loop.close()
        self._loop = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()
