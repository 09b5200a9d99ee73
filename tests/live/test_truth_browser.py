"""Pages that tell the truth, in headless Chromium against uvicorn + Redis + PostgreSQL + the loopback
Slurm lab (over SSH): every form shows the server's error, a 5xx or a dropped connection shows a
notice, node operations rows change without a reload after drain and resume, and a rig link that
goes down turns red on the fabric drawing and green again when it comes back (its alert resolves).

The server runs with Celery eager (actions run in the web process on commit, as in the demo), on
its own database (``<TEST_DATABASE_NAME>_truth_e2e``, created and migrated here) and channel prefix.
``TRUTH_SCREENSHOTS=<dir>`` keeps a PNG of each page the tests visit.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.net import free_port as _free_port
from tests.net import wait_port as _wait_port

ROOT = Path(__file__).resolve().parent.parent.parent
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
DB = (os.environ.get("TEST_DATABASE_NAME") or "rackpilot") + "_truth_e2e"
SHOTS = os.environ.get("TRUTH_SCREENSHOTS", "")

pytestmark = [pytest.mark.browser, pytest.mark.slurm]

if not os.path.exists(CHROMIUM) and os.environ.get("CI") != "true":
    pytest.skip("Debian chromium is not installed (/usr/bin/chromium)", allow_module_level=True)

SEED = """
import json, sys, django; django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection
lab = json.loads(sys.argv[1])
with connection.cursor() as cur:  # a fresh start: the rows of an earlier run go
    cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename NOT IN "
                "('django_migrations', 'django_content_type', 'auth_permission')")
    tables = [r[0] for r in cur.fetchall()]
    cur.execute("TRUNCATE " + ", ".join('"%s"' % t for t in tables) + " RESTART IDENTITY CASCADE")
from inventory.links import P150_QSFP_CHANNELS
from inventory.models import Fabric, Port, PortTemplate, Rack, Site
from inventory.topology.services import MemberInput, fabric_save
from jobs.models import ClusterAccount, Job
from jobs.sync import cluster_sync
from monitoring.defaults import alert_rules_ensure_defaults
from portal.roles import roles_sync, user_set_role
from tests.clusters import lab_cluster_create, make_nodes
from tests.inventory.conftest import Builder
roles_sync()
alert_rules_ensure_defaults()
site = Site.objects.create(name="e2e-site")
rack = Rack.objects.create(name="e2e-r1", site=site, u_height=42)
cluster = lab_cluster_create(lab, name="e2e-lab")
nodes = make_nodes(cluster, ["node1", "node2", "node3", "node4"], gpus=2)
for i, node in enumerate(nodes):
    node.rack, node.position = rack, 2 + 2 * i
    node.save()
assert cluster_sync(cluster).ok
build = Builder()
model = build.card_model(ports=3)
for template in PortTemplate.objects.filter(card_model=model):  # tt-smi's channels, as a p150 wires them
    template.eth_channels = list(P150_QSFP_CHANNELS[template.name])
    template.save()
rig = build.node(hostname="rig01", cluster=cluster)
cards = [build.card(node=rig, card_model=model, slot=str(s), pci_bus_id=f"0000:0{s + 1}:00.0",
                    gpu_uuid=f"GPU-e2e0000{s}-0000-0000-0000-00000000000{s}") for s in (0, 1)]
fabric = fabric_save(Fabric(name="rig-mesh", template="bh-1x2"), user=None,
                     members=[MemberInput(card=c) for c in cards])
a, b = (Port.objects.get(card=c, name="QSFP1") for c in cards)
cable = build.cable(a, b, label="rig-qsfp1")
cable3 = build.cable(*(Port.objects.get(card=c, name="QSFP3") for c in cards), label="rig-qsfp3")
spare = Port.objects.get(card=cards[1], name="QSFP2")
sessions = {}
for role in ("admin", "researcher"):
    user = User.objects.create(username=f"e2e-{role}")
    user_set_role(user, role)
    s = SessionStore()
    s["_auth_user_id"] = str(user.pk)
    s["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
    s["_auth_user_hash"] = user.get_session_auth_hash()
    s.create()
    sessions[role] = s.session_key
    ClusterAccount.objects.create(user=user, cluster=cluster, username="alice" if role == "researcher" else "bob")
admin = User.objects.get(username="e2e-admin")
job = Job.objects.create(cluster=cluster, job_id=424242, name="e2e-finishing", user="bob", owner=admin,
                         state="PENDING", partition="debug")
print(json.dumps({"sessions": sessions, "node": nodes[0].pk, "slurm": nodes[0].slurm_name, "rig": rig.pk,
                  "cards": [c.pk for c in cards], "fabric": fabric.pk, "cable": cable.pk, "cable3": cable3.pk, "a": a.pk,
                  "spare": spare.pk, "rig_card0": cards[0].pk, "job": job.pk}))
"""

LINK = """
import sys, django; django.setup()
from monitoring.services import telemetry_ingest_samples
port = sys.argv[3] if len(sys.argv) > 3 else "QSFP1"  # a port's name, or a tt-smi channel number
telemetry_ingest_samples([{"node": "rig01", "card": sys.argv[1], "metric": "link_up", "value": float(sys.argv[2]),
                           "labels": {"port": port}}])
"""

TEMPS = """
import sys, datetime as dt, django; django.setup()
from django.utils import timezone
from monitoring.services import telemetry_ingest_samples, telemetry_rollup
now = timezone.now()
telemetry_ingest_samples([{"node": "rig01", "card": sys.argv[1], "metric": "temperature_c", "value": 60.5 + i,
                           "ts": (now - dt.timedelta(minutes=10 - i)).isoformat()} for i in range(10)])
telemetry_rollup(start=now - dt.timedelta(minutes=15))  # the 1 h range reads 1-minute buckets, 7 d hourly ones
"""

SYNC = """
import django; django.setup()
from inventory.models import Cluster
from jobs.sync import cluster_sync
assert cluster_sync(Cluster.objects.get(name="e2e-lab")).ok
"""

ALERTS = """
import json, django; django.setup()
from monitoring.models import Alert
print(json.dumps([[a.rule.name, a.status, a.message] for a in Alert.objects.select_related("rule").order_by("pk")]))
"""


class Stack:
    def __init__(self, lab: dict[str, str]) -> None:
        import psycopg

        self.lab = lab
        base = os.environ.get("E2E_DATABASE_URL", "postgres://postgres@127.0.0.1:5432")
        with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DB]).fetchone():
                conn.execute(f'CREATE DATABASE "{DB}"')
        self.env = {
            **os.environ, "DATABASE_URL": f"{base}/{DB}",
            "REDIS_URL": os.environ.get("LIVE_REDIS_URL", "redis://127.0.0.1:6379/7"),
            "DJANGO_SETTINGS_MODULE": "portal.settings.dev", "DEBUG": "1",
            "PYTHONPATH": str(ROOT), "CELERY_TASK_ALWAYS_EAGER": "1", "PORTAL_LIVE_WATCHDOG_S": "1",
            "PORTAL_CHANNEL_PREFIX": f"rp-truth-{os.getpid()}-{_free_port()}",
        }  # fmt: skip
        self.facts = json.loads(self.python(SEED, json.dumps(lab)).strip().splitlines()[-1])
        self.port = _free_port()
        self.server = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "portal.asgi:application", "--host", "127.0.0.1",
             "--port", str(self.port), "--log-level", "warning"],
            cwd=ROOT, env=self.env,
        )  # fmt: skip
        _wait_port(self.port)

    def python(self, code: str, *args: str) -> str:
        done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=180)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.server.terminate()
        self.server.wait(timeout=15)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    from tests.lab import ensure_lab

    s = Stack(ensure_lab())
    try:
        yield s
    finally:
        s.close()


class Watched:
    """A page with its console errors, uncaught exceptions and failed responses recorded."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.console: list[str] = []
        self.bad: list[str] = []
        page.on("console", lambda m: self.console.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.console.append(f"uncaught: {e}"))
        page.on("response", lambda r: self.bad.append(f"{r.status} {r.url}") if r.status == 404 else None)


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _page(browser: Any, stack: Stack, role: str, language: str = "en") -> Watched:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.add_cookies(
        [
            {"name": "sessionid", "value": stack.facts["sessions"][role], "domain": "127.0.0.1", "path": "/"},
            {"name": "django_language", "value": language, "domain": "127.0.0.1", "path": "/"},
        ]
    )
    return Watched(context.new_page())


def _shot(page: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def _until(check: Any, timeout: float = 15.0) -> None:
    """Poll ``check()`` from Python (the pages' CSP forbids the eval behind wait_for_function)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.2)


def _text(page: Any, selector: str) -> str:
    return re.sub(r"\s+", " ", page.inner_text(selector)).strip()


def test_every_form_and_button_shows_the_servers_error(browser: Any, stack: Stack) -> None:
    w = _page(browser, stack, "admin")
    page, f = w.page, stack.facts

    # a cable onto a port that already has one: the form comes back with the error, nothing saved
    page.goto(stack.url("/inventory/cables/add/"))
    page.select_option("#id_a_port", str(f["a"]))
    page.select_option("#id_b_port", str(f["spare"]))
    page.select_option("#id_kind", "dac")
    page.click("#object-form button[type=submit]")
    page.wait_for_selector("#object-form .errors")
    assert "Port QSFP1 of rig01 already carries cable" in _text(page, "#object-form .errors")
    assert page.url.endswith("/inventory/cables/add/")
    _shot(page, "error-cable-used-port")

    # a duplicate card slot and PCI bus id
    page.goto(stack.url("/inventory/cards/add/"))
    page.select_option("#id_node", str(f["rig"]))
    page.select_option("#id_card_model", index=1)
    page.fill("#id_slot", "0")
    page.fill("#id_pci_bus_id", "0000:01:00.0")
    page.click("#object-form button[type=submit]")
    page.wait_for_selector("#object-form .errors")
    errors = _text(page, "#object-form")
    assert "This slot of this node already holds a card." in errors
    _shot(page, "error-card-duplicate")

    # node operations: drain without a reason
    page.goto(stack.url("/jobs/nodes/"))
    page.check(f"#node-{f['node']} input[name=nodes]")
    page.select_option("#id_operation", "drain")
    page.fill("#id_reason", "")
    page.click("#node-op-form button[type=submit]")
    page.wait_for_selector("#op-result .errors")
    assert "reason" in _text(page, "#op-result").lower()
    _shot(page, "error-drain-without-reason")

    # job submit: a bad time limit comes back on its field
    page.goto(stack.url("/jobs/submit/"))
    page.fill("#id_name", "e2e-bad")
    page.fill("#id_time_limit", "forever")
    page.click("#submit-form button[type=submit].primary")
    page.wait_for_selector("#submit-form .errors")
    assert (
        "time" in _text(page, "#submit-form .errors").lower()
        or "limit" in _text(page, "#submit-form").lower()
    )
    _shot(page, "error-submit-bad-time")

    # a cancel the server refuses (the job finished meanwhile): the row says why
    page.goto(stack.url("/jobs/?scope=all"))
    stack.python(
        "import django; django.setup()\nfrom jobs.models import Job\n"
        f"Job.objects.filter(pk={f['job']}).update(state='COMPLETED')"
    )
    page.once("dialog", lambda d: d.accept())
    page.click(f"#job-{f['job']} button.danger")
    page.wait_for_selector(f"#job-{f['job']} .errors")
    assert "Job 424242 has already finished." in _text(page, f"#job-{f['job']}")

    # a button whose target is gone (404 page): a notice with the page's message
    page.goto(stack.url("/monitoring/alerts/"))
    page.evaluate(
        """() => { const b = document.createElement('button'); b.id = 'gone';
                   b.setAttribute('hx-post', '/monitoring/alerts/999999/resolve/');
                   document.querySelector('main').appendChild(b); htmx.process(b); }"""
    )
    page.click("#gone")
    page.wait_for_selector("#notices .notice")
    assert _text(page, "#notices .notice")

    # a 500 and a dropped connection: translated notices, the form keeps what was typed
    page.goto(stack.url("/jobs/submit/"))
    page.fill("#id_name", "kept-on-failure")
    page.route("**/jobs/submit/", lambda route: route.fulfill(status=500, body="boom"))
    page.click("#submit-form button[type=submit].primary")
    page.wait_for_selector("#notices .notice")
    assert "The server failed to handle this request" in _text(page, "#notices")
    assert page.input_value("#id_name") == "kept-on-failure"
    page.unroute("**/jobs/submit/")
    page.route("**/jobs/submit/", lambda route: route.abort())
    page.click("#submit-form button[type=submit].primary")
    _until(lambda: "could not be reached" in _text(page, "#notices"))
    assert len(page.query_selector_all("#notices .notice")) == 1  # one transport notice, replaced
    _shot(page, "error-network-notice")
    page.unroute("**/jobs/submit/")

    # the readiness form (a plain post): a value outside the choices comes back with its error
    page.goto(stack.url(f"/inventory/nodes/{f['node']}/readiness/"))
    page.evaluate("() => { const o = document.createElement('option'); o.value = 'bogus'; o.text = 'bogus';"
                  " document.querySelector('#id_status').appendChild(o); }")  # fmt: skip
    page.select_option("#id_status", "bogus")
    page.click("form.form button[type=submit]")
    page.wait_for_load_state()
    assert "Select a valid choice." in _text(page, "main")
    _shot(page, "error-readiness")

    assert [b for b in w.bad if "/alerts/999999/" not in b] == [], w.bad  # no 404 (the favicon included)


def test_errors_are_translated_in_zh_hans(browser: Any, stack: Stack) -> None:
    w = _page(browser, stack, "admin", "zh-hans")
    page = w.page
    page.goto(stack.url("/jobs/nodes/"))
    page.check(f"#node-{stack.facts['node']} input[name=nodes]")
    page.select_option("#id_operation", "drain")
    page.click("#node-op-form button[type=submit]")
    page.wait_for_selector("#op-result .errors")
    assert _text(page, "#op-result .errors") and not re.search(
        r"[A-Za-z]{4,}", _text(page, "#op-result .errors")
    )
    page.route("**/jobs/nodes/", lambda route: route.fulfill(status=502, body="bad gateway"))
    page.click("#node-op-form button[type=submit]")
    page.wait_for_selector("#notices .notice")
    assert "服务器未能处理此请求" in _text(page, "#notices")
    _shot(page, "zh-error-notice")


def _state(page: Any, node: int) -> str:
    return _text(page, f"#node-{node} .nstate")


def _wait_row(page: Any, stack: Stack, node: int, condition: Any, timeout: float = 90.0) -> None:
    """Wait for the row's Slurm state to satisfy ``condition``, pushed to the page.

    The action's success syncs its cluster at once; a node slurmd that was just (re)started may
    still be flagged not responding then, so the next syncs (beat's job in production) run here
    meanwhile: whichever sync sees the change, the row must arrive without a reload."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            _until(lambda: condition(_state(page, node)), timeout=5.0)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            stack.python(SYNC)


def test_drain_and_resume_change_the_row_without_a_reload(browser: Any, stack: Stack) -> None:
    w = _page(browser, stack, "admin")
    page, node = w.page, stack.facts["node"]
    page.goto(stack.url("/jobs/nodes/"))
    page.wait_for_selector('#live-status[data-seq="snapshot"]', timeout=15000)
    page.evaluate("window.__marker = 'same page'")
    assert _state(page, node) == "idle"
    try:
        page.check(f"#node-{node} input[name=nodes]")
        page.select_option("#id_operation", "drain")
        page.fill("#id_reason", "e2e maintenance")
        page.click("#node-op-form button[type=submit]")
        _wait_row(page, stack, node, lambda s: s.startswith("drain"))
        assert "e2e maintenance" in _text(page, f"#node-{node}")
        _shot(page, "nodeops-drained")
        page.check(f"#node-{node} input[name=nodes]")
        page.select_option("#id_operation", "resume")
        page.click("#node-op-form button[type=submit]")
        _wait_row(page, stack, node, lambda s: s == "idle")
        assert page.evaluate("window.__marker") == "same page"
    finally:  # leave the lab as found, whatever happened
        subprocess.run(
            ["scontrol", "update", f"nodename={stack.facts['slurm']}", "state=resume"],
            env={**os.environ, "SLURM_CONF": stack.lab.get("SLURM_CONF", "")}, capture_output=True, timeout=30,
        )  # fmt: skip
    assert w.console == [], w.console


def test_a_rig_link_down_turns_red_and_green_again_and_its_alert_resolves(browser: Any, stack: Stack) -> None:
    f = stack.facts
    uuid_b = "GPU-e2e00001-0000-0000-0000-000000000001"
    uuid_a = "GPU-e2e00000-0000-0000-0000-000000000000"
    stack.python(LINK, uuid_a, "1")
    stack.python(LINK, uuid_b, "1")
    w = _page(browser, stack, "admin")
    page = w.page
    page.goto(stack.url(f"/inventory/fabrics/{f['fabric']}/"))
    page.wait_for_selector('#live-status[data-seq="snapshot"]', timeout=15000)
    line, line3 = (f'line[data-cable="{f[c]}"]' for c in ("cable", "cable3"))

    def state(selector: str) -> list[str]:
        return (page.get_attribute(selector, "class") or "").split()

    assert "link-up" in state(line)
    page.evaluate("window.__marker = 'same page'")

    stack.python(LINK, uuid_b, "0")
    _until(lambda: "link-down" in state(line))
    alerts = json.loads(stack.python(ALERTS))
    assert [(name, status) for name, status, _m in alerts] == [("Link down", "firing")]
    _shot(page, "fabric-link-down")

    stack.python(LINK, uuid_b, "1")
    _until(lambda: "link-up" in state(line))
    assert [(name, status) for name, status, _m in json.loads(stack.python(ALERTS))] == [
        ("Link down", "resolved")
    ]

    # tt-smi names Ethernet channels, not cages: channel 5 of card B is its QSFP3's second channel,
    # so the QSFP3 cable turns red while QSFP1's stays green, and the alert names the cage
    stack.python(LINK, uuid_a, "1", "4")
    stack.python(LINK, uuid_b, "1", "5")
    _until(lambda: "link-up" in state(line3))
    stack.python(LINK, uuid_b, "0", "5")
    _until(lambda: "link-down" in state(line3))
    assert "link-up" in state(line)
    assert json.loads(stack.python(ALERTS))[-1] == [
        "Link down",
        "firing",
        "Link down (port QSFP3, channel 5)",
    ]
    _shot(page, "fabric-channel-down")
    stack.python(LINK, uuid_b, "1", "5")
    _until(lambda: "link-up" in state(line3))
    assert page.evaluate("window.__marker") == "same page"
    assert w.console == [], w.console


def test_charts_keep_one_clock_per_language_and_the_range_picker_asks_for_its_step(
    browser: Any, stack: Stack
) -> None:
    f = stack.facts
    stack.python(TEMPS, "GPU-e2e00000-0000-0000-0000-000000000000")
    exact = {
        "en": r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}",
        "zh-hans": r"\d{4}年\d{1,2}月\d{1,2}日 \d{2}:\d{2}:\d{2}",
    }
    for language, when in exact.items():
        w = _page(browser, stack, "admin", language)
        page = w.page
        asked: list[str] = []
        page.on(
            "request",
            lambda r, asked=asked: asked.append(r.url) if "/api/monitoring/series/" in r.url else None,
        )
        page.goto(stack.url(f"/inventory/cards/{f['rig_card0']}/"))
        chart = "figure.chart[data-metric=temperature_c]"
        over = page.wait_for_selector(f"{chart} .u-over", timeout=15000)
        box = over.bounding_box()
        over.hover(position={"x": box["width"] * 0.95, "y": box["height"] / 2})  # the newest points
        _until(lambda: "°C" in _text(page, f"{chart} .u-legend"))
        legend = _text(page, f"{chart} .u-legend")
        # the pages' exact format of the language, a 24 h clock, the unit on the value
        assert re.search(when, legend), legend
        assert not re.search(r"AM|PM|上午|下午", legend), legend
        assert re.search(r"6\d\.\d °C", legend), legend
        assert "/" not in legend  # no US-style date
        page.click("button[data-range='7d']")
        _until(lambda: any("step=3600" in u and "from=now-604800s" in u for u in asked))
        assert page.get_attribute("button[data-range='7d']", "aria-pressed") == "true"
        _until(lambda: page.query_selector(f"{chart} .u-over") is not None)
        _shot(page, f"card-charts-{language}")
        assert w.console == [], w.console
