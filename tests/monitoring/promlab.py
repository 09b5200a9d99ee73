"""A loopback Prometheus stack for the tests and benchmarks: Debian's `prometheus` scraping a real
`prometheus-node-exporter` and an HTTP server that serves recorded dcgm-exporter text, optionally
remote-writing to a portal server, optionally with a backfilled history (promtool)."""

from __future__ import annotations

import http.server
import json
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.lab import in_ci
from tests.net import free_port, wait_port

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or "/usr/bin/prometheus-node-exporter"
FIXTURES = Path(__file__).resolve().parent.parent / "parsers" / "fixtures"
# the recorded dcgm-exporter page (Hostname="gpu07", two H100) without the parser edge cases the
# fixture ends with (a sample timestamped in 2024 would fail the scrape)
DCGM_TEXT = (FIXTURES / "dcgm_exporter_2gpu.prom").read_text().split("\n\n# a free-form comment")[0] + "\n"


def require_binaries() -> None:
    missing = [p for p in (PROMETHEUS, PROMTOOL, NODE_EXPORTER) if not Path(p).exists()]
    if missing:
        msg = f"{', '.join(missing)} missing (apt-get install -y prometheus prometheus-node-exporter)"
        if in_ci():
            pytest.fail(f"CI=true and {msg}")
        pytest.skip(msg)


@dataclass
class PromLab:
    url: str  # Prometheus's HTTP API base
    node_exporter_port: int
    dcgm_port: int

    def query(self, promql: str) -> list[dict[str, Any]]:
        q = urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{q}", timeout=5) as resp:  # noqa: S310
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def wait_for(self, promql: str, count: int = 1, timeout: float = 60) -> list[dict[str, Any]]:
        """Poll until ``promql`` has ``count`` series (scrapes every second)."""
        deadline = time.monotonic() + timeout
        found: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            found = self.query(promql)
            if len(found) >= count:
                return found
            time.sleep(0.3)
        raise AssertionError(f"{promql}: {len(found)} series after {timeout}s")


def _serve(text: str, port: int) -> http.server.ThreadingHTTPServer:
    body = text.encode()

    class Exporter(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Exporter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def backfill(data_dir: Path, openmetrics: str) -> None:
    """Write ``openmetrics`` (ends with ``# EOF``) into TSDB blocks under ``data_dir``."""
    data_dir.mkdir(parents=True, exist_ok=True)
    src = data_dir.parent / "backfill.om"
    src.write_text(openmetrics)
    subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(src), str(data_dir)],
        check=True,
        capture_output=True,
    )


def _wait_ready(log: Path, proc: subprocess.Popen[bytes], timeout: float = 90) -> None:
    """Until Prometheus says it serves queries (its port opens earlier, answering 503 while the
    TSDB loads); the log is read because the API may need credentials the test does not hold."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if "Server is ready to receive web requests." in log.read_text():
            return
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited: {log.read_text()[-2000:]}")
        time.sleep(0.2)
    raise RuntimeError(f"prometheus not ready after {timeout}s: {log.read_text()[-2000:]}")


@contextmanager
def prom_lab(
    tmp: Path,
    *,
    remote_write_url: str | None = None,
    token_file: Path | None = None,
    node: str = "gpu07",
    history: str | None = None,
    scrape: bool = True,
    basic_auth: tuple[str, str] | None = None,
    tls: tuple[Path, Path] | None = None,
) -> Iterator[PromLab]:
    """Start the stack; ``node`` is the name node_exporter's ``instance`` is relabelled to (as sites
    do), ``history`` OpenMetrics text backfilled before Prometheus starts, ``basic_auth`` (user,
    bcrypt hash) required of every HTTP API client and ``tls`` (certificate, key files) it serves
    HTTPS with (Prometheus's --web.config.file)."""
    require_binaries()
    prom_port, ne_port, dcgm_port = free_port(), free_port(), free_port()
    dcgm = _serve(DCGM_TEXT, dcgm_port)
    exporter = subprocess.Popen(
        [NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{ne_port}", "--collector.disable-defaults",
         "--collector.netdev", "--collector.diskstats", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    scrape_configs = [
        {
            "job_name": "dcgm",
            "static_configs": [{"targets": [f"127.0.0.1:{dcgm_port}"]}],
        },
        {
            "job_name": "node",
            "static_configs": [{"targets": [f"127.0.0.1:{ne_port}"]}],
            "relabel_configs": [{"target_label": "instance", "replacement": f"{node}:9100"}],
        },
    ]
    config: dict[str, Any] = {
        "global": {"scrape_interval": "1s"},
        "scrape_configs": scrape_configs if scrape else [],
    }
    if remote_write_url:
        rw: dict[str, Any] = {
            "url": remote_write_url,
            "queue_config": {"batch_send_deadline": "1s", "min_backoff": "100ms"},
        }
        if token_file:
            rw["authorization"] = {"type": "Token", "credentials_file": str(token_file)}
        config["remote_write"] = [rw]
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    if history:
        backfill(tmp / "data", history)
    web_config: dict[str, Any] = {}
    if basic_auth:
        web_config["basic_auth_users"] = {basic_auth[0]: basic_auth[1]}
    if tls:
        web_config["tls_server_config"] = {"cert_file": str(tls[0]), "key_file": str(tls[1])}
    web = []
    if web_config:
        (tmp / "web.yml").write_text(yaml.safe_dump(web_config))
        web = [f"--web.config.file={tmp / 'web.yml'}"]
    log = (tmp / "prometheus.log").open("w")  # read it when a test fails: what Prometheus said
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
         f"--web.listen-address=127.0.0.1:{prom_port}", "--storage.tsdb.retention.time=30d",
         "--log.level=info", *web],
        stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    try:
        _wait_ready(tmp / "prometheus.log", proc)
        wait_port(ne_port, timeout=30)
        yield PromLab(f"{'https' if tls else 'http'}://127.0.0.1:{prom_port}", ne_port, dcgm_port)
    finally:
        proc.terminate()
        exporter.terminate()
        proc.wait(timeout=20)
        exporter.wait(timeout=20)
        dcgm.shutdown()
        dcgm.server_close()
        log.close()
