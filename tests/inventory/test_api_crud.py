"""The generic CRUD suite: every inventory endpoint, fed with per-model data."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.models import AuditEntry


@dataclass
class Case:
    endpoint: str
    make: Callable[[Any], Any]  # builder -> a saved row
    payload: Callable[[Any], dict[str, Any]]  # builder -> a valid create body
    patch: dict[str, Any]
    check: str = ""  # field compared after patch (defaults to first patch key)
    extra: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case("sites", lambda b: b.site(), lambda b: {"name": "Hall C"}, {"description": "cold aisle"}),
    Case(
        "clusters",
        lambda b: b.cluster(),
        lambda b: {"name": "pod-9", "backend": "simulator"},
        {"ssh_host": "login.example"},
    ),
    Case(
        "racks",
        lambda b: b.rack(),
        lambda b: {"name": "R1", "site": b.site().pk, "u_height": 42},
        {"u_height": 48},
    ),
    Case(
        "chassis-models",
        lambda b: b.chassis(),
        lambda b: {"manufacturer": "Bitmain", "name": "S19", "airflow": "limited"},
        {"base_power_w": 80},
    ),
    Case(
        "nodes",
        lambda b: b.node(),
        lambda b: {"hostname": "gpu42", "role": "compute", "cluster": b.cluster().pk},
        {"status": "maintenance"},
    ),
    Case(
        "card-models",
        lambda b: b.card_model(),
        lambda b: {"vendor": "NVIDIA", "name": "H200", "tdp_w": 700, "memory_gb": 141},
        {"tdp_w": 600},
    ),
    Case(
        "cards",
        lambda b: b.card(),
        lambda b: {
            "node": b.node().pk,
            "card_model": b.card_model().pk,
            "slot": "0",
            "pci_bus_id": "0000:3b:00.0",
        },
        {"serial": "SN1"},
    ),
    Case(
        "ports",
        lambda b: b.port(),
        lambda b: {"node": b.node().pk, "name": "ib0", "kind": "infiniband", "speed_gbps": 400},
        {"speed_gbps": 200},
    ),
    Case(
        "cables",
        lambda b: b.cable(),
        lambda b: {"a_port": b.port().pk, "b_port": b.port().pk, "kind": "aoc"},
        {"status": "faulty"},
    ),
    Case(
        "power-feeds",
        lambda b: b.feed(),
        lambda b: {"name": "F1", "site": b.site().pk, "voltage": 230, "amperage": 16},
        {"amperage": 32},
    ),
    Case("psus", lambda b: b.psu(), lambda b: {"name": "PSU9", "capacity_w": 1600}, {"capacity_w": 2000}),
    Case(
        "power-leads",
        lambda b: b.lead(),
        lambda b: {"psu": b.psu().pk, "name": "8pin-1", "kind": "pcie-8pin"},
        {"rating_w": 120},
    ),
]
IDS = [c.endpoint for c in CASES]


def url(case: Case, pk: Any = None) -> str:
    return f"/api/inventory/{case.endpoint}/" + (f"{pk}/" if pk is not None else "")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_list_and_retrieve(case: Case, api: Any, build: Any) -> None:
    obj = case.make(build)
    res = api.get(url(case))
    assert res.status_code == 200
    body = res.json()
    assert set(body) == {"count", "next", "previous", "results"}
    assert obj.pk in [r["id"] for r in body["results"]]
    one = api.get(url(case, obj.pk))
    assert one.status_code == 200
    assert one.json()["id"] == obj.pk
    # the display is the row's str() with its parents loaded (as the API's selectors load them)
    model = type(obj)
    parents = [f.name for f in model._meta.concrete_fields if f.many_to_one]
    assert one.json()["display"] == str(model.objects.select_related(*parents).get(pk=obj.pk)) != ""


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_create_update_delete_are_audited(case: Case, api: Any, build: Any) -> None:
    body = case.payload(build)
    res = api.post(url(case), body, format="json")
    assert res.status_code == 201, res.json()
    pk = res.json()["id"]
    assert AuditEntry.objects.filter(action="create", object_id=str(pk)).count() == 1

    res = api.patch(url(case, pk), case.patch, format="json")
    assert res.status_code == 200, res.json()
    key = case.check or next(iter(case.patch))
    assert res.json()[key] == case.patch[key]
    assert AuditEntry.objects.filter(action="update", object_id=str(pk)).count() == 1

    res = api.delete(url(case, pk))
    assert res.status_code == 204
    assert api.get(url(case, pk)).status_code == 404
    assert AuditEntry.objects.filter(action="delete", object_id=str(pk)).count() == 1


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_anonymous_is_refused(case: Case, anon_api: Any, build: Any) -> None:
    case.make(build)
    assert anon_api.get(url(case)).status_code in (401, 403)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_read_only_user_reads_but_cannot_write(
    case: Case, api_as: Any, readonly_user: Any, build: Any
) -> None:
    obj = case.make(build)
    client = api_as(readonly_user)
    model = type(obj)
    payload = case.payload(build)  # building a payload may create rows (of this model too): count after
    before = model.objects.count()
    assert client.get(url(case)).status_code == 200
    assert client.post(url(case), payload, format="json").status_code == 403
    assert client.patch(url(case, obj.pk), case.patch, format="json").status_code == 403
    assert client.delete(url(case, obj.pk)).status_code == 403
    assert model.objects.count() == before
    assert model.objects.filter(pk=obj.pk).exists()
    assert not AuditEntry.objects.filter(object_id=str(obj.pk), action__in=["update", "delete"]).exists()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_brief_mode(case: Case, api: Any, build: Any) -> None:
    obj = case.make(build)
    res = api.get(url(case) + "?brief=1")
    assert res.status_code == 200
    row = next(r for r in res.json()["results"] if r["id"] == obj.pk)
    assert set(row) == {"id", "url", "display"}
    assert row["url"].endswith(url(case, obj.pk))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_list_query_count_does_not_grow_with_rows(case: Case, api: Any, build: Any) -> None:
    def count_queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert api.get(url(case) + "?limit=1000").status_code == 200
        return len(ctx.captured_queries)

    for _ in range(2):
        case.make(build)
    count_queries()  # warm the user's permission cache
    small = count_queries()
    for _ in range(30):
        case.make(build)
    assert count_queries() == small


def test_fields_selects_fields(api: Any, build: Any) -> None:
    build.node(hostname="gpu07")
    res = api.get("/api/inventory/nodes/?fields=hostname,role")
    assert res.json()["results"][0] == {
        "id": res.json()["results"][0]["id"],
        "hostname": "gpu07",
        "role": "compute",
    }


def test_pagination_default_and_maximum(api: Any, build: Any) -> None:
    site = build.site()
    for i in range(55):
        build.rack(site=site, name=f"r{i}")
    assert len(api.get("/api/inventory/racks/").json()["results"]) == 50
    res = api.get("/api/inventory/racks/?limit=5000").json()
    assert len(res["results"]) == 55 and res["count"] == 55
