"""Drive the real docker-compose.yml from outside the containers: images, up/down, health, HTTP.

What the README's compose section tells a newcomer, done by a program: stand-in base images where no
registry is reachable (docker/standins/build.sh), the project's images from the real Dockerfiles,
`.env.example` as the project's `.env`, and a browser-like HTTP session against the published port.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("postgres", "redis", "slurm", "web", "worker", "beat", "feeder")
#: certificates a site added to this machine's trust store (Debian's place for them): pip inside the
#: image build needs them when the package index is reached through a TLS-inspecting proxy
SITE_CA_DIR = Path("/usr/local/share/ca-certificates")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def docker_unavailable() -> str | None:
    """Why the compose test cannot run here, or None. The reasons are exact: what is missing and how
    .ci/run provides it."""
    docker = shutil.which("docker")
    if docker is None:
        return "no docker client on PATH (apt-get install docker.io docker-compose debootstrap; see .ci/run)"
    if compose_argv() is None:
        return "no compose client: neither `docker compose` nor `docker-compose` (apt-get install docker-compose)"
    try:
        info = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=20
        )
    except subprocess.TimeoutExpired:
        return "`docker info` did not answer within 20 s: the Docker daemon is not responding"
    if info.returncode != 0:
        err = (info.stderr or info.stdout).strip().splitlines()
        return f"no Docker daemon: `docker info` failed ({err[-1] if err else info.returncode}); .ci/run starts dockerd"
    return None


def compose_argv() -> list[str] | None:
    """The compose client: Compose v2 (`docker compose`) where installed, else Debian's docker-compose 1.29."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def require_docker() -> None:
    reason = docker_unavailable()
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"CI=true and the compose stack cannot run: {reason}")
    pytest.skip(reason)


def run(
    argv: list[str], *, timeout: float, env: dict[str, str] | None = None, cwd: Path | None = None
) -> str:
    """Run a command; on failure raise with its output (the assertion message is the diagnosis)."""
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(argv[:6])} exited {proc.returncode}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    return proc.stdout


def site_ca_certs() -> str:
    return "".join(p.read_text() for p in sorted(SITE_CA_DIR.glob("*.crt"))) if SITE_CA_DIR.is_dir() else ""


def images_build(timings: dict[str, float]) -> None:
    """Stand-in bases (cached by tag and input hash), then the project's two images from the real
    Dockerfiles (Docker's layer cache makes an unchanged rebuild take seconds)."""
    docker = shutil.which("docker") or "docker"
    started = time.monotonic()
    run([str(ROOT / "docker" / "standins" / "build.sh")], timeout=900, env={"DOCKER": docker})
    timings["base images"] = time.monotonic() - started
    started = time.monotonic()
    args = ["--build-arg", f"BUILD_CA_CERTS={site_ca_certs()}"]
    # the dependency stage is tagged: `docker image prune` then keeps the layer cache pip needs
    run(
        [docker, "build", "-q", *args, "--target", "deps", "-t", "rackpilot-build:deps", "."],
        timeout=900,
        cwd=ROOT,
    )
    run([docker, "build", "-q", *args, "-t", "rackpilot:latest", "."], timeout=900, cwd=ROOT)
    run(
        [docker, "build", "-q", "-t", "rackpilot-slurm:latest", "-f", "docker/slurm.Dockerfile", "."],
        timeout=900,
        cwd=ROOT,
    )
    timings["project images"] = time.monotonic() - started


def image_size_mb(image: str) -> float:
    docker = shutil.which("docker") or "docker"
    return int(run([docker, "image", "inspect", "-f", "{{.Size}}", image], timeout=30).strip()) / 1e6


@dataclass
class Stack:
    """One compose project in its own folder: the real docker-compose.yml and .env.example as .env."""

    workdir: Path
    project: str
    port: int

    def __post_init__(self) -> None:
        shutil.copyfile(ROOT / "docker-compose.yml", self.workdir / "docker-compose.yml")
        shutil.copyfile(ROOT / ".env.example", self.workdir / ".env")

    def compose(self, *args: str, timeout: float = 300, env: dict[str, str] | None = None) -> str:
        argv = [*(compose_argv() or []), "-p", self.project, "-f", str(self.workdir / "docker-compose.yml")]
        return run(
            [*argv, *args],
            timeout=timeout,
            cwd=self.workdir,
            env={"RACKPILOT_PORT": str(self.port), **(env or {})},
        )

    def container_ids(self) -> dict[str, str]:
        docker = shutil.which("docker") or "docker"
        out = run(
            [docker, "ps", "-a", "--filter", f"label=com.docker.compose.project={self.project}", "--format",
             '{{.ID}} {{.Label "com.docker.compose.service"}}'],
            timeout=30,
        )  # fmt: skip
        return {svc: cid for cid, svc in (line.split() for line in out.splitlines() if line.strip())}

    def health(self) -> dict[str, str]:
        """service -> its container's health status ('healthy', 'starting', 'unhealthy' or the state)."""
        docker = shutil.which("docker") or "docker"
        ids = self.container_ids()
        if not ids:
            return {}
        out = run([docker, "inspect", *ids.values()], timeout=30)
        by_id = {c["Id"][:12]: c for c in json.loads(out)}
        status = {}
        for svc, cid in ids.items():
            state = by_id[cid]["State"]
            status[svc] = state["Health"]["Status"] if state.get("Health") else state["Status"]
        return status

    def wait_healthy(self, *, timeout: float = 420) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        status: dict[str, str] = {}
        while time.monotonic() < deadline:
            status = self.health()
            if status == dict.fromkeys(SERVICES, "healthy"):
                return status
            if "unhealthy" in status.values() or "exited" in status.values():
                break
            time.sleep(3)
        raise AssertionError(f"not every service became healthy: {status}\n{self.logs_tail()}")

    def logs(self, service: str) -> str:
        return self.compose("logs", "--no-color", service, timeout=60)

    def logs_tail(self, lines: int = 40) -> str:
        try:
            return self.compose("logs", "--no-color", "--tail", str(lines), timeout=60)
        except (AssertionError, subprocess.TimeoutExpired) as exc:
            return f"(no logs: {exc})"

    def manage(self, *args: str, env: dict[str, str] | None = None) -> str:
        """`docker compose exec web python manage.py ...`, as the README tells an admin to."""
        flags = [arg for key, value in (env or {}).items() for arg in ("-e", f"{key}={value}")]
        return self.compose("exec", "-T", *flags, "web", "python", "manage.py", *args, timeout=400)

    def down(self, *, volumes: bool) -> None:
        self.compose("down", "--remove-orphans", *(["--volumes"] if volumes else []), timeout=180)


@dataclass
class Browser:
    """A cookie-keeping HTTP session against the published port, as a browser without JavaScript."""

    base: str
    jar: http.cookiejar.CookieJar = field(default_factory=http.cookiejar.CookieJar)

    def __post_init__(self) -> None:
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def request(
        self, method: str, path: str, *, data: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, str, str]:
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers or {})
        try:
            with self.opener.open(req, timeout=30) as resp:
                return resp.status, resp.read().decode(), resp.url
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(), exc.url

    def get(self, path: str, **kw: Any) -> tuple[int, str, str]:
        return self.request("GET", path, **kw)

    def csrf_cookie(self) -> str:
        return next(c.value for c in self.jar if c.name == "csrftoken")

    def form_post(self, path: str, fields: dict[str, str]) -> str:
        """GET the page, then POST its form with ``fields`` and the page's CSRF token; returns the
        answer's body (a 4xx is returned too: the page shows the form's errors)."""
        _status, page, _url = self.get(path)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert token, page[:500]
        data = urllib.parse.urlencode({**fields, "csrfmiddlewaretoken": token.group(1)}).encode()
        return self.request("POST", path, data=data)[1]

    def login(self, username: str, password: str) -> tuple[int, str, str]:
        _status, page, _url = self.get("/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert token, page[:500]
        form = {
            "username": username,
            "password": password,
            "csrfmiddlewaretoken": token.group(1),
            "next": "/",
        }
        return self.request("POST", "/login/", data=urllib.parse.urlencode(form).encode())

    def api(self, method: str, path: str, body: Any = None, *, token: str | None = None) -> tuple[int, Any]:
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Token {token}"
        elif method != "GET":
            headers["X-CSRFToken"] = self.csrf_cookie()
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        status, text, _url = self.request(method, path, data=data, headers=headers)
        return status, (json.loads(text) if text else None)


def poll(check: Any, *, timeout: float, interval: float = 2.0, what: str) -> Any:
    """Call ``check`` until it returns something truthy; fail with the last value after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"{what}: not seen within {timeout:.0f} s (last: {last!r})")
