"""A cluster's Prometheus source: charts (the series endpoint) and a job's energy read through PromQL
from a real Prometheus (Debian's `prometheus`, dcgm-exporter history backfilled with promtool, a real
node_exporter scraped live), its authentication, and clear errors when it is down."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from monitoring.models import PrometheusSource
from monitoring.services import job_energy_compute
from monitoring.services.energy import job_energy_compute_pending
from tests.monitoring.conftest import H100_UUIDS, Inv
from tests.monitoring.promlab import PromLab, prom_lab
from tests.net import free_port

pytestmark = pytest.mark.django_db
# history: two hours ending an hour ago, on 15 s steps (epoch multiples: query steps land on samples)
END = timezone.now().replace(microsecond=0) - dt.timedelta(hours=1)
END -= dt.timedelta(seconds=END.timestamp() % 60)
START = END - dt.timedelta(hours=2)
JUMP = START + dt.timedelta(hours=1)  # card 0 goes from 400 W to 600 W here
# user "rp", password "s3cret" (bcrypt, as Prometheus's web config wants it)
BASIC = ("rp", "$2b$12$if4L.ahbxTXXWIn59uE/Eu3GOJBdWCvJvrdDCFupxXqvkI5BG50mS")


def _history() -> str:
    lines = ["# TYPE DCGM_FI_DEV_POWER_USAGE gauge"]
    for gpu, uuid in enumerate(H100_UUIDS):
        labels = f'gpu="{gpu}",UUID="{uuid}",Hostname="gpu07",modelName="NVIDIA H100 80GB HBM3"'
        t = START
        while t <= END:
            watts = (400 if t < JUMP else 600) if gpu == 0 else 100
            lines.append(f"DCGM_FI_DEV_POWER_USAGE{{{labels}}} {watts} {int(t.timestamp())}")
            t += dt.timedelta(seconds=15)
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PromLab]:
    with prom_lab(tmp_path_factory.mktemp("prom"), history=_history()) as lab:
        lab.wait_for('up{job="node"} == 1')
        lab.wait_for('DCGM_FI_DEV_GPU_TEMP{job="dcgm"}', count=2)
        yield lab


@pytest.fixture
def gpu07(lab: PromLab, admin_user: Any) -> Any:
    inv = Inv()
    cluster = inv.cluster()
    node = inv.node("gpu07", cluster=cluster)
    node.cards_made = [inv.card(node, gpu_uuid=u) for u in H100_UUIDS]
    node.source = PrometheusSource.objects.create(cluster=cluster, base_url=lab.url)
    return node


def _client(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _series(user: Any, **params: Any) -> Any:
    return _client(user).get("/api/monitoring/series/", params)


def test_a_cards_chart_reads_min_avg_max_per_step_through_promql(gpu07: Any, admin_user: Any) -> None:
    card0 = gpu07.cards_made[0]
    frm, to = JUMP - dt.timedelta(minutes=3), JUMP + dt.timedelta(minutes=3)
    resp = _series(
        admin_user,
        card=card0.pk,
        metric="power_w",
        step=60,
        **{"from": frm.isoformat(), "to": to.isoformat()},
    )
    assert resp.status_code == 200, resp.content
    body = resp.json()
    assert (body["resolution"], body["step"]) == ("prometheus", 60)
    [series] = body["series"]
    assert (series["id"], series["node"], series["card"], series["card_ref"]) == (
        None,
        "gpu07",
        card0.pk,
        H100_UUIDS[0],
    )
    by_time = {int(p[0]): p[1:] for p in series["points"]}
    assert by_time[int((JUMP - dt.timedelta(minutes=1)).timestamp())] == [400.0, 400.0, 400.0]
    assert by_time[int((JUMP + dt.timedelta(minutes=2)).timestamp())] == [600.0, 600.0, 600.0]
    # the step ending at the jump holds the minute of 400 W before it and the first 600 W sample
    low, avg, high = by_time[int(JUMP.timestamp())]
    assert (low, high) == (400.0, 600.0) and 400.0 < avg < 600.0


def test_a_nodes_charts_name_its_cards_and_its_devices(gpu07: Any, admin_user: Any) -> None:
    # the live scrape: dcgm-exporter's temperatures per card, node_exporter's interfaces per device
    resp = _series(admin_user, node=gpu07.pk, metric="temperature_c", step=1, **{"from": "now-5m"})
    assert resp.status_code == 200, resp.content
    latest = {s["card"]: s["points"][-1][2] for s in resp.json()["series"]}
    assert latest == {gpu07.cards_made[0].pk: 58.0, gpu07.cards_made[1].pk: 41.0}
    # labelled as remote write stores them: dcgm-exporter's device, instance and job are not the series'
    assert [s["labels"] for s in resp.json()["series"]] == ["", ""]
    resp = _series(admin_user, node=gpu07.hostname, metric="net_rx_bytes_total", step=1, **{"from": "now-5m"})
    devices = [s["labels"] for s in resp.json()["series"]]
    assert devices and all(d.startswith("device=") and d != "device=lo" for d in devices)
    assert {s["card"] for s in resp.json()["series"]} == {None}


def test_latest_values_come_from_an_instant_query(gpu07: Any, admin_user: Any) -> None:
    card0, card1 = gpu07.cards_made
    resp = _client(admin_user).get("/api/monitoring/latest/", {"card": card0.pk, "metric": "temperature_c"})
    assert resp.status_code == 200, resp.content
    [row] = resp.json()
    assert (row["series"], row["node"], row["card"], row["metric"], row["value"]) == (
        None,
        "gpu07",
        card0.pk,
        "temperature_c",
        58.0,
    )
    # the whole node: every mapped series, in the portal's units (MiB -> bytes)
    rows = _client(admin_user).get("/api/monitoring/latest/", {"node": "gpu07"}).json()
    memory = {r["card"]: r["value"] for r in rows if r["metric"] == "memory_used_bytes"}
    assert memory[card1.pk] == 3 * 1024 * 1024  # DCGM_FI_DEV_FB_USED 3 (MiB) in the recorded text
    assert {r["metric"] for r in rows} >= {"temperature_c", "power_w", "net_rx_bytes_total"}


def test_the_step_grows_to_keep_the_answer_under_the_point_limit(gpu07: Any, admin_user: Any) -> None:
    frm = END - dt.timedelta(days=30)
    resp = _series(
        admin_user,
        card=gpu07.cards_made[1].pk,
        metric="power_w",
        step=1,
        **{"from": frm.isoformat(), "to": END.isoformat()},
    )
    assert resp.status_code == 200, resp.content
    assert resp.json()["step"] == 236  # ceil(30 d / 11,000 points)
    # a point for every step whose window [t - 236 s, t] holds some of the 2 h of history
    steps = [frm + dt.timedelta(seconds=236 * k) for k in range(11_000)]
    expected = [
        int(t.timestamp()) for t in steps if START <= t <= END + dt.timedelta(seconds=236) and t <= END
    ]
    points = resp.json()["series"][0]["points"]
    assert [int(p[0]) for p in points] == expected
    assert {p[2] for p in points} == {100.0}


def test_a_jobs_energy_is_integrated_from_promql(gpu07: Any, admin_user: Any) -> None:
    from jobs.models import Job

    start, end = JUMP - dt.timedelta(minutes=5), JUMP + dt.timedelta(minutes=5)
    job = Job.objects.create(
        cluster=gpu07.cluster, job_id=4242, user="alice", owner=admin_user, account="ml", state="COMPLETED",
        nodes="gpu07", node_names=",gpu07,", node_count=1, gpus=2, start_time=start, end_time=end,
    )  # fmt: skip
    energy = job_energy_compute(job)
    # card 0: 400 W for 300 s, 600 W for 300 s, the 15 s between the two samples around the jump
    # averaged (trapezoid); card 1: 100 W for 600 s; the host: the chassis' 300 W base load
    card_j = 400 * 285 + 500 * 15 + 600 * 300 + 100 * 600
    assert energy.card_kwh == pytest.approx(card_j / 3.6e6, rel=1e-9)
    assert energy.host_kwh == pytest.approx(300 * 600 / 3.6e6, rel=1e-9)
    assert energy.coverage_pct == pytest.approx(100.0)
    assert energy.details["source"] == "prometheus"
    assert energy.details["nodes"][0]["card_series"] == 2


def test_a_server_that_is_down_is_a_503_with_the_reason_and_no_energy(gpu07: Any, admin_user: Any) -> None:
    from jobs.models import Job

    PrometheusSource.objects.filter(pk=gpu07.source.pk).update(
        base_url=f"http://127.0.0.1:{free_port()}", timeout_s=2
    )
    resp = _series(admin_user, card=gpu07.cards_made[0].pk, metric="power_w", **{"from": "now-1h"})
    assert resp.status_code == 503
    assert resp.json()["detail"].startswith("The cluster's Prometheus source cannot be reached: ")
    assert "Connection refused" in resp.json()["detail"]
    Job.objects.create(
        cluster=gpu07.cluster, job_id=4243, user="alice", owner=admin_user, state="COMPLETED", nodes="gpu07",
        node_names=",gpu07,", node_count=1, gpus=2, start_time=START, end_time=END,
    )  # fmt: skip
    assert job_energy_compute_pending() == 0  # tried again on the next run, nothing half-computed
    assert not Job.objects.filter(energy__isnull=False).exists()


def test_an_answer_that_is_not_the_query_api_is_a_502(gpu07: Any, admin_user: Any, lab: PromLab) -> None:
    # node_exporter answers HTTP, but not /api/v1/query_range
    PrometheusSource.objects.filter(pk=gpu07.source.pk).update(
        base_url=f"http://127.0.0.1:{lab.node_exporter_port}"
    )
    resp = _series(admin_user, node=gpu07.pk, metric="power_w")
    assert resp.status_code == 502
    assert resp.json()["detail"].startswith("The cluster's Prometheus source answered an error: ")


def test_a_source_without_a_mapping_for_the_metric_is_a_400(gpu07: Any, admin_user: Any) -> None:
    resp = _series(admin_user, node=gpu07.pk, metric="fan_rpm")
    assert resp.status_code == 400
    assert resp.json() == {"detail": "The Prometheus mapping of this cluster gives no series for fan_rpm."}


def test_basic_auth_against_a_prometheus_that_requires_it(tmp_path: Path, admin_user: Any) -> None:
    inv = Inv()
    cluster = inv.cluster()
    node = inv.node("gpu07", cluster=cluster)
    card = inv.card(node, gpu_uuid=H100_UUIDS[1])
    with prom_lab(tmp_path, history=_history(), scrape=False, basic_auth=BASIC) as lab:
        source = PrometheusSource.objects.create(
            cluster=cluster, base_url=lab.url, auth="basic", username="rp", secret="wrong"
        )
        params = {
            "card": card.pk,
            "metric": "power_w",
            "step": 600,
            "from": START.isoformat(),
            "to": END.isoformat(),
        }
        resp = _series(admin_user, **params)
        assert resp.status_code == 502
        assert "401: the server refused the credentials" in resp.json()["detail"]
        source.secret = "s3cret"
        source.save()
        with connection.cursor() as cur:  # stored encrypted, read back in clear
            cur.execute("SELECT secret FROM monitoring_prometheussource WHERE id = %s", [source.pk])
            assert cur.fetchone()[0].startswith("fernet:")
        resp = _series(admin_user, **params)
        assert resp.status_code == 200, resp.content
        assert {p[2] for p in resp.json()["series"][0]["points"]} == {100.0}


# -- configuration: API and pages -------------------------------------------------------------------
API = "/api/monitoring/prometheus-sources/"


def test_an_admin_configures_a_source_through_the_api_and_the_secret_stays_hidden(api: Any) -> None:
    cluster = Inv().cluster()
    resp = api.post(
        API,
        {
            "cluster": cluster.pk,
            "base_url": "https://prom.example:9090",
            "auth": "bearer",
            "secret": "tok-123",
        },
        format="json",
    )
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert "secret" not in body and body["has_secret"] is True
    assert body["mapping"]["node_labels"] == ["Hostname", "hostname", "instance"]
    assert body["mapping"]["metrics"]["DCGM_FI_DEV_FB_USED"] == {
        "metric": "memory_used_bytes",
        "scale": 1048576.0,
    }
    # a later change without the secret keeps it
    resp = api.patch(f"{API}{body['id']}/", {"timeout_s": 3}, format="json")
    assert resp.status_code == 200
    source = PrometheusSource.objects.get()
    assert (source.secret, source.timeout_s) == ("tok-123", 3)
    from portal.models import AuditEntry

    entry = AuditEntry.objects.filter(action=AuditEntry.Action.CREATE).latest("pk")
    assert entry.after["secret"] == "********"


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"auth": "basic", "secret": "pw"}, "username", "Basic authentication needs a user."),
        ({"auth": "bearer"}, "secret", "This authentication needs a token or password."),
        ({"ca_cert": "not a pem"}, "ca_cert", "Paste the CA certificate in PEM form (-----BEGIN CERTIFICATE-----)."),
        ({"ca_cert": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}, "ca_cert",
         "Paste the CA certificate in PEM form (-----BEGIN CERTIFICATE-----)."),
        ({"mapping": {"node_labels": [], "card_labels": ["UUID"], "metrics": {"x": {"metric": "power_w"}}}},
         "mapping", "node_labels: a non-empty list of label names"),
        ({"mapping": {"node_labels": ["Hostname"], "card_labels": ["UUID"], "metrics": {"DCGM_X": {"metric": "nope"}}}},
         "mapping", "metrics.DCGM_X: 'metric' must be one of the portal's metric names"),
        ({"base_url": "ftp://prom"}, "base_url", "Enter an http:// or https:// URL, without a query."),
    ],
)  # fmt: skip
def test_a_wrong_setting_is_a_400_naming_the_field_and_nothing_is_saved(
    api: Any, change: dict[str, Any], field: str, message: str
) -> None:
    cluster = Inv().cluster()
    resp = api.post(API, {"cluster": cluster.pk, "base_url": "http://prom:9090", **change}, format="json")
    assert resp.status_code == 400
    assert resp.json()[field] == [message]
    assert PrometheusSource.objects.count() == 0


def test_who_sees_and_changes_sources(api_as: Any, operator_user: Any, researcher_user: Any) -> None:
    source = PrometheusSource.objects.create(cluster=Inv().cluster(), base_url="http://prom:9090")
    assert api_as(researcher_user).get(API).status_code == 403
    assert api_as(operator_user).get(API).json()["count"] == 1
    resp = api_as(operator_user).patch(f"{API}{source.pk}/", {"enabled": False}, format="json")
    assert resp.status_code == 403
    assert PrometheusSource.objects.get().enabled is True


def test_the_check_action_asks_the_server(gpu07: Any, admin_user: Any) -> None:
    resp = _client(admin_user).post(f"{API}{gpu07.source.pk}/check/")
    assert resp.status_code == 200
    assert resp.json() == {"reachable": True, "up_series": 2, "error": ""}  # node_exporter and the dcgm text
    PrometheusSource.objects.filter(pk=gpu07.source.pk).update(base_url=f"http://127.0.0.1:{free_port()}")
    resp = _client(admin_user).post(f"{API}{gpu07.source.pk}/check/")
    assert resp.status_code == 200
    body = resp.json()
    assert (body["reachable"], body["up_series"]) == (False, None)
    assert body["error"].startswith("The cluster's Prometheus source cannot be reached: ")


def test_the_pages_list_show_and_edit_a_source(client: Any, admin_user: Any, researcher_user: Any) -> None:
    source = PrometheusSource.objects.create(
        cluster=Inv().cluster(), base_url=f"http://127.0.0.1:{free_port()}", timeout_s=1
    )
    client.force_login(admin_user)
    page = client.get("/monitoring/prometheus-sources/").content.decode()
    assert source.base_url in page
    detail = client.get(f"/monitoring/prometheus-sources/{source.pk}/").content.decode()
    assert "The server cannot be reached:" in detail and "DCGM_FI_DEV_GPU_TEMP" in detail
    form = {"cluster": source.cluster_id, "base_url": "http://prom:9090", "auth": "basic", "username": "rp",
            "secret": "", "timeout_s": "5", "mapping": '{"node_labels": ["host"]}', "enabled": "on"}  # fmt: skip
    resp = client.post(f"/monitoring/prometheus-sources/{source.pk}/edit/", form, HTTP_HX_REQUEST="true")
    assert resp.status_code == 400
    assert "This authentication needs a token or password." in resp.content.decode()
    assert "card_labels: a non-empty list of label names" in resp.content.decode()
    assert PrometheusSource.objects.get().base_url == source.base_url
    client.force_login(researcher_user)
    assert client.get("/monitoring/prometheus-sources/").status_code == 403


def _self_signed(where: Path) -> tuple[Path, Path, str]:
    """A certificate for 127.0.0.1 (and its key), made here; returns the files and the PEM."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rackpilot test prometheus")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    (where / "tls.crt").write_text(pem)
    (where / "tls.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return where / "tls.crt", where / "tls.key", pem


def test_tls_is_verified_against_the_given_ca(tmp_path: Path, admin_user: Any) -> None:
    inv = Inv()
    cluster = inv.cluster()
    card = inv.card(inv.node("gpu07", cluster=cluster), gpu_uuid=H100_UUIDS[1])
    cert, key, pem = _self_signed(tmp_path)
    with prom_lab(tmp_path, history=_history(), scrape=False, tls=(cert, key)) as lab:
        assert lab.url.startswith("https://")
        source = PrometheusSource.objects.create(cluster=cluster, base_url=lab.url)
        params = {
            "card": card.pk,
            "metric": "power_w",
            "step": 600,
            "from": START.isoformat(),
            "to": END.isoformat(),
        }
        # the system's authorities do not know the certificate: refused, and said why
        resp = _series(admin_user, **params)
        assert resp.status_code == 503
        assert "CERTIFICATE_VERIFY_FAILED" in resp.json()["detail"]
        # with its CA given, verified and read
        PrometheusSource.objects.filter(pk=source.pk).update(ca_cert=pem)
        resp = _series(admin_user, **params)
        assert resp.status_code == 200, resp.content
        assert {p[2] for p in resp.json()["series"][0]["points"]} == {100.0}
        # verification off: read without a CA
        PrometheusSource.objects.filter(pk=source.pk).update(ca_cert="", verify_tls=False)
        assert _series(admin_user, **params).status_code == 200
        # a CA stored before it could be checked that does not load: said, never a 500
        PrometheusSource.objects.filter(pk=source.pk).update(ca_cert="-----BEGIN CERTIFICATE-----\nAAAA\n")
        resp = _series(admin_user, **params)
        assert resp.status_code == 503
        assert "the CA certificate cannot be read" in resp.json()["detail"]


def test_a_bearer_token_is_sent_as_the_gateways_in_front_of_thanos_or_mimir_expect() -> None:
    # Prometheus itself takes no bearer tokens: a loopback gateway that checks the header stands in
    import http.server
    import json
    import threading

    from monitoring.promql import PromClient, PromError, PromServer

    seen: list[str] = []

    class Gateway(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            seen.append(self.headers.get("Authorization", ""))
            ok = self.headers.get("Authorization") == "Bearer tok-1"
            body = json.dumps(
                {"status": "success", "data": {"resultType": "vector", "result": []}}
                if ok
                else {"status": "error", "error": "authentication required"}
            ).encode()
            self.send_response(200 if ok else 401)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{port}"
        assert PromClient(PromServer(url, auth="bearer", secret="tok-1")).query("up") == []
        with pytest.raises(PromError) as exc:
            PromClient(PromServer(url, auth="bearer", secret="wrong")).query("up")
        assert (exc.value.kind, exc.value.message) == (
            "bad_answer",
            "401: the server refused the credentials (authentication required)",
        )
        assert seen == ["Bearer tok-1", "Bearer wrong"]
    finally:
        server.shutdown()
        server.server_close()


def test_a_node_named_by_its_fqdn_finds_the_series_of_its_short_name(lab: PromLab, admin_user: Any) -> None:
    import re

    from monitoring.promql import host_regex

    rx = host_regex("gpu07.lab.example", "gpu07", "")
    assert [bool(re.fullmatch(rx, v)) for v in ("gpu07", "gpu07:9100", "gpu07.lab.example", "gpu070", "gpu07xlab")] == [
        True, True, True, False, False,
    ]  # fmt: skip
    inv = Inv()
    cluster = inv.cluster()
    node = inv.node("gpu07.lab.example", cluster=cluster)
    card = inv.card(node, gpu_uuid=H100_UUIDS[0])
    PrometheusSource.objects.create(cluster=cluster, base_url=lab.url)
    rows = (
        _client(admin_user)
        .get("/api/monitoring/latest/", {"node": node.pk, "metric": "temperature_c"})
        .json()
    )
    assert {(r["node"], r["card"], r["value"]) for r in rows} == {
        ("gpu07.lab.example", card.pk, 58.0),
        ("gpu07.lab.example", None, 41.0),
    }
