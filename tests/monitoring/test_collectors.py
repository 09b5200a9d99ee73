"""Pull collection over the REAL loopback sshd of scripts/slurm-lab (tool outputs are recorded files)."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from monitoring.collectors import telemetry_pull_cluster
from monitoring.models import Sample, Series
from tests.monitoring.conftest import FIXTURES, fixture_text


@pytest.fixture
def lab(slurm_lab: dict[str, str]) -> dict[str, str]:
    return slurm_lab


FAKE_TOOL = """#!/bin/sh
# Prints the recorded output of {tool} for the node named in RACKPILOT_NODE (as the real tool would).
expect='{expect}'
[ "$*" = "$expect" ] || {{ echo "unexpected arguments: $*" >&2; exit 2; }}
file="{dir}/{tool}-$RACKPILOT_NODE.out"
[ -f "$file" ] || {{ echo "{tool}: command not found" >&2; exit 127; }}
cat "$file"
"""


@pytest.fixture
def tool_dir() -> Iterator[Path]:
    """A directory the lab's service account can read, with fake nvidia-smi / tt-smi / ipmitool."""
    from monitoring.collectors import TOOLS

    path = Path(tempfile.mkdtemp(prefix="rp-tools-", dir="/tmp"))
    path.chmod(0o755)
    for tool, (_fmt, argv) in TOOLS.items():
        script = path / tool
        script.write_text(FAKE_TOOL.format(tool=tool, dir=path, expect=" ".join(argv[1:])))
        script.chmod(0o755)
    outputs = {
        "nvidia-smi-gpu01": "nvidia_smi_h100_8gpu_nounits.csv",
        "ipmitool-gpu01": "ipmitool_sdr_r720.txt",
        "tt-smi-rig01": "tt_smi_4x_p150a.json",
    }
    for name, fixture in outputs.items():
        (path / f"{name}.out").write_text((FIXTURES / fixture).read_text())
        (path / f"{name}.out").chmod(0o644)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _cluster(inv: Any, lab: dict[str, str]) -> Any:
    return inv.cluster(
        ssh_host=lab["SLURM_LAB_SSH_HOST"],
        ssh_port=int(lab["SLURM_LAB_SSH_PORT"]),
        ssh_user=lab["SLURM_LAB_SSH_USER"],
        ssh_host_key=lab["SLURM_LAB_SSH_HOST_KEY"],
        ssh_key_path=lab["SLURM_LAB_SSH_KEY"],
    )


@pytest.mark.slurm
@pytest.mark.django_db(transaction=True)
def test_pull_runs_the_tools_over_ssh_on_each_node_and_ingests(
    inv: Any, tool_dir: Path, settings: Any, lab: dict[str, str]
) -> None:
    # given a cluster reached over the loopback sshd, an NVIDIA node, a Tenstorrent node and a dead node
    settings.PORTAL_TELEMETRY_NODE_PREFIX = ["env", f"PATH={tool_dir}:/usr/bin:/bin", "RACKPILOT_NODE={host}"]
    cluster = _cluster(inv, lab)
    inv.node("gpu01", cluster=cluster)
    inv.node("rig01", cluster=cluster)
    # when the cluster is pulled once
    report = telemetry_pull_cluster(cluster.pk, tools=["nvidia-smi", "tt-smi", "ipmitool"])
    # then each node's installed tools were run and their output stored (missing tools skipped)
    assert report.errors == {}
    assert sorted(report.nodes_ok) == ["gpu01", "rig01"]
    assert report.stored == 192 + 13 + 102
    assert Sample.objects.count() == 307
    assert Series.objects.filter(node__hostname="rig01", metric="heartbeat").count() == 4


@pytest.mark.slurm
@pytest.mark.django_db(transaction=True)
def test_a_failing_tool_is_reported_and_the_other_nodes_still_collected(
    inv: Any, tool_dir: Path, settings: Any, lab: dict[str, str]
) -> None:
    settings.PORTAL_TELEMETRY_NODE_PREFIX = ["env", f"PATH={tool_dir}:/usr/bin:/bin", "RACKPILOT_NODE={host}"]
    (tool_dir / "nvidia-smi-bad01.out").write_text("this is not csv at all\n")
    (tool_dir / "nvidia-smi-bad01.out").chmod(0o644)
    cluster = _cluster(inv, lab)
    inv.node("gpu01", cluster=cluster)
    inv.node("bad01", cluster=cluster)
    report = telemetry_pull_cluster(cluster.pk, tools=["nvidia-smi"])
    assert report.nodes_ok == ["gpu01"]
    assert list(report.errors) == ["bad01"]
    assert report.errors["bad01"][0].startswith("nvidia-smi: ")
    assert report.stored == 192


@pytest.mark.slurm
@pytest.mark.django_db(transaction=True)
def test_a_wrong_host_key_stops_ssh_collection_with_a_clear_error(
    inv: Any, settings: Any, lab: dict[str, str]
) -> None:
    cluster = _cluster(
        inv,
        {
            **lab,
            "SLURM_LAB_SSH_HOST_KEY": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0wmN/Cr3JXqmLW7u+g9pTh+wyqDHpSQEQQ5U8TlrIF",
        },
    )
    inv.node("gpu01", cluster=cluster)
    report = telemetry_pull_cluster(cluster.pk, tools=["nvidia-smi"])
    assert report.errors["*"][0].startswith("ssh: SSH host key of")
    assert Sample.objects.count() == 0


class _Exporter(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        body = fixture_text("dcgm_exporter_2gpu.prom").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.mark.django_db(transaction=True)
def test_dcgm_exporter_is_scraped_over_http(inv: Any, settings: Any) -> None:
    server = HTTPServer(("127.0.0.1", 0), _Exporter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings.PORTAL_TELEMETRY_DCGM_PORT = server.server_port
    try:
        cluster = inv.cluster()
        inv.node("localhost", cluster=cluster)
        report = telemetry_pull_cluster(cluster.pk, tools=["dcgm-exporter"])
    finally:
        server.shutdown()
    assert report.errors == {}
    assert report.stored == 31
