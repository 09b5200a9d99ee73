"""The remote-write ingest endpoint: tokens, status codes, the mapping, and a real Prometheus
(scraping a real node_exporter and recorded dcgm-exporter text) remote-writing to a live portal."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, override_settings

from monitoring import services
from monitoring.models import LatestValue, PrometheusSource, Series
from monitoring.parsers import parse_node_exporter
from monitoring.parsers.prom_mapping import default_mapping
from portal.services import api_token_create
from tests.monitoring.conftest import H100_UUIDS, Inv
from tests.monitoring.promlab import prom_lab
from tests.parsers.test_remote_write import _field, _label, _literal_snappy, _sample

URL = "/api/monitoring/remote-write/"
HEADERS = {
    "content_type": "application/x-protobuf",
    "HTTP_CONTENT_ENCODING": "snappy",
    "HTTP_X_PROMETHEUS_REMOTE_WRITE_VERSION": "0.1.0",
}


def _series(labels: dict[str, str], *points: tuple[float, int]) -> bytes:
    body = b"".join(_field(1, _label(k, v)) for k, v in labels.items())
    return _field(1, body + b"".join(_field(2, _sample(v, ts)) for v, ts in points))


def _body(*series: bytes) -> bytes:
    return _literal_snappy(b"".join(series))


def _now_ms() -> int:
    return int(time.time() * 1000)


def _post(body: bytes, key: str | None, **extra: Any) -> Any:
    auth = {"HTTP_AUTHORIZATION": f"Token {key}"} if key else {}
    return Client().post(URL, body, **{**HEADERS, **auth, **extra})


def _temp(host: str, uuid: str, value: float, ts: int, name: str = "DCGM_FI_DEV_GPU_TEMP") -> bytes:
    labels = {
        "__name__": name,
        "gpu": "0",
        "UUID": uuid,
        "Hostname": host,
        "job": "dcgm",
        "instance": "x:9400",
    }
    return _series(labels, (value, ts))


@pytest.mark.django_db
def test_a_cluster_token_stores_its_nodes_series_and_skips_the_rest(inv: Any) -> None:
    # given: gpu07 in cluster A with a card, gpu08 in cluster B, and A's push token
    a, b = inv.cluster(), inv.cluster()
    gpu07 = inv.node("gpu07", cluster=a)
    card = inv.card(gpu07, gpu_uuid=H100_UUIDS[0])
    inv.node("gpu08", cluster=b)
    _t, key = services.cluster_token_create(cluster=a, user=None)
    ts = _now_ms()
    body = _body(
        _temp("gpu07", H100_UUIDS[0], 58.0, ts),
        _temp("gpu07", H100_UUIDS[0], 59.0, ts + 15000),
        _series(
            {"__name__": "node_network_receive_bytes_total", "device": "eth0", "instance": "gpu07:9100"},
            (1e6, ts),
        ),
        _series(
            {"__name__": "node_network_receive_bytes_total", "device": "lo", "instance": "gpu07:9100"},
            (5.0, ts),
        ),
        _temp("gpu08", H100_UUIDS[1], 40.0, ts),
        _temp("gpu99", H100_UUIDS[1], 40.0, ts),
        _series({"__name__": "up", "instance": "gpu07:9100"}, (1.0, ts)),
    )
    # when
    resp = _post(body, key)
    # then: gpu07's temperature (two points) and its eth0 counter; the rest is named
    assert resp.status_code == 202, resp.content
    report = resp.json()
    assert report["stored"] == 3
    assert report["skipped"] == 2
    assert report["warnings"] == [
        "2 series were not mapped to a node metric (name or node label unknown).",
        "Not in the inventory, skipped: gpu99",
        "This token may not send telemetry for gpu08; skipped.",
    ]
    temp = Series.objects.get(metric="temperature_c")
    assert (temp.node_id, temp.card_id, temp.card_ref, temp.labels) == (gpu07.pk, card.pk, H100_UUIDS[0], "")
    assert LatestValue.objects.get(series=temp).value == 59.0
    net = Series.objects.get(metric="net_rx_bytes_total")
    assert (net.node_id, net.card_id, net.labels) == (gpu07.pk, None, "device=eth0")


@pytest.mark.django_db
def test_the_clusters_mapping_decides_names_labels_and_scale(inv: Any) -> None:
    # given: a site whose dcgm series name the node in `node` and memory in GiB under another name
    c = inv.cluster()
    node = inv.node("gpu07", cluster=c)
    mapping = default_mapping()
    mapping["node_labels"] = ["node"]
    mapping["metrics"]["site_fb_used_gib"] = {"metric": "memory_used_bytes", "scale": 1024**3}
    PrometheusSource.objects.create(cluster=c, base_url="http://127.0.0.1:9", mapping=mapping)
    _t, key = services.cluster_token_create(cluster=c, user=None)
    body = _body(
        _series({"__name__": "site_fb_used_gib", "node": "gpu07", "UUID": H100_UUIDS[0]}, (2.5, _now_ms()))
    )
    resp = _post(body, key)
    assert resp.status_code == 202, resp.content
    s = Series.objects.get()
    assert (s.node_id, s.metric, s.card_ref) == (node.pk, "memory_used_bytes", H100_UUIDS[0])
    assert LatestValue.objects.get(series=s).value == 2.5 * 1024**3


@pytest.mark.django_db
def test_a_node_token_writes_only_its_node(inv: Any) -> None:
    c = inv.cluster()
    gpu07 = inv.node("gpu07", cluster=c)
    inv.node("gpu08", cluster=c)
    _t, key = services.node_token_create(node=gpu07, user=None)
    ts = _now_ms()
    resp = _post(_body(_temp("gpu07", H100_UUIDS[0], 50.0, ts), _temp("gpu08", H100_UUIDS[1], 51.0, ts)), key)
    assert resp.status_code == 202
    assert resp.json()["warnings"] == ["This token may not send telemetry for gpu08; skipped."]
    assert list(Series.objects.values_list("node__hostname", flat=True)) == ["gpu07"]


@pytest.mark.django_db
def test_undecodable_bodies_are_400_and_store_nothing(inv: Any) -> None:
    inv.node("gpu07")
    _t, key = services.cluster_token_create(cluster=inv.cluster(), user=None)
    good = _temp("gpu07", H100_UUIDS[0], 50.0, _now_ms())
    for body, reason in [
        (b"\x05\x08abc", "Cannot decode the remote-write body: snappy block declares 5 bytes, decoded 3"),
        (_literal_snappy(good[:-4]), "Cannot decode the remote-write body: truncated length-delimited field"),
    ]:
        resp = _post(body, key)
        assert resp.status_code == 400
        assert resp.json() == {"detail": reason, "errors": [reason]}
    assert Series.objects.count() == 0


@pytest.mark.django_db
def test_encoding_type_version_and_size_are_checked(inv: Any, admin_user: Any) -> None:
    _t, key = services.cluster_token_create(cluster=inv.cluster(), user=None)
    body = _body(_temp("gpu07", H100_UUIDS[0], 50.0, _now_ms()))
    assert _post(body, key, HTTP_CONTENT_ENCODING="gzip").status_code == 415
    assert _post(body, key, content_type="application/json").status_code == 415
    v2 = "application/x-protobuf;proto=io.prometheus.write.v2.Request"
    assert _post(body, key, content_type=v2).status_code == 415
    with override_settings(PORTAL_TELEMETRY_MAX_BODY_BYTES=len(body) - 1):
        resp = _post(body, key)
    assert resp.status_code == 413
    assert resp.json()["limit"] == len(body) - 1


@pytest.mark.django_db
def test_who_may_remote_write(inv: Any, admin_user: Any) -> None:
    inv.node("gpu07")
    body = _body(_temp("gpu07", H100_UUIDS[0], 50.0, _now_ms()))
    assert _post(body, None).status_code == 401
    assert _post(body, "rpc_" + "0" * 40).status_code == 401
    _t, read_only = api_token_create(user=admin_user, name="ro", write_enabled=False)
    assert _post(body, read_only).status_code == 403
    assert Series.objects.count() == 0
    _t, writer = api_token_create(user=admin_user, name="rw", write_enabled=True)
    assert _post(body, writer).status_code == 202
    assert Series.objects.count() == 1


def test_a_real_prometheus_remote_writes_node_exporter_and_dcgm_series(
    transactional_db: Any, live_server: Any, tmp_path: Path
) -> None:
    # given: gpu07 with its two H100 in a cluster whose push token the Prometheus holds
    inv = Inv()  # not the `inv` fixture: its `db` would keep the rows from the live server
    c = inv.cluster()
    gpu07 = inv.node("gpu07", cluster=c)
    cards = [inv.card(gpu07, gpu_uuid=u) for u in H100_UUIDS]
    _t, key = services.cluster_token_create(cluster=c, user=None)
    (tmp_path / "token").write_text(key)
    # when: it scrapes node_exporter and the dcgm-exporter text, and remote-writes to the portal
    with prom_lab(tmp_path, remote_write_url=f"{live_server.url}{URL}", token_file=tmp_path / "token") as lab:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            have = set(Series.objects.values_list("metric", flat=True))
            if {"temperature_c", "net_rx_bytes_total", "disk_reads_total"} <= have:
                break
            time.sleep(0.5)
        with urllib.request.urlopen(f"http://127.0.0.1:{lab.node_exporter_port}/metrics", timeout=5) as r:
            exported = parse_node_exporter(r.read().decode(), node="gpu07")
    # then: the cards' temperatures as dcgm-exporter gave them, on the inventory cards
    temps = {
        s.card_id: LatestValue.objects.get(series=s).value
        for s in Series.objects.filter(metric="temperature_c")
    }
    assert temps == {cards[0].pk: 58.0, cards[1].pk: 41.0}
    power = Series.objects.get(metric="power_w", card=cards[0])
    assert LatestValue.objects.get(series=power).value == 612.345
    # and node_exporter's real devices (not loopback or virtual ones) as node series of gpu07
    devices = {s.label("device") for s in exported.samples if s.metric == "net_rx_bytes_total"}
    stored = set(
        Series.objects.filter(metric="net_rx_bytes_total", node=gpu07).values_list("labels", flat=True)
    )
    assert stored == {f"device={d}" for d in devices}
    assert Series.objects.exclude(node=gpu07).count() == 0


@pytest.mark.django_db
def test_the_cluster_token_command_prints_a_key_that_remote_writes(inv: Any) -> None:
    import io

    from django.core.management import CommandError, call_command

    c = inv.cluster()
    inv.node("gpu07", cluster=c)
    out = io.StringIO()
    call_command("telemetry_cluster_token", c.name, stdout=out)
    key = out.getvalue().strip()
    assert key.startswith("rpc_") and len(key) == 44
    assert _post(_body(_temp("gpu07", H100_UUIDS[0], 50.0, _now_ms())), key).json()["stored"] == 1
    with pytest.raises(CommandError, match="no cluster 'nope' in the inventory"):
        call_command("telemetry_cluster_token", "nope")
