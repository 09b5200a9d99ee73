from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from monitoring import services
from monitoring.models import LatestValue, Sample, Series
from portal.services import api_token_create
from tests.monitoring.conftest import H100_UUIDS, fixture_text

pytestmark = pytest.mark.django_db
URL = "/api/monitoring/ingest/"


def _node_client(inv: Any, admin_user: Any, hostname: str = "gpu01") -> tuple[APIClient, Any]:
    node = inv.node(hostname)
    _token, key = services.node_token_create(node=node, user=admin_user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client, node


def test_node_token_pushes_raw_tool_output_and_gets_202(inv: Any, admin_user: Any) -> None:
    client, _node = _node_client(inv, admin_user, "gpu07")
    body = fixture_text("nvidia_smi_h100_8gpu_nounits.csv")
    resp = client.post(f"{URL}?format=nvidia-smi-csv&node=gpu07", data=body, content_type="text/plain")
    assert resp.status_code == 202, resp.content
    assert resp.json()["stored"] == 192
    assert Sample.objects.count() == 192


def test_nvidia_smi_csv_with_a_header_of_own_fields_stores_them_and_warns_of_the_rest(
    inv: Any, admin_user: Any
) -> None:
    # given: a cron line's own `--query-gpu=… --format=csv` (driver 470, units, two unknown fields)
    client, _node = _node_client(inv, admin_user, "ws01")
    body = fixture_text("nvidia_smi_470_header_units.csv")
    # when
    resp = client.post(f"{URL}?format=nvidia-smi-csv&node=ws01", data=body, content_type="text/plain")
    # then: 202, every known column stored (2 cards x 19 samples), the unknown ones named
    assert resp.status_code == 202, resp.content
    data = resp.json()
    assert data["stored"] == 38
    assert data["problems"] == []
    assert data["warnings"] == [
        "Field persistence_mode is not one the portal reads; its column was ignored.",
        "Field compute_mode is not one the portal reads; its column was ignored.",
    ]
    assert Sample.objects.count() == 38
    power = LatestValue.objects.get(series__metric="power_w", series__card_ref="0000:02:00.0")
    assert power.value == 243.51


def test_nvidia_smi_csv_without_header_and_own_fields_is_refused_with_the_reason(
    inv: Any, admin_user: Any
) -> None:
    client, _node = _node_client(inv, admin_user, "ws01")
    resp = client.post(
        f"{URL}?format=nvidia-smi-csv&node=ws01", data="0, 41, 68.40\n", content_type="text/plain"
    )
    assert resp.status_code == 400
    assert resp.json()["detail"] == (
        "Cannot parse nvidia-smi-csv output: line 1: not nvidia-smi CSV output: expected 20 columns, "
        "got 3 (no header line: the default field list is assumed)"
    )
    assert Sample.objects.count() == 0


def test_node_token_defaults_to_its_own_node_and_refuses_another(inv: Any, admin_user: Any) -> None:
    client, _node = _node_client(inv, admin_user)
    inv.node("other")
    ok = client.post(
        f"{URL}?format=ipmitool-sdr", data=fixture_text("ipmitool_sdr_r720.txt"), content_type="text/plain"
    )
    assert ok.status_code == 202
    stored = Sample.objects.count()
    refused = client.post(
        f"{URL}?format=ipmitool-sdr&node=other",
        data=fixture_text("ipmitool_sdr_r720.txt"),
        content_type="text/plain",
    )
    assert refused.status_code == 400
    assert refused.json()["detail"] == "This token may only send telemetry for gpu01."
    now = timezone.now().isoformat()
    refused_json = client.post(
        URL, data=[{"ts": now, "node": "other", "metric": "node_power_w", "value": 1}], format="json"
    )
    assert refused_json.status_code == 400
    assert Sample.objects.count() == stored


def test_json_batch_is_accepted_with_count(inv: Any, admin_user: Any) -> None:
    client, _node = _node_client(inv, admin_user)
    now = timezone.now()
    body = [
        {
            "ts": (now - dt.timedelta(seconds=i)).isoformat(),
            "node": "gpu01",
            "card": H100_UUIDS[0],
            "metric": "power_w",
            "value": 300.0 + i,
        }
        for i in range(10)
    ]
    resp = client.post(URL, data=body, format="json")
    assert resp.status_code == 202
    assert resp.json()["stored"] == 10
    assert LatestValue.objects.get().value == 300.0


def test_malformed_bodies_get_400_with_the_reason_and_store_nothing(inv: Any, admin_user: Any) -> None:
    client, _node = _node_client(inv, admin_user)
    cases = [
        (f"{URL}?format=tt-smi", "{broken", "text/plain", "Cannot parse tt-smi output"),
        (f"{URL}?format=nope", "x", "text/plain", "Unknown format 'nope'"),
        (URL, "[{", "application/json", "Malformed JSON"),
        (URL, '{"a": 1}', "application/json", "Expected a JSON list"),
        (URL, json.dumps([{"metric": "power_w", "value": "x"}]), "application/json", "[0] 'value' must be"),
    ]
    for url, body, ctype, reason in cases:
        resp = client.post(url, data=body, content_type=ctype)
        assert resp.status_code == 400, (url, resp.content)
        assert reason in resp.json()["detail"], resp.json()
    assert Sample.objects.count() == 0
    assert Series.objects.count() == 0


def test_ingest_refuses_anonymous_read_only_tokens_and_researchers(
    inv: Any, admin_user: Any, researcher_user: Any
) -> None:
    inv.node("gpu01")
    body = [{"node": "gpu01", "metric": "node_power_w", "value": 1}]
    assert APIClient().post(URL, data=body, format="json").status_code == 401
    _t, key = api_token_create(user=admin_user, name="ro", write_enabled=False)
    ro = APIClient()
    ro.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert ro.post(URL, data=body, format="json").status_code == 403
    researcher = APIClient()
    researcher.force_authenticate(researcher_user)
    assert researcher.post(URL, data=body, format="json").status_code == 403
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Token rpn_0000")
    assert bad.post(URL, data=body, format="json").status_code == 401
    assert Sample.objects.count() == 0


def test_admin_user_token_may_push_any_node(inv: Any, api: APIClient) -> None:
    inv.node("gpu01")
    resp = api.post(URL, data=[{"node": "gpu01", "metric": "node_power_w", "value": 1}], format="json")
    assert resp.status_code == 202


def test_series_endpoint_picks_resolution_and_buckets(inv: Any, api: APIClient) -> None:
    # given 10 minutes of 10-second samples for one card
    node = inv.node("gpu01")
    card = inv.card(node, gpu_uuid=H100_UUIDS[0])
    end = timezone.now().replace(second=0, microsecond=0)
    start = end - dt.timedelta(minutes=10)
    services.telemetry_ingest_samples(
        [
            {
                "ts": (start + dt.timedelta(seconds=10 * i)).isoformat(),
                "node": "gpu01",
                "card": H100_UUIDS[0],
                "metric": "temperature_c",
                "value": float(i % 6),
            }
            for i in range(60)
        ]
    )
    # when asked at a 60 s step over raw data (no rollup yet) it reads raw and buckets by minute
    resp = api.get(
        "/api/monitoring/series/",
        {
            "card": card.pk,
            "metric": "temperature_c",
            "from": start.isoformat(),
            "to": end.isoformat(),
            "step": 10,
        },
    )
    assert resp.status_code == 200, resp.content
    data = resp.json()
    assert data["resolution"] == "raw"
    assert len(data["series"][0]["points"]) == 60
    # and after the 1-minute rollup, a 60 s step reads the rollup: 10 buckets of min 0 / avg 2.5 / max 5
    services.telemetry_rollup(start=start, end=end)
    resp = api.get(
        "/api/monitoring/series/",
        {
            "card": H100_UUIDS[0],
            "metric": "temperature_c",
            "from": start.isoformat(),
            "to": end.isoformat(),
            "step": 60,
        },
    )
    data = resp.json()
    assert data["resolution"] == "1m"
    points = data["series"][0]["points"]
    assert len(points) == 10
    assert points[0] == [int(start.timestamp()), 0.0, 2.5, 5.0]


def test_a_relative_from_counts_back_from_the_same_now_as_the_default_to(inv: Any, api: APIClient) -> None:
    # a Prometheus range query steps from "from": were "now-5m" read from a later clock than the
    # default "to", the grid would stop a second short and miss the newest scrape (a flaky chart)
    node = inv.node("gpu01")
    resp = api.get("/api/monitoring/series/", {"node": node.pk, "metric": "temperature_c", "from": "now-5m"})
    assert resp.status_code == 200, resp.content
    body = resp.json()
    span = dt.datetime.fromisoformat(body["to"]) - dt.datetime.fromisoformat(body["from"])
    assert span == dt.timedelta(minutes=5)


def test_series_endpoint_errors_are_400(api: APIClient) -> None:
    resp = api.get("/api/monitoring/series/", {"metric": "temperature_c", "card": "1", "from": "x"})
    assert resp.status_code == 400
    assert resp.json()["detail"].startswith("not a time")
    resp = api.get(
        "/api/monitoring/series/", {"metric": "temperature_c", "card": "1", "from": "now-30d", "step": 1}
    )
    assert resp.status_code == 400
    assert "points" in resp.json()["detail"]


def test_latest_endpoint_and_metrics_export(inv: Any, api: APIClient, admin_user: Any) -> None:
    inv.node("gpu01")
    services.telemetry_ingest_samples(
        [
            {"node": "gpu01", "card": H100_UUIDS[0], "metric": "temperature_c", "value": 41.5},
            {"node": "gpu01", "metric": "temperature_c", "value": 22.0, "labels": {"sensor": "Inlet Temp"}},
        ]
    )
    rows = api.get("/api/monitoring/latest/", {"node": "gpu01"}).json()
    assert sorted(r["value"] for r in rows) == [22.0, 41.5]
    _t, key = api_token_create(user=admin_user, name="grafana", write_enabled=False)
    resp = Client().get("/metrics", HTTP_AUTHORIZATION=f"Token {key}")
    assert resp.status_code == 200
    text = resp.content.decode()
    assert "rackpilot_up 1\n" in text
    assert f'rackpilot_temperature_c{{node="gpu01",card="{H100_UUIDS[0]}"}} 41.5\n' in text
    assert 'rackpilot_temperature_c{node="gpu01",sensor="Inlet Temp"} 22.0\n' in text
    assert Client().get("/metrics").status_code == 401


def test_power_budgets_show_measured_draw_beside_the_nameplate(inv: Any, api: APIClient) -> None:
    from django.utils import timezone

    from inventory.models import PowerLead

    # given a rig: a 1600 W PSU feeding one 300 W card over a lead, and the host base load
    node = inv.node("rig01")
    card = inv.card(node, pci_bus_id="0000:01:00.0", tdp_w=300)
    psu = inv.psu(node, 1600)
    PowerLead.objects.create(psu=psu, name="8pin-1", kind="pcie-8pin", card=card)
    # when the card reports 240 W now (and the BMC nothing)
    services.telemetry_ingest_samples(
        [
            {
                "ts": timezone.now().isoformat(),
                "node": "rig01",
                "card": "0000:01:00.0",
                "metric": "power_w",
                "value": 240,
            }
        ]
    )
    # then the PSU budget keeps its nameplate load and shows the measured 240 W for the card line
    budget = api.get(f"/api/inventory/psus/{psu.pk}/budget/").json()
    card_line = next(line for line in budget["loads"] if line["kind"] == "card")
    assert card_line["measured_w"] == 240
    assert budget["measured_w"] == 240  # the host line has no measurement (no BMC, no lead-less cards)
