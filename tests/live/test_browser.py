"""End to end in headless Chromium against uvicorn + Redis + PostgreSQL: pages change without reloads.

The server and the writers (telemetry ingest) are subprocesses on the database
``rackpilot_live_e2e`` (created and migrated here), as a web process and a Celery worker would be.
"""

from __future__ import annotations

import os
import shutil
import signal
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
# its own database per test run (TEST_DATABASE_NAME), so that parallel runs never share one
DB = (os.environ.get("TEST_DATABASE_NAME") or "rackpilot") + "_live_e2e"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip

pytestmark = pytest.mark.browser

if not os.path.exists(CHROMIUM) and os.environ.get("CI") != "true":
    pytest.skip("Debian chromium is not installed (/usr/bin/chromium)", allow_module_level=True)

SEED = """
import django; django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from inventory.models import Card, CardModel, Cluster, Node, Rack, Site
from portal.roles import roles_sync, user_set_role
roles_sync()
site, _ = Site.objects.get_or_create(name="e2e")
cluster, _ = Cluster.objects.get_or_create(name="e2e")
rack, _ = Rack.objects.get_or_create(name="e2e-r1", site=site, defaults={"u_height": 42})
model, _ = CardModel.objects.get_or_create(vendor="NVIDIA", name="e2e-gpu", defaults={"tdp_w": 450})
node, _ = Node.objects.get_or_create(hostname="e2e-gpu01", defaults={"cluster": cluster, "rack": rack, "position": 4})
card, _ = Card.objects.get_or_create(node=node, slot="0", defaults={"card_model": model,
    "gpu_uuid": "GPU-e2e00000-0000-0000-0000-000000000000"})
user, created = User.objects.get_or_create(username="e2e-admin")
if created:
    user_set_role(user, "admin")
s = SessionStore()
s["_auth_user_id"] = str(user.pk)
s["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
s["_auth_user_hash"] = user.get_session_auth_hash()
s.create()
print(s.session_key, rack.pk, card.pk)
"""

INGEST = """
import sys, django; django.setup()
from monitoring.services import telemetry_ingest_samples
telemetry_ingest_samples([{"node": "e2e-gpu01", "card": "GPU-e2e00000-0000-0000-0000-000000000000",
                           "metric": "temperature_c", "value": float(sys.argv[1])}])
"""


class Stack:
    def __init__(self, redis_url: str) -> None:
        import psycopg

        base = os.environ.get("E2E_DATABASE_URL", "postgres://postgres@127.0.0.1:5432")
        with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DB]).fetchone():
                conn.execute(f'CREATE DATABASE "{DB}"')
        self.env = {
            **os.environ, "DATABASE_URL": f"{base}/{DB}", "REDIS_URL": redis_url,
            "DJANGO_SETTINGS_MODULE": "portal.settings.dev", "DEBUG": "1", "PYTHONPATH": str(ROOT),
            "PORTAL_CHANNEL_PREFIX": f"rp-e2e-{os.getpid()}-{_free_port()}", "PORTAL_LIVE_WATCHDOG_S": "1",
        }  # fmt: skip
        out = self.python(SEED).split()
        self.session, self.rack_id, self.card_id = out[-3], int(out[-2]), int(out[-1])
        self.port = _free_port()
        self.server = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "portal.asgi:application", "--host", "127.0.0.1",
             "--port", str(self.port), "--log-level", "warning"],
            cwd=ROOT, env=self.env,
        )  # fmt: skip
        _wait_port(self.port)

    def python(self, code: str, *args: str) -> str:
        done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    def ingest(self, temperature: float) -> None:
        self.python(INGEST, str(temperature))

    def close(self) -> None:
        self.server.terminate()
        self.server.wait(timeout=10)


@pytest.fixture
def browser_page() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser.new_context()
        browser.close()


def _open_rack(context: Any, stack: Stack) -> Any:
    context.add_cookies([{"name": "sessionid", "value": stack.session, "domain": "127.0.0.1", "path": "/"}])
    page = context.new_page()
    page.goto(f"http://127.0.0.1:{stack.port}/inventory/racks/{stack.rack_id}/")
    page.wait_for_selector('#live-status[data-seq="snapshot"]', timeout=15000)
    return page


def test_a_hot_reading_turns_the_card_red_without_a_reload(browser_page: Any) -> None:
    stack = Stack(os.environ.get("LIVE_REDIS_URL", "redis://127.0.0.1:6379/7"))
    try:
        stack.ingest(50.0)
        page = _open_rack(browser_page, stack)
        page.evaluate("window.__marker = 'same page'")
        cell = f"#thermal-card-{stack.card_id}"
        assert "temp-critical" not in (page.get_attribute(cell, "class") or "")

        stack.ingest(96.0)

        page.wait_for_selector(f"{cell}.temp-critical", timeout=10000)
        assert page.evaluate("window.__marker") == "same page"
        assert "96" in page.inner_text(cell)
    finally:
        stack.close()


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")
def test_the_page_catches_up_after_redis_restarts(browser_page: Any, tmp_path: Path) -> None:
    port = _free_port()

    def start_redis() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                                 "--dir", str(tmp_path)], stdout=subprocess.DEVNULL)  # fmt: skip
        _wait_port(port)
        return proc

    redis = start_redis()
    stack = Stack(f"redis://127.0.0.1:{port}/0")
    try:
        stack.ingest(50.0)
        page = _open_rack(browser_page, stack)
        page.evaluate("window.__marker = 'same page'")
        cell = f"#thermal-card-{stack.card_id}"

        redis.send_signal(signal.SIGKILL)
        redis.wait()
        stack.ingest(97.0)  # committed while Redis is down: its push is lost
        time.sleep(1.5)
        assert "temp-critical" not in (page.get_attribute(cell, "class") or "")
        redis = start_redis()

        page.wait_for_selector(f"{cell}.temp-critical", timeout=20000)
        assert page.evaluate("window.__marker") == "same page"
    finally:
        stack.close()
        redis.terminate()
        redis.wait()


# -- My jobs: a job submitted on the loopback Slurm appears and changes state without a reload ----
JOBS_SEED = """
import json, sys, django; django.setup()
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from inventory.models import Cluster
from jobs.models import ClusterAccount
from portal.roles import user_set_role
lab = json.loads(sys.argv[1])
cluster, _ = Cluster.objects.update_or_create(name="e2e-lab", defaults={
    "backend": Cluster.Backend.SLURM_SSH, "ssh_host": lab["SLURM_LAB_SSH_HOST"],
    "ssh_port": int(lab["SLURM_LAB_SSH_PORT"]), "ssh_user": lab["SLURM_LAB_SSH_USER"],
    "ssh_host_key": lab["SLURM_LAB_SSH_HOST_KEY"], "ssh_key_path": lab["SLURM_LAB_SSH_KEY"]})
user, created = User.objects.get_or_create(username="e2e-alice")
if created:
    user_set_role(user, "researcher")
ClusterAccount.objects.get_or_create(user=user, cluster=cluster, defaults={"username": "alice"})
s = SessionStore()
s["_auth_user_id"] = str(user.pk)
s["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
s["_auth_user_hash"] = user.get_session_auth_hash()
s.create()
print(s.session_key, cluster.pk)
"""

# Submit as alice (the action runs eagerly: sbatch over SSH), then sync the cluster as the beat
# would until the job has finished: every sync's on-commit signal is pushed by this process.
SUBMIT_AND_SYNC = """
import sys, time, django; django.setup()
from django.contrib.auth.models import User
from inventory.models import Cluster
from jobs.models import Job
from jobs.services import job_submit
from jobs.sync import cluster_sync
cluster = Cluster.objects.get(pk=int(sys.argv[1]))
user = User.objects.get(username="e2e-alice")
action = job_submit(user=user, cluster=cluster, name=sys.argv[2], script="#!/bin/bash\\nsleep 3\\n",
                    partition="debug")
deadline = time.monotonic() + 90
while time.monotonic() < deadline:
    cluster_sync(cluster)
    if Job.objects.filter(cluster=cluster, name=sys.argv[2], state="COMPLETED").exists():
        break
    time.sleep(0.5)
time.sleep(1.0)  # the flusher sends the last push
"""


@pytest.mark.slurm
def test_a_submitted_job_appears_and_changes_state_on_my_jobs_without_a_reload(
    browser_page: Any, slurm_lab: dict[str, str], tmp_path: Path
) -> None:
    import json

    stack = Stack(os.environ.get("LIVE_REDIS_URL", "redis://127.0.0.1:6379/7"))
    writer = None
    try:
        session, cluster_id = stack.python(JOBS_SEED, json.dumps(slurm_lab)).split()[-2:]
        browser_page.add_cookies(
            [{"name": "sessionid", "value": session, "domain": "127.0.0.1", "path": "/"}]
        )
        page = browser_page.new_page()
        page.goto(f"http://127.0.0.1:{stack.port}/jobs/")
        # live.js marks the table once its socket is open (the consumer joined its groups before)
        page.wait_for_selector("#job-table[data-live-open]", state="attached", timeout=15000)
        page.evaluate("window.__marker = 'same page'")
        name = f"e2e-{os.getpid()}-{int(time.time())}"
        assert name not in page.inner_text("#job-table")

        log = (tmp_path / "writer.log").open("w")
        writer = subprocess.Popen(
            [sys.executable, "-c", SUBMIT_AND_SYNC, cluster_id, name], cwd=ROOT,
            env={**stack.env, "CELERY_TASK_ALWAYS_EAGER": "1", "PORTAL_LIVE_AUTOFLUSH": "1"},
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip

        row = page.locator("#job-rows tr", has_text=name)
        row.wait_for(timeout=60000)
        seen = {(row.get_attribute("class") or "").removeprefix("state-")}
        page.wait_for_selector(f'#job-rows tr.state-completed:has-text("{name}")', timeout=90000)
        seen.add("completed")

        assert page.evaluate("window.__marker") == "same page"
        assert seen & {"pending", "running"}, seen
        assert row.count() == 1
        assert "COMPLETED" in row.inner_text()
        assert writer.wait(timeout=60) == 0, (tmp_path / "writer.log").read_text()[-2000:]
    finally:
        if writer is not None and writer.poll() is None:
            writer.terminate()
            writer.wait(timeout=10)
        stack.close()
