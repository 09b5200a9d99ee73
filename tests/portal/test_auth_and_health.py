from __future__ import annotations

from io import StringIO
from typing import Any

from django.core.management import call_command
from rest_framework.test import APIClient

from portal.models import APIToken, AuditEntry


def test_healthz(client: Any) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}


def test_readyz_checks_database_and_redis(client: Any, db: Any) -> None:
    res = client.get("/readyz")
    assert res.status_code == 200
    assert res.json()["checks"] == {"database": "ok", "redis": "ok"}


def test_token_from_command_line_authenticates(admin_user: Any) -> None:
    out = StringIO()
    call_command("create_token", admin_user.username, "--name", "ci", stdout=out)
    key = out.getvalue().strip()
    token = APIToken.objects.get(user=admin_user)
    assert token.key_hash != key and len(key) == 40 and token.prefix == key[:8]
    client = APIClient()
    assert client.get("/api/inventory/sites/").status_code in (401, 403)
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/inventory/sites/").status_code == 200
    call_command("revoke_token", key[:8], stdout=StringIO())
    assert client.get("/api/inventory/sites/").status_code == 401


def test_bad_token_is_401(db: Any) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token nope")
    res = client.get("/api/inventory/sites/")
    assert res.status_code == 401 and "Invalid" in res.json()["detail"]


def test_read_only_token_refuses_writes(admin_user: Any) -> None:
    out = StringIO()
    call_command("create_token", admin_user.username, "--read-only", stdout=out)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {out.getvalue().strip()}")
    assert client.get("/api/inventory/sites/").status_code == 200
    assert client.post("/api/inventory/sites/", {"name": "x"}, format="json").status_code == 403


def test_tokens_page_creates_shows_once_and_revokes(client: Any, researcher_user: Any) -> None:
    client.force_login(researcher_user)
    res = client.post("/account/tokens/", {"name": "laptop", "write_enabled": "on"})
    assert res.status_code == 200
    token = APIToken.objects.get(user=researcher_user)
    assert token.prefix in res.content.decode()
    assert client.get("/account/tokens/").content.decode().count(token.prefix) == 1
    client.post(f"/account/tokens/{token.pk}/revoke/")
    assert not APIToken.objects.filter(pk=token.pk).exists()
    assert AuditEntry.objects.filter(message="API token revoked", username="alice").exists()


def test_cannot_revoke_someone_elses_token(client: Any, researcher_user: Any, admin_user: Any) -> None:
    from portal.services import api_token_create

    token, _key = api_token_create(user=admin_user, name="admin's")
    client.force_login(researcher_user)
    assert client.post(f"/account/tokens/{token.pk}/revoke/").status_code == 404
    assert APIToken.objects.filter(pk=token.pk).exists()


def test_openapi_schema_and_docs(client: Any, admin_user: Any) -> None:
    client.force_login(admin_user)
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert "/api/inventory/nodes/" in paths and "/api/inventory/cables/{id}/" in paths
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()
    assert b"cdn" not in docs.content.lower() and b"unpkg" not in docs.content.lower()
