"""The Grafana dashboards and the Prometheus scrape example in docs/ against the real /metrics.

Every metric and label a dashboard queries must be one /metrics exports (so the dashboards never
drift from the export), and a real Prometheus (Debian's `prometheus`) scraping the portal on
loopback must get the series back through its HTTP API.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client
from django.utils import timezone

from monitoring import services
from monitoring.parsers import METRICS, parse_prometheus_text
from monitoring.services.ingest import SERIES_LABELS
from portal.services import api_token_create
from tests.lab import in_ci
from tests.monitoring.conftest import H100_UUIDS, fixture_text

DOCS = Path(__file__).resolve().parent.parent.parent / "docs"
DASHBOARDS = sorted((DOCS / "grafana" / "dashboards").glob("*.json"))
FIXED = {"rackpilot_up", "rackpilot_nodes", "rackpilot_series", "rackpilot_alerts_firing"}
EXPORTED_LABELS = {"node", "card", "severity", *SERIES_LABELS}

_METRIC_RE = re.compile(r"\b(rackpilot_[a-z0-9_]+)\b")
_SELECTOR_RE = re.compile(r"\b(rackpilot_[a-z0-9_]+)\s*\{([^}]*)\}")
_MATCHER_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
_BY_RE = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
_LEGEND_RE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def _queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(expr, legendFormat) of every panel target and every query variable."""
    out = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            out.append((target["expr"], target.get("legendFormat", "")))
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            out.append((var["query"]["query"], ""))
    return out


def _needed() -> dict[str, set[str]]:
    """metric -> the labels the dashboards select, group or label it by."""
    needed: dict[str, set[str]] = {}
    for path in DASHBOARDS:
        for expr, legend in _queries(json.loads(path.read_text())):
            names = _METRIC_RE.findall(expr)
            around = {lab.strip() for grp in _BY_RE.findall(expr) for lab in grp.split(",") if lab.strip()}
            around |= set(_LEGEND_RE.findall(legend))
            if expr.startswith("label_values("):
                around.add(expr.rsplit(",", 1)[1].strip(" )"))
            for name in names:
                needed.setdefault(name, set()).update(around if len(names) == 1 else set())
            for name, inner in _SELECTOR_RE.findall(expr):
                needed[name].update(_MATCHER_RE.findall(inner))
    return needed


def test_the_four_dashboards_are_provisionable_grafana_json() -> None:
    assert [p.name for p in DASHBOARDS] == [
        "rackpilot-card.json",
        "rackpilot-cluster-overview.json",
        "rackpilot-energy.json",
        "rackpilot-node.json",
    ]
    uids = []
    for path in DASHBOARDS:
        d = json.loads(path.read_text())
        uids.append(d["uid"])
        assert d["title"].startswith("Rackpilot / ")
        assert d["templating"]["list"][0]["type"] == "datasource"  # pick the Prometheus when provisioned
        ids = [p["id"] for p in d["panels"]]
        assert len(ids) == len(set(ids)) and ids
        for panel in d["panels"]:
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert panel["targets"], panel["title"]
            assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]  # numbers carry units
            assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
    assert sorted(uids) == ["rackpilot-card", "rackpilot-energy", "rackpilot-node", "rackpilot-overview"]
    provider = yaml.safe_load((DOCS / "grafana/provisioning/dashboards/rackpilot.yaml").read_text())
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards/rackpilot"
    source = yaml.safe_load((DOCS / "grafana/provisioning/datasources/rackpilot.yaml").read_text())
    assert source["datasources"][0]["type"] == "prometheus"


def test_every_metric_and_label_the_dashboards_query_is_one_metrics_exports_by_name() -> None:
    needed = _needed()
    exportable = FIXED | {f"rackpilot_{m}" for m in METRICS}
    assert sorted(set(needed) - exportable) == []
    unknown_labels = {
        m: sorted(labs - EXPORTED_LABELS) for m, labs in needed.items() if labs - EXPORTED_LABELS
    }
    assert unknown_labels == {}
    # the panels that matter are there
    for name in (
        "rackpilot_power_w",
        "rackpilot_node_power_w",
        "rackpilot_temperature_c",
        "rackpilot_energy_j",
    ):
        assert name in needed


@pytest.mark.django_db
def test_metrics_exports_every_series_the_dashboards_query(inv: Any, admin_user: Any) -> None:
    # given: one real ingest per metric the dashboards use, with the labels they select on
    node = inv.node("gpu01")
    inv.card(node, gpu_uuid=H100_UUIDS[0])
    needed = _needed()
    now = timezone.now().isoformat()
    batch = []
    for name, labels in sorted(needed.items()):
        if name in FIXED:
            continue
        extra = {lab: "volatile" if lab == "scope" else "x" for lab in labels & SERIES_LABELS}
        sample = {"ts": now, "node": "gpu01", "metric": name.removeprefix("rackpilot_"), "value": 1.0}
        if "card" in labels:
            sample["card"] = H100_UUIDS[0]
        batch.append({**sample, "labels": extra} if extra else sample)
    report = services.telemetry_ingest_samples(batch)
    assert report.stored == len(batch)
    # when: /metrics is scraped as Prometheus would
    _t, key = api_token_create(user=admin_user, name="prometheus", write_enabled=False)
    resp = Client().get("/metrics", HTTP_AUTHORIZATION=f"Token {key}")
    assert resp.status_code == 200
    exported: dict[str, set[str]] = {}
    for s in parse_prometheus_text(resp.content.decode()):
        exported.setdefault(s.name, set()).update(s.labels)
    # then: every metric the dashboards query is exported, with every label they use
    missing = {n: sorted(labs - exported.get(n, set())) for n, labs in needed.items() if n not in exported}
    assert missing == {}
    short = {n: sorted(labs - exported[n]) for n, labs in needed.items() if labs - exported[n]}
    assert short == {}


# -- a real Prometheus ----------------------------------------------------------------------------
PROMETHEUS = shutil.which("prometheus") or (
    "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None
)


def _free_port(lo: int = 9190, hi: int = 9199) -> int:
    for port in range(lo, hi + 1):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {lo}-{hi}")


def _query(port: int, promql: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - loopback
        body = json.loads(resp.read())
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def test_a_real_prometheus_scrapes_metrics_with_the_example_config(
    transactional_db: Any, live_server: Any, admin_user: Any, tmp_path: Path
) -> None:
    if PROMETHEUS is None:
        if in_ci():
            pytest.fail("CI=true and prometheus is not installed (apt-get install -y prometheus)")
        pytest.skip("prometheus is not installed (apt-get install -y prometheus)")
    from inventory.models import ChassisModel, Node

    # given: an H100 node's own `--format=csv` output ingested, and a read-only token
    chassis = ChassisModel.objects.create(manufacturer="Dell", name="XE9680", base_power_w=300)
    Node.objects.create(hostname="gpu07", chassis=chassis)
    report = services.telemetry_ingest_text(
        "nvidia-smi-csv", fixture_text("nvidia_smi_535_h100_header.csv"), node_hostname="gpu07"
    )
    assert report.stored > 0
    _t, key = api_token_create(user=admin_user, name="prometheus", write_enabled=False)
    (tmp_path / "rackpilot.token").write_text(key)
    # the example scrape job from docs/, pointed at the live server
    config = yaml.safe_load((DOCS / "prometheus" / "prometheus.yml").read_text())
    job = config["scrape_configs"][0]
    job["scheme"] = "http"
    job["scrape_interval"] = "1s"
    job["authorization"]["credentials_file"] = str(tmp_path / "rackpilot.token")
    job["static_configs"] = [{"targets": [live_server.url.removeprefix("http://")]}]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = _free_port()
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        # when: it has scraped (poll its HTTP API; up==1 once a scrape succeeded)
        deadline = time.monotonic() + 60
        series: list[dict[str, Any]] = []
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                series = _query(port, 'rackpilot_power_w{node="gpu07"}')
            except OSError:
                series = []
            if len(series) == 2:
                break
            time.sleep(0.5)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        # then: the portal's series come back through PromQL with their labels and values
        got = sorted((s["metric"]["card"], s["value"][1]) for s in series)
        assert got == [("GPU-1b2c3d4e-5f60-4718-8293-a4b5c6d7e8f9", "71.12"), (H100_UUIDS[0], "512.3")]
        assert {s["metric"]["job"] for s in series} == {"rackpilot"}
        assert _query(port, "rackpilot_up")[0]["value"][1] == "1"
        up = _query(port, 'up{job="rackpilot"}')
        assert [u["value"][1] for u in up] == ["1"]
    finally:
        proc.terminate()
        proc.wait(timeout=20)
