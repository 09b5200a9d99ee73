"""Researchers see what they need to run jobs; how the portal reaches the hardware (SSH host,
account, keys, sync errors, BMC) is for operators and admins, in the API and on pages alike."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from inventory.models import Cluster, Node

pytestmark = pytest.mark.django_db

CLUSTER_SECRETS = {
    "ssh_host": "login.hall-b.internal",
    "ssh_port": 2201,
    "ssh_user": "svc-rackpilot",
    "ssh_host_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyOfHallB",
    "ssh_key_path": "/run/secrets/hall-b-key",
    "slurm_conf": "/etc/slurm-hall-b/slurm.conf",
}
NODE_SECRETS = {"bmc_kind": "redfish", "bmc_address": "10.77.0.21", "bmc_username": "bmc-root"}
CLUSTER_HIDDEN = [*CLUSTER_SECRETS, "last_sync_error"]
NODE_HIDDEN = [*NODE_SECRETS]
# what a page may show of them (the port and pinned key are shown as "2201" and a tick)
PAGE_TEXTS = [
    "login.hall-b.internal",
    "svc-rackpilot",
    "/run/secrets/hall-b-key",
    "/etc/slurm-hall-b/slurm.conf",
    "10.77.0.21",
    "bmc-root",
    "ssh: connect to host login.hall-b.internal port 2201",
    "Login host",
    "Service account",
    "Key path",
    "BMC",
]


@pytest.fixture
def infra() -> tuple[Cluster, Node]:
    cluster = Cluster.objects.create(
        name="hall-b",
        **CLUSTER_SECRETS,
        last_sync_error="ssh: connect to host login.hall-b.internal port 2201",
    )
    node = Node.objects.create(hostname="dgx01", cluster=cluster, slurm_name="dgx01", **NODE_SECRETS)
    return cluster, node


def test_researchers_get_no_infrastructure_fields_from_the_api(
    infra: tuple[Cluster, Node], researcher_user: Any, api_as: Any
) -> None:
    cluster, node = infra
    api = api_as(researcher_user)
    for url, hidden, kept in [
        (
            f"/api/inventory/clusters/{cluster.pk}/",
            CLUSTER_HIDDEN,
            ["name", "backend", "stale", "node_count"],
        ),
        (
            f"/api/inventory/nodes/{node.pk}/",
            NODE_HIDDEN,
            ["hostname", "cluster", "slurm_name", "slurm_state"],
        ),
    ]:
        body = api.get(url).json()
        assert [f for f in hidden if f in body] == [], url
        assert all(f in body for f in kept), url
    # lists, ?fields= and a search for the value give nothing away either
    listed = api.get("/api/inventory/clusters/").json()["results"][0]
    assert [f for f in CLUSTER_HIDDEN if f in listed] == []
    assert api.get("/api/inventory/nodes/?fields=hostname,bmc_address").json()["results"] == [
        {"id": node.pk, "hostname": "dgx01"}
    ]
    assert "10.77.0.21" not in api.get("/api/inventory/nodes/").content.decode()
    assert "login.hall-b.internal" not in api.get("/api/inventory/clusters/").content.decode()


@pytest.mark.parametrize("role_user", ["admin_user", "operator_user"])
def test_operators_and_admins_get_them(
    infra: tuple[Cluster, Node], role_user: str, api_as: Any, request: Any
) -> None:
    cluster, node = infra
    api = api_as(request.getfixturevalue(role_user))
    body = api.get(f"/api/inventory/clusters/{cluster.pk}/").json()
    assert {k: body[k] for k in CLUSTER_SECRETS} == CLUSTER_SECRETS
    assert body["last_sync_error"] == "ssh: connect to host login.hall-b.internal port 2201"
    body = api.get(f"/api/inventory/nodes/{node.pk}/").json()
    assert {k: body[k] for k in NODE_SECRETS} == NODE_SECRETS
    assert "bmc_password" not in body  # write-only for everyone


def test_the_schema_marks_them_optional(admin_user: Any, api_as: Any) -> None:
    schema = api_as(admin_user).get("/api/schema/?format=json").json()["components"]["schemas"]
    for name, hidden in [("Cluster", CLUSTER_HIDDEN), ("Node", ["bmc_kind", "bmc_address", "bmc_username"])]:
        assert [f for f in hidden if f in schema[name].get("required", [])] == [], name
        assert all(f in schema[name]["properties"] for f in hidden), name
        assert (
            "Only for admins and operators"
            in schema[name]["properties"]["bmc_address" if name == "Node" else "ssh_host"]["description"]
        )
    # read-only fields the researcher does get stay required
    assert "stale" in schema["Cluster"]["required"]


def _page(user: Any, url: str) -> str:
    c = Client()
    c.force_login(user)
    res = c.get(url)
    assert res.status_code == 200, url
    return res.content.decode()


def test_researchers_do_not_see_them_on_pages(infra: tuple[Cluster, Node], researcher_user: Any) -> None:
    cluster, node = infra
    for url, names in [
        ("/inventory/clusters/", ["hall-b"]),
        (f"/inventory/clusters/{cluster.pk}/", ["hall-b", "dgx01"]),
        (f"/inventory/nodes/{node.pk}/", ["hall-b", "dgx01"]),
    ]:
        html = _page(researcher_user, url)
        assert [t for t in PAGE_TEXTS if t in html] == [], url
        assert all(n in html for n in names), url  # the cluster and node names they need


@pytest.mark.parametrize("role_user", ["admin_user", "operator_user"])
def test_operators_and_admins_see_them_on_pages(
    infra: tuple[Cluster, Node], role_user: str, request: Any
) -> None:
    cluster, node = infra
    user = request.getfixturevalue(role_user)
    html = _page(user, f"/inventory/clusters/{cluster.pk}/")
    for text in ["login.hall-b.internal", "svc-rackpilot", "/run/secrets/hall-b-key", "2201", "Login host"]:
        assert text in html, text
    assert "ssh: connect to host login.hall-b.internal port 2201" in html
    assert "login.hall-b.internal" in _page(user, "/inventory/clusters/")
    html = _page(user, f"/inventory/nodes/{node.pk}/")
    assert "Redfish bmc-root 10.77.0.21" in html


def test_the_overview_names_a_sync_error_to_operators_only(
    infra: tuple[Cluster, Node], researcher_user: Any, operator_user: Any
) -> None:
    error = "ssh: connect to host login.hall-b.internal port 2201"
    html = _page(researcher_user, "/")
    assert error not in html
    assert "Stale data: the last sync with the cluster failed; operators see why." in html
    assert error in _page(operator_user, "/")
