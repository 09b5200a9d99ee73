"""The Content-Security-Policy in headless Chromium: every page, as each role and in both languages,
loads with no CSP violation, and what moved out of inline script still works (language switch,
select-all, the submit form's inline check, htmx, websockets, uPlot, Swagger UI).

Against uvicorn (websockets included) on the database ``<TEST_DATABASE_NAME>_csp_e2e``
(E2E_CSP_DATABASE to change it), created and seeded here. Screenshots go to E2E_SCREENSHOT_DIR when it is set.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.live.test_browser import ARGS, CHROMIUM, ROOT, _free_port, _wait_port

pytestmark = pytest.mark.browser

# its own database per test run (TEST_DATABASE_NAME), as tests/live/test_browser.py does
DB = os.environ.get("E2E_CSP_DATABASE") or (os.environ.get("TEST_DATABASE_NAME") or "rackpilot") + "_csp_e2e"

SEED = """
import django; django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from inventory.models import Cluster, Fabric, Node, PSU, Rack
from inventory.seed import seed_demo
from jobs.models import ClusterAccount
from jobs.seed import jobs_seed_templates
from jobs.sync import cluster_sync
from portal.roles import roles_sync, user_set_role
roles_sync()
clusters = seed_demo()
jobs_seed_templates()
for c in clusters:
    cluster_sync(c)
Cluster.objects.filter(pk=clusters[0].pk).update(ssh_host="login.csp-e2e.internal", ssh_user="svc-csp")
Node.objects.filter(cluster=clusters[0]).update(bmc_kind="ipmi", bmc_address="10.66.0.9", bmc_username="bmcadmin")
keys = []
for role in ("admin", "operator", "researcher"):
    user, created = User.objects.get_or_create(username=f"csp-{role}")
    user_set_role(user, role)
    if role == "admin":  # the Django admin too
        User.objects.filter(pk=user.pk).update(is_staff=True, is_superuser=True)
        user.refresh_from_db()
    for c in clusters:
        ClusterAccount.objects.get_or_create(user=user, cluster=c, defaults={"username": f"csp-{role}"})
    s = SessionStore()
    s["_auth_user_id"] = str(user.pk)
    s["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
    s["_auth_user_hash"] = user.get_session_auth_hash()
    s.create()
    keys.append(s.session_key)
node = Node.objects.filter(cluster=clusters[0], rack__isnull=False).order_by("pk").first()
print(" ".join(keys), clusters[0].pk, node.pk, node.rack_id, Fabric.objects.order_by("pk").first().pk,
      PSU.objects.order_by("pk").first().pk)
"""

# Chromium reports a refused inline script, handler, style or source in the console and as a
# securitypolicyviolation event; both are collected.
LISTEN = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(e.violatedDirective + " " + (e.blockedURI || "inline") + " " + (e.sourceFile || "") + ":" + e.lineNumber);
});
"""


class CSPStack:
    def __init__(self) -> None:
        import psycopg

        base = os.environ.get("E2E_DATABASE_URL", "postgres://postgres@127.0.0.1:5432")
        with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DB]).fetchone():
                conn.execute(f'CREATE DATABASE "{DB}"')
        self.env = {
            **os.environ,
            "DATABASE_URL": f"{base}/{DB}",
            "REDIS_URL": os.environ.get("LIVE_REDIS_URL", "redis://127.0.0.1:6379/7"),
            "DJANGO_SETTINGS_MODULE": "portal.settings.dev",
            "DEBUG": "1",  # static files from the finders, as in tests/live/test_browser.py
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "PORTAL_CLUSTER_BACKEND": "simulator",
            "PORTAL_SIMULATOR_REALTIME": "false",
            "CELERY_TASK_ALWAYS_EAGER": "true",
            "PYTHONPATH": str(ROOT),
            "PORTAL_CHANNEL_PREFIX": f"rp-csp-{os.getpid()}-{_free_port()}",
        }
        done = subprocess.run(
            [sys.executable, "-c", SEED], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        out = done.stdout.split()[-8:]
        self.sessions = dict(zip(("admin", "operator", "researcher"), out[:3], strict=True))
        self.cluster, self.node, self.rack, self.fabric, self.psu = (int(x) for x in out[3:])
        self.port = int(os.environ.get("E2E_CSP_PORT") or _free_port())
        self.server = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "portal.asgi:application", "--host", "127.0.0.1",
             "--port", str(self.port), "--log-level", "warning", "--no-proxy-headers"],
            cwd=ROOT, env=self.env,
        )  # fmt: skip
        _wait_port(self.port)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.server.terminate()
        self.server.wait(timeout=10)


@pytest.fixture(scope="module")
def stack() -> Iterator[CSPStack]:
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian chromium is not installed (/usr/bin/chromium)")
    s = CSPStack()
    yield s
    s.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _context(browser: Any, stack: CSPStack, role: str, lang: str) -> Any:
    context = browser.new_context(
        locale="zh-CN" if lang == "zh-hans" else "en-US", viewport={"width": 1280, "height": 900}
    )
    context.add_cookies(
        [
            {"name": "sessionid", "value": stack.sessions[role], "domain": "127.0.0.1", "path": "/"},
            {"name": "django_language", "value": lang, "domain": "127.0.0.1", "path": "/"},
        ]
    )
    context.add_init_script(LISTEN)
    return context


def _open(context: Any, url: str, problems: list[str]) -> Any:
    page = context.new_page()
    page.on(
        "console",
        lambda m: (
            problems.append(f"{url}: console {m.type}: {m.text}")
            if "Content Security Policy" in m.text or "Content-Security-Policy" in m.text
            else None
        ),
    )
    page.on("pageerror", lambda e: problems.append(f"{url}: page error: {e}"))
    page.on(
        "response",
        lambda r: problems.append(f"{url}: {r.status} {r.url}") if r.status >= 400 else None,
    )
    res = page.goto(url, wait_until="networkidle")
    assert res is not None and res.status == 200, (url, res and res.status)
    return page


def _shoot(page: Any, name: str) -> None:
    where = os.environ.get("E2E_SCREENSHOT_DIR")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(where) / f"{name}.png"), full_page=True)


def _pages(stack: CSPStack, role: str) -> list[str]:
    pages = [
        "/",
        "/jobs/",
        "/jobs/submit/",
        "/jobs/actions/",
        "/inventory/clusters/",
        f"/inventory/clusters/{stack.cluster}/",
        f"/inventory/nodes/{stack.node}/",
        f"/inventory/racks/{stack.rack}/",
        f"/inventory/fabrics/{stack.fabric}/",
        f"/inventory/fabrics/{stack.fabric}/wiring/",
        f"/inventory/nodes/{stack.node}/readiness/",
        f"/inventory/psus/{stack.psu}/budget/",
        "/account/tokens/",
        "/api/docs/",
    ]
    if role != "researcher":
        pages += ["/jobs/nodes/", "/monitoring/alerts/", "/monitoring/alert-rules/", "/jobs/templates/"]
    if role == "admin":
        pages += ["/audit/", "/admin/", f"/admin/inventory/node/{stack.node}/change/", "/admin/jobs/action/"]
    return pages


@pytest.mark.parametrize(
    ("role", "lang"), [("admin", "en"), ("operator", "en"), ("researcher", "en"), ("admin", "zh-hans")]
)
def test_no_page_violates_the_policy(stack: CSPStack, browser: Any, role: str, lang: str) -> None:
    context = _context(browser, stack, role, lang)
    problems: list[str] = []
    try:
        for path in _pages(stack, role):
            page = _open(context, stack.url(path), problems)
            if path == "/api/docs/":
                page.wait_for_selector(".swagger-ui .opblock", timeout=90000)  # Swagger UI ran its script
            problems += [f"{path}: {v}" for v in page.evaluate("window.__csp")]
            slug = path.strip("/").replace("/", "-") or "home"
            _shoot(page, f"{role}-{lang}-{slug}")
            page.close()
    finally:
        context.close()
    assert problems == [], "\n".join(problems)


def test_what_left_inline_script_still_works(stack: CSPStack, browser: Any) -> None:
    context = _context(browser, stack, "operator", "en")
    problems: list[str] = []
    try:
        # htmx and the websocket extension run: the live status turns on
        page = _open(context, stack.url("/"), problems)
        assert page.evaluate("typeof window.htmx") == "object"
        assert page.evaluate("htmx.config.includeIndicatorStyles") is False
        page.wait_for_selector("#live-status.on", timeout=15000)
        # the language switch submits itself
        with page.expect_navigation():
            page.select_option("select[name=language]", "zh-hans")
        assert page.get_attribute("html", "lang") == "zh-hans"
        with page.expect_navigation():
            page.select_option("select[name=language]", "en")
        page.close()
        # select-all on node operations
        page = _open(context, stack.url("/jobs/nodes/"), problems)
        boxes = page.locator("#node-table input[name=nodes]")
        assert boxes.count() >= 2
        page.check("#node-table input[data-select-all]")
        assert all(boxes.nth(i).is_checked() for i in range(boxes.count()))
        page.uncheck("#node-table input[data-select-all]")
        assert not any(boxes.nth(i).is_checked() for i in range(boxes.count()))
        page.close()
        # the submit form re-checks itself on change (an htmx POST with _validate)
        page = _open(context, stack.url("/jobs/submit/"), problems)
        with page.expect_request(lambda r: r.method == "POST" and "/jobs/submit/" in r.url) as req:
            page.fill("#submit-form input[name=name]", "csp check")
            page.dispatch_event("#submit-form input[name=name]", "change")
        assert "_validate=1" in (req.value.post_data or "")
        page.wait_for_load_state("networkidle")
        page.close()
        # uPlot draws the node charts
        page = _open(context, stack.url(f"/inventory/nodes/{stack.node}/"), problems)
        assert page.evaluate("typeof window.uPlot") == "function"
        page.close()
        # the print button prints (window.print is replaced to see the call)
        page = _open(context, stack.url(f"/inventory/fabrics/{stack.fabric}/wiring/"), problems)
        page.evaluate("() => { window.__printed = 0; window.print = () => { window.__printed += 1; }; }")
        page.click("button[data-print]")
        assert page.evaluate("window.__printed") == 1
        problems += [f"wiring: {v}" for v in page.evaluate("window.__csp")]
        page.close()
    finally:
        context.close()
    assert problems == [], "\n".join(problems)


def test_researchers_see_no_infrastructure_on_pages(stack: CSPStack, browser: Any) -> None:
    for role, visible in [("researcher", False), ("operator", True)]:
        context = _context(browser, stack, role, "en")
        problems: list[str] = []
        try:
            page = _open(context, stack.url(f"/inventory/clusters/{stack.cluster}/"), problems)
            text = page.inner_text("main")
            assert ("login.csp-e2e.internal" in text) is visible, role
            assert ("svc-csp" in text) is visible, role
            page.close()
            page = _open(context, stack.url(f"/inventory/nodes/{stack.node}/"), problems)
            assert ("10.66.0.9" in page.inner_text("main")) is visible, role
            page.close()
        finally:
            context.close()
