"""Production headers: CSP and Permissions-Policy on every response, secure cookies, HSTS and the
proxy's https marker from the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client, override_settings

ROOT = Path(__file__).resolve().parents[2]
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/login/", "/healthz", "/api/", "/static/js/live.js", "/no-such-page/"])
def test_every_response_carries_the_policies(client: Client, path: str) -> None:
    res = client.get(path)
    assert res["Content-Security-Policy"] == CSP
    assert res["Permissions-Policy"].startswith("accelerometer=(), autoplay=(), camera=()")
    assert "geolocation=()" in res["Permissions-Policy"] and "usb=()" in res["Permissions-Policy"]
    assert res["X-Content-Type-Options"] == "nosniff"
    assert res["Referrer-Policy"] == "same-origin"
    assert res["Cross-Origin-Opener-Policy"] == "same-origin"
    assert "Strict-Transport-Security" not in res  # plain http, HSTS off by default


@pytest.mark.django_db
def test_pages_carry_x_frame_options(client: Client) -> None:
    assert client.get("/login/")["X-Frame-Options"] == "DENY"


def _settings_with(env: dict[str, str]) -> dict[str, Any]:
    """The settings module as a fresh process reads it from this environment."""
    code = (
        "import json; from portal.settings import base as s; print(json.dumps({k: getattr(s, k) for k in "
        "['SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SECURE_HSTS_SECONDS', 'SECURE_HSTS_INCLUDE_SUBDOMAINS',"
        " 'SECURE_HSTS_PRELOAD', 'SECURE_SSL_REDIRECT', 'SECURE_PROXY_SSL_HEADER', 'PORTAL_TRUSTED_PROXIES',"
        " 'PORTAL_CSP']}))"
    )
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("SECURE_", "SESSION_", "CSRF_", "PORTAL_"))
    }
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_defaults_work_over_plain_http() -> None:
    s = _settings_with({})
    assert s["SESSION_COOKIE_SECURE"] is False and s["CSRF_COOKIE_SECURE"] is False
    assert s["SECURE_HSTS_SECONDS"] == 0 and s["SECURE_SSL_REDIRECT"] is False
    assert s["SECURE_PROXY_SSL_HEADER"] is None
    assert s["PORTAL_TRUSTED_PROXIES"] == []
    assert s["PORTAL_CSP"] == CSP


def test_production_values_come_from_the_environment() -> None:
    s = _settings_with(
        {
            "SESSION_COOKIE_SECURE": "true",
            "CSRF_COOKIE_SECURE": "1",
            "SECURE_HSTS_SECONDS": "31536000",
            "SECURE_HSTS_INCLUDE_SUBDOMAINS": "yes",
            "SECURE_HSTS_PRELOAD": "on",
            "SECURE_SSL_REDIRECT": "true",
            "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO,https",
            "PORTAL_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.1",
        }
    )
    assert s["SESSION_COOKIE_SECURE"] is True and s["CSRF_COOKIE_SECURE"] is True
    assert s["SECURE_HSTS_SECONDS"] == 31536000
    assert s["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is True and s["SECURE_HSTS_PRELOAD"] is True
    assert s["SECURE_SSL_REDIRECT"] is True
    assert s["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert s["PORTAL_TRUSTED_PROXIES"] == ["10.0.0.0/8", "192.0.2.1"]


def test_a_bad_trusted_proxy_stops_the_start() -> None:
    code = "import portal.settings.base"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PORTAL_TRUSTED_PROXIES": "10.0.0.0/8,proxy.example"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 1
    assert "PORTAL_TRUSTED_PROXIES: 'proxy.example' is not an address or CIDR block" in out.stderr


def test_compose_example_documents_the_https_settings_ready_to_turn_on() -> None:
    # the example serves plain http on 127.0.0.1 (secure cookies would never come back over it), so
    # the https settings are there, exact, one '#' away, for a deployment behind a TLS proxy
    text = (ROOT / ".env.example").read_text().splitlines()
    active = dict(line.split("=", 1) for line in text if line and not line.startswith("#") and "=" in line)
    commented = dict(
        line.removeprefix("# ").split("=", 1) for line in text if line.startswith("# ") and "=" in line
    )
    for key in (
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SECURE_HSTS_SECONDS",
        "SECURE_PROXY_SSL_HEADER",
    ):
        assert key not in active
    assert commented["SESSION_COOKIE_SECURE"] == "true"
    assert commented["CSRF_COOKIE_SECURE"] == "true"
    assert commented["SECURE_HSTS_SECONDS"] == "31536000"
    assert commented["SECURE_PROXY_SSL_HEADER"] == "HTTP_X_FORWARDED_PROTO,https"


@pytest.mark.django_db
@override_settings(
    SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https"),
    SECURE_HSTS_SECONDS=31536000,
    SESSION_COOKIE_SECURE=True,
    CSRF_COOKIE_SECURE=True,
)
def test_behind_an_https_proxy_cookies_are_secure_and_hsts_is_sent(researcher_user: Any) -> None:
    c = Client()
    page = c.get("/login/", HTTP_X_FORWARDED_PROTO="https")
    assert page["Strict-Transport-Security"] == "max-age=31536000"
    assert page.cookies["csrftoken"]["secure"] is True
    res = c.post(
        "/login/", {"username": "alice", "password": "pw-alice"}, HTTP_X_FORWARDED_PROTO="https", secure=False
    )
    assert res.status_code == 302
    assert res.cookies[settings.SESSION_COOKIE_NAME]["secure"] is True
    assert res.cookies[settings.SESSION_COOKIE_NAME]["httponly"] is True
    # without the proxy's marker the request is plain http: no HSTS
    assert "Strict-Transport-Security" not in c.get("/login/")
