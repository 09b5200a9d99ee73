"""Pull collection: run the tools on each node over SSH, scrape dcgm-exporter over HTTP, ingest.

One SSH connection per cluster to its login host (pinned host key, the service account's key);
each node is reached from there with ``PORTAL_TELEMETRY_NODE_PREFIX`` (default
``ssh -o BatchMode=yes -o ConnectTimeout=5 {host}``) put before the tool's argv, so the portal
never needs the nodes' host keys. Commands are argv lists, quoted by the runner, never shell
strings. Nodes run in parallel with bounded concurrency (PORTAL_TELEMETRY_PULL_CONCURRENCY);
one failing node or tool is recorded and never stops the others.
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connections

from inventory.models import Cluster, Node
from jobs.cluster.errors import ClusterError
from jobs.cluster.runners import Runner, SSHRunner
from monitoring.parsers import DEFAULT_QUERY_FIELDS, nvidia_smi_argv
from monitoring.services import IngestError, telemetry_ingest_text

log = logging.getLogger(__name__)

# tool -> (ingest format, argv)
TOOLS: dict[str, tuple[str, list[str]]] = {
    "nvidia-smi": ("nvidia-smi-csv", nvidia_smi_argv(DEFAULT_QUERY_FIELDS)),
    "tt-smi": ("tt-smi", ["tt-smi", "-s", "--snapshot_no_tty"]),
    "ipmitool": ("ipmitool-sdr", ["ipmitool", "sdr"]),
}
NOT_INSTALLED_CODES = {126, 127}


@dataclass
class PullReport:
    cluster: str
    stored: int = 0
    nodes_ok: list[str] = field(default_factory=list)
    errors: dict[str, list[str]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "stored": self.stored,
            "nodes_ok": self.nodes_ok,
            "errors": self.errors,
        }


def pullable_cluster_ids() -> list[int]:
    return list(
        Cluster.objects.filter(backend=Cluster.Backend.SLURM_SSH)
        .exclude(ssh_host="")
        .exclude(ssh_host_key="")
        .values_list("id", flat=True)
    )


def cluster_runner(cluster: Cluster) -> SSHRunner:
    return SSHRunner(
        cluster.ssh_host,
        port=cluster.ssh_port,
        username=cluster.ssh_user,
        host_key=cluster.ssh_host_key,
        client_key=cluster.ssh_key_path or None,
        connect_timeout=10.0,
    )


def node_argv(node: Node, argv: Sequence[str]) -> list[str]:
    prefix = [part.replace("{host}", node.hostname) for part in settings.PORTAL_TELEMETRY_NODE_PREFIX]
    return [*prefix, *argv]


def _collect_ssh(runner: Runner, node: Node, tools: Sequence[str]) -> tuple[int, list[str]]:
    stored, errors = 0, []
    timeout = float(settings.PORTAL_TELEMETRY_PULL_TIMEOUT_S)
    for tool in tools:
        if tool not in TOOLS:
            continue
        fmt, argv = TOOLS[tool]
        try:
            result = runner.run(node_argv(node, argv), timeout=timeout)
        except ClusterError as exc:
            errors.append(f"{tool}: {exc}")
            continue
        if result.exit_code in NOT_INSTALLED_CODES:
            continue  # the tool is not on this node (a Tenstorrent box has no nvidia-smi)
        if result.exit_code != 0 or not result.stdout.strip():
            errors.append(f"{tool}: exit {result.exit_code}: {result.stderr.strip()[:300]}")
            continue
        stored += _ingest(fmt, result.stdout, node, tool, errors)
    return stored, errors


def _ingest(fmt: str, text: str, node: Node, tool: str, errors: list[str]) -> int:
    try:
        return telemetry_ingest_text(fmt, text, node_hostname=node.hostname).stored
    except IngestError as exc:
        errors.append(f"{tool}: {exc}")
        return 0


def scrape_dcgm(node: Node, *, port: int | None = None, timeout: float = 5.0) -> str | None:
    """GET http://<node>:9400/metrics; None when nothing listens there."""
    url = f"http://{node.hostname}:{port or settings.PORTAL_TELEMETRY_DCGM_PORT}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - http to a managed node
            body: bytes = resp.read(8 * 1024 * 1024)
            return body.decode("utf-8", "replace")
    except ConnectionRefusedError:
        return None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ConnectionRefusedError):
            return None
        raise


def telemetry_pull_cluster(
    cluster_id: int,
    *,
    runner_factory: Callable[[Cluster], Runner] = cluster_runner,
    tools: Sequence[str] | None = None,
) -> PullReport:
    """Collect every node of the cluster once and ingest what the tools print."""
    cluster = Cluster.objects.get(pk=cluster_id)
    tools = list(tools if tools is not None else settings.PORTAL_TELEMETRY_PULL_TOOLS)
    nodes = list(cluster.nodes.exclude(status__in=["planned", "decommissioned"]).order_by("hostname"))
    report = PullReport(cluster=cluster.name)
    ssh_tools = [t for t in tools if t in TOOLS]
    runner: Runner | None = None
    if ssh_tools:
        try:
            runner = runner_factory(cluster)
        except ClusterError as exc:
            report.errors["*"] = [f"ssh: {exc}"]

    if runner is not None:
        try:  # one connection, opened (and its host key checked) before the threads share it
            runner.run(["true"], timeout=float(settings.PORTAL_TELEMETRY_PULL_TIMEOUT_S))
        except ClusterError as exc:
            report.errors["*"] = [f"ssh: {exc}"]
            runner.close()
            runner = None

    def one(node: Node) -> tuple[str, int, list[str]]:
        stored, errors = 0, list[str]()
        try:
            if runner is not None:
                stored, errors = _collect_ssh(runner, node, ssh_tools)
            if "dcgm-exporter" in tools:
                try:
                    text = scrape_dcgm(node)
                except (OSError, urllib.error.URLError) as exc:
                    errors.append(f"dcgm-exporter: {exc}")
                else:
                    if text:
                        stored += _ingest("prometheus", text, node, "dcgm-exporter", errors)
        finally:
            connections.close_all()  # this pool thread's own database connection
        return node.hostname, stored, errors

    workers = max(1, min(settings.PORTAL_TELEMETRY_PULL_CONCURRENCY, len(nodes) or 1))
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="telemetry-pull") as pool:
            for host, stored, errors in pool.map(one, nodes):
                report.stored += stored
                if errors:
                    report.errors[host] = errors
                else:
                    report.nodes_ok.append(host)
    finally:
        if runner is not None:
            runner.close()
    if report.errors:
        log.warning("telemetry pull of %s: %s", cluster.name, report.errors)
    return report
