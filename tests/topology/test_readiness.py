"""Readiness rules, the evaluate/set services through the API, the summary badge on lists and pages."""

from __future__ import annotations

from typing import Any

import pytest

from inventory.models import ReadinessCheck
from inventory.readiness import (
    CardFacts,
    readiness_evaluate,
    rule_cards_enumerated,
    rule_cooling,
    rule_link_width,
)
from portal.models import AuditEntry

pytestmark = pytest.mark.django_db

P150A = CardFacts("A", "p150a", 16, "limited", "active", "0000:01:00.0")
P150B = CardFacts("B", "p150b", 16, "high", "passive", "0000:02:00.0")


def test_x1_riser_is_allowed_but_flagged_bandwidth_limited() -> None:
    v = rule_link_width(1, [P150A])
    assert v.status == "warn" and v.detail.startswith("Bandwidth-limited: x1 risers")
    assert rule_link_width(16, [P150A]).status == "pass"
    assert rule_link_width(None, [P150A]).status == "unknown"


def test_p150b_in_a_limited_airflow_chassis_is_a_warning() -> None:
    assert rule_cooling("limited", [P150A]).status == "pass"
    v = rule_cooling("limited", [P150A, P150B])
    assert v.status == "warn" and "B (p150b needs High airflow / datacenter)" in v.detail
    assert rule_cooling("high", [P150B]).status == "pass"
    liquid = CardFacts("L", "x", 16, "liquid", "liquid")
    assert rule_cooling("high", [liquid]).status == "fail"


def test_cards_enumerated_against_the_inventory() -> None:
    assert rule_cards_enumerated([P150A, P150B], None).status == "unknown"
    assert rule_cards_enumerated([P150A, P150B], ["00000000:01:00.0", "0000:02:00.0"]).status == "pass"
    missing = rule_cards_enumerated([P150A, P150B], ["0000:01:00.0"])
    assert missing.status == "fail" and missing.detail == "1 of 2 cards not enumerated: B (0000:02:00.0)."
    extra = rule_cards_enumerated([P150A], ["0000:01:00.0", "GPU-deadbeef-0000"])
    assert extra.status == "warn" and extra.detail.endswith("GPU-deadbeef-0000.")


def mining_node(build: Any, card_model: Any = None) -> Any:
    node = build.node(chassis=build.chassis(airflow="limited", pcie_lanes_per_slot=1, card_slots=4))
    build.card(
        node=node,
        card_model=card_model or build.card_model(min_airflow="high"),
        slot="A",
        pci_bus_id="0000:01:00.0",
    )
    return node


def test_evaluate_writes_auto_rows_and_only_changes_when_needed(build: Any) -> None:
    node = mining_node(build)
    readiness_evaluate(node)
    rows = {r.key: r.status for r in ReadinessCheck.objects.filter(node=node)}
    assert rows == {
        "cards_enumerated": "unknown",
        "pcie_link_width": "warn",
        "cooling": "warn",
        "card_lifecycle": "pass",
    }
    audits = AuditEntry.objects.count()
    readiness_evaluate(node)
    assert AuditEntry.objects.count() == audits  # unchanged rows are not rewritten
    readiness_evaluate(node, seen=["0000:01:00.0"])
    assert ReadinessCheck.objects.get(node=node, key="cards_enumerated").status == "pass"
    readiness_evaluate(node)  # no device list this time: the last enumeration verdict stays
    assert ReadinessCheck.objects.get(node=node, key="cards_enumerated").status == "pass"


def test_aer_is_not_required_without_tenstorrent_cards(build: Any) -> None:
    node = mining_node(build, build.card_model(vendor="NVIDIA"))
    readiness_evaluate(node)
    aer = ReadinessCheck.objects.get(node=node, key="pcie_aer_os_first")
    assert (aer.status, aer.source) == ("pass", "auto")


def test_api_sets_manual_checks_and_refuses_derived_ones(api: Any, admin_user: Any, build: Any) -> None:
    node = build.node()
    res = api.post(
        f"/api/inventory/nodes/{node.pk}/readiness/",
        [
            {"key": "above_4g_decoding", "status": "pass"},
            {"key": "driver_version", "status": "pass", "detail": "tt-kmd 1.29"},
        ],
        format="json",
    )
    assert res.status_code == 200
    body = {c["key"]: c for c in res.json()["checks"]}
    assert body["driver_version"]["detail"] == "tt-kmd 1.29" and body["driver_version"]["source"] == "api"
    assert body["above_4g_decoding"]["updated_by"] == admin_user.username
    assert res.json()["status"] == "unknown"  # the other checks are not recorded yet
    refused = api.post(
        f"/api/inventory/nodes/{node.pk}/readiness/",
        [{"key": "resizable_bar", "status": "pass"}, {"key": "cooling", "status": "pass"}],
        format="json",
    )
    assert refused.status_code == 400 and "key" in refused.json()
    assert not ReadinessCheck.objects.filter(node=node, key="resizable_bar").exists()  # all or nothing
    no_version = api.post(
        f"/api/inventory/nodes/{node.pk}/readiness/",
        {"key": "firmware_version", "status": "pass"},
        format="json",
    )
    assert no_version.status_code == 400 and no_version.json() == {
        "detail": ["Record the version in the detail."]
    }


def test_api_evaluate_with_seen_devices(api: Any, build: Any) -> None:
    node = mining_node(build)
    res = api.post(f"/api/inventory/nodes/{node.pk}/readiness/evaluate/", {"seen": []}, format="json")
    checks = {c["key"]: c for c in res.json()["checks"]}
    assert checks["cards_enumerated"]["status"] == "fail"
    assert res.json()["status"] == "fail"
    bad = api.post(
        f"/api/inventory/nodes/{node.pk}/readiness/evaluate/", {"seen": "0000:01:00.0"}, format="json"
    )
    assert bad.status_code == 400


def test_researcher_reads_readiness_but_cannot_set_it(api_as: Any, researcher_user: Any, build: Any) -> None:
    node = build.node()
    client = api_as(researcher_user)
    assert client.get(f"/api/inventory/nodes/{node.pk}/readiness/").status_code == 200
    res = client.post(
        f"/api/inventory/nodes/{node.pk}/readiness/",
        {"key": "resizable_bar", "status": "pass"},
        format="json",
    )
    assert res.status_code == 403
    assert not ReadinessCheck.objects.filter(node=node).exists()


def test_failing_node_is_flagged_on_the_node_list_and_page(
    client: Any, admin_user: Any, build: Any, django_assert_num_queries: Any
) -> None:
    bad = mining_node(build)
    readiness_evaluate(bad, seen=[])
    client.force_login(admin_user)
    html = client.get("/inventory/nodes/").content.decode()
    row = html[html.index(f'id="row-{bad.pk}"') :]
    assert 'class="badge readiness-fail"' in row[: row.index("</tr>")]
    page = client.get(f"/inventory/nodes/{bad.pk}/").content.decode()
    assert "readiness-fail" in page
    readiness = client.get(f"/inventory/nodes/{bad.pk}/readiness/")
    assert readiness.status_code == 200 and "1 of 1 cards not enumerated" in readiness.content.decode()
    # the summary costs no query per row
    for _ in range(5):
        build.node()
    client.get("/inventory/nodes/")
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as few:
        client.get("/inventory/nodes/")
    for _ in range(10):
        mining_node(build)
    with CaptureQueriesContext(connection) as many:
        client.get("/inventory/nodes/")
    assert len(many) == len(few)


def test_readiness_page_sets_a_manual_check(client: Any, admin_user: Any, build: Any) -> None:
    node = build.node()
    client.force_login(admin_user)
    res = client.post(
        f"/inventory/nodes/{node.pk}/readiness/",
        {"key": "resizable_bar", "status": "fail", "detail": "BIOS too old"},
    )
    assert res.status_code == 302
    row = ReadinessCheck.objects.get(node=node, key="resizable_bar")
    assert (row.status, row.source, row.updated_by) == ("fail", "manual", admin_user)
