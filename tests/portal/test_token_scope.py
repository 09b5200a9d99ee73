"""A read-only API token never writes: every route with an unsafe method, collected from the URL
resolver (not a hand list), refuses it with 403 for every role, and nothing changes in the database."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.apps import apps
from django.db import models
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from rest_framework.test import APIClient
from rest_framework.views import APIView

from inventory.models import Node
from inventory.seed import seed_demo
from jobs.models import ClusterAccount, Job
from jobs.seed import jobs_seed_templates
from monitoring.models import Alert, AlertRule
from portal.models import APIToken
from portal.services import api_token_create

pytestmark = pytest.mark.django_db

SAFE = {"GET", "HEAD", "OPTIONS", "TRACE"}


def _walk(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from _walk(p.url_patterns, prefix + str(p.pattern.regex.pattern).lstrip("^"))
        else:
            yield prefix + str(p.pattern.regex.pattern).lstrip("^"), p


def unsafe_routes() -> list[tuple[str, str, type[APIView]]]:
    """(regex, method, view class) for every DRF route of the URLconf that takes an unsafe method."""
    out = []
    for regex, pattern in _walk(get_resolver().url_patterns):
        cls = getattr(pattern.callback, "cls", None)
        if cls is None or not issubclass(cls, APIView):
            continue
        if "format" in pattern.pattern.regex.groupindex:
            continue  # the router's `.json` duplicates of the same routes
        actions = getattr(pattern.callback, "actions", None)
        if actions:
            methods = {m.upper() for m in actions}
        else:
            methods = {m.upper() for m in cls.http_method_names if hasattr(cls, m)}
        out += [(regex, m, cls) for m in sorted(methods - SAFE)]
    return out


def _model_of(cls: type[APIView], regex: str) -> type[models.Model]:
    queryset = getattr(cls, "queryset", None)
    if queryset is not None:
        return queryset.model
    if "inventory/nodes/" in regex:
        return Node
    raise AssertionError(f"no model known for the pk of {regex} ({cls.__name__})")


def _path(regex: str, cls: type[APIView]) -> str:
    """A concrete path: every `pk` is an existing row of the view's model (so that a write would act)."""

    def pk(match: re.Match[str]) -> str:
        assert match.group(1) == "pk", regex
        row = _model_of(cls, regex)._default_manager.order_by("pk").first()
        assert row is not None, f"no {cls.__name__} row to aim {regex} at"
        return str(row.pk)

    path = re.sub(r"\(\?P<(\w+)>[^)]*\)", pk, regex)
    path = re.sub(r"(\\Z|\$)$", "", path)
    return "/" + path.replace("\\", "")


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


@pytest.fixture
def world(admin_user: Any, operator_user: Any, researcher_user: Any) -> None:
    clusters = seed_demo()
    jobs_seed_templates(user=admin_user)
    cluster = clusters[0]
    node = Node.objects.filter(cluster=cluster).order_by("pk").first()
    assert node is not None
    ClusterAccount.objects.create(user=researcher_user, cluster=cluster, username="alice")
    Job.objects.create(cluster=cluster, job_id=7, state="RUNNING", user="alice", owner=researcher_user)
    Alert.objects.create(
        rule=AlertRule.objects.order_by("pk").first(),
        target=f"node:{node.pk}",
        node=node,
        severity="warning",
        started_at=timezone.now(),
    )


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
            path = _path(regex, cls)
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
    node = Node.objects.order_by("pk").first()
    assert node is not None
    res = client.post(f"/api/inventory/nodes/{node.pk}/drain/", {"reason": "fan"}, format="json")
    assert res.status_code == 202, res.content
    assert res.json()["kind"] == "drain"
