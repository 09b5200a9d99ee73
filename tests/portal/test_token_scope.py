"""A read-only API token never writes: every route with an unsafe method, collected from the URL
resolver (not a hand list), refuses it with 403 for every role, and nothing changes in the database."""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.db import models
from rest_framework.test import APIClient

from inventory.models import Node
from portal.models import APIToken
from portal.services import api_token_create
from tests.portal.routes import route_path, unsafe_routes

pytestmark = pytest.mark.django_db


def _fingerprint() -> dict[str, Any]:
    """Row count (and latest change, where a model keeps one) of every table: any write shows."""
    out: dict[str, Any] = {}
    for model in apps.get_models():
        if model is APIToken or not model._meta.managed:
            continue
        qs = model._default_manager.all()
        names = {f.name for f in model._meta.concrete_fields}
        latest = next((n for n in ("last_updated", "finished", "acknowledged_at", "ts") if n in names), None)
        out[model._meta.label] = (qs.count(), qs.aggregate(m=models.Max(latest))["m"] if latest else None)
    return out


def test_every_unsafe_route_refuses_a_read_only_token_for_every_role(
    world: None, admin_user: Any, operator_user: Any, researcher_user: Any
) -> None:
    routes = unsafe_routes()
    # the resolver found the action endpoints that once wrote through a read-only token
    found = {(r, m) for r, m, _cls in routes}
    for suffix in (
        "drain/$",
        "resume/$",
        "reboot/$",
        "power-cycle/$",
        "cancel/$",
        "acknowledge/$",
        "resolve/$",
    ):
        assert any(r.endswith(suffix) and m == "POST" for r, m in found), suffix
    assert len(routes) >= 80
    refused: list[tuple[str, str, str]] = []
    for user in (admin_user, operator_user, researcher_user):
        _token, key = api_token_create(user=user, name="ro", write_enabled=False)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        before = _fingerprint()
        for regex, method, cls in routes:
            path = route_path(regex, cls)
            res = client.generic(method, path, data="{}", content_type="application/json")
            assert res.status_code == 403, (user.username, method, path, res.status_code, res.content[:200])
            assert res.json()["detail"] == (
                f"This API token is read-only: {method} is refused. Create a token that allows writes."
            )
            refused.append((user.username, method, path))
        assert _fingerprint() == before, user.username
        # the same token still reads
        assert client.get("/api/inventory/nodes/").status_code == 200
    assert len(refused) == 3 * len(routes)
    print(
        f"\nread-only token scope: {len(routes)} unsafe routes x 3 roles = {len(refused)} requests, all 403"
    )


def test_a_write_enabled_token_still_acts(world: Any, operator_user: Any) -> None:
    _token, key = api_token_create(user=operator_user, name="rw", write_enabled=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    node = Node.objects.filter(cluster__isnull=False, actions__isnull=True).order_by("pk").first()
    assert node is not None
    res = client.post(f"/api/inventory/nodes/{node.pk}/drain/", {"reason": "fan"}, format="json")
    assert res.status_code == 202, res.content
    assert res.json()["kind"] == "drain"
