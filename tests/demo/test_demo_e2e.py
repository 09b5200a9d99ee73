"""The README's first command, end to end: from a clean copy of the checkout in a fresh directory,
``scripts/demo`` serves the portal; headless Chromium logs in, opens every main page, sees a live
update arrive without a reload, and Ctrl-C stops the demo cleanly.

``DEMO_PYTHON`` makes the copy use this test's interpreter instead of creating .venv and installing
(the full install path is the default, and is what a newcomer runs).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def _need_chromium() -> None:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {CHROMIUM} is missing")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")


def _checkout_copy(dest: Path) -> Path:
    """The checkout as git sees it (tracked and not-ignored files), without .venv, .demo or caches."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, check=True, capture_output=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(base: str, proc: subprocess.Popen, log: Path, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"scripts/demo exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"no /healthz after {timeout:.0f} s:\n{log.read_text()[-4000:]}")


def _start_demo(copy: Path, log: Path, port: int, **extra: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_", "TEST_DATABASE"))}
    env.update(DEMO_PYTHON=sys.executable, DEMO_PORT=str(port), DEMO_TICK="1", **extra)
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(copy / "scripts" / "demo")], cwd=copy, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _stop(proc: subprocess.Popen, log: Path) -> str:
    """Ctrl-C, as a person stops it; returns the console output, checked for a clean stop."""
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=60) == 0
    out = log.read_text()
    assert out.rstrip().endswith("Rackpilot demo stopped.")
    assert "Traceback" not in out
    return out


@pytest.fixture
def demo(tmp_path):
    _need_chromium()
    copy = _checkout_copy(tmp_path / "rackpilot")
    port = _free_port()
    log = tmp_path / "demo.log"
    proc = _start_demo(copy, log, port)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base, proc, log)
        yield base, proc, log, copy
    finally:
        _kill(proc)


def _login(page, base: str, username: str, password: str) -> None:
    page.goto(f"{base}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("form [type=submit]")
    page.wait_for_url(f"{base}/")


def test_scripts_demo_serves_the_seeded_clusters_live_and_stops_cleanly(demo):
    from playwright.sync_api import sync_playwright

    base, proc, log, copy = demo
    # the command printed the URL and both logins
    text = log.read_text()
    assert f"Rackpilot demo: {base}" in text
    passwords = dict(re.findall(r"(admin|researcher)\s+login: \S+\s+password: (\S+)", text))
    assert set(passwords) == {"admin", "researcher"}
    # and it runs from the copy, with its own SQLite database
    assert (copy / ".demo" / "rackpilot.sqlite3").exists()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            _login(page, base, "admin", passwords["admin"])
            # the overview shows the three seed clusters
            for name in ("rig-01", "h100-pod", "gb10-desk"):
                page.get_by_role("link", name=name, exact=True).first.wait_for()
            # a live update arrives: the overview changes without a reload
            page.evaluate("window.__noReload = true")
            before = page.inner_text("#overview")
            page.wait_for_function(
                "before => document.querySelector('#overview').innerText !== before",
                arg=before,
                timeout=60_000,
            )
            assert page.evaluate("window.__noReload") is True
            # every main page (the navigation) opens
            links = page.eval_on_selector_all(
                "nav a[href^='/']", "els => els.map(e => e.getAttribute('href'))"
            )
            assert len(links) >= 10
            for href in dict.fromkeys(links):
                resp = page.goto(base + href)
                assert resp is not None and resp.status == 200, href
            # a node page, the rig's fabric page and a rack page of the seed
            page.goto(f"{base}/inventory/nodes/?q=rig01")
            page.get_by_role("link", name="rig01", exact=True).first.click()
            page.wait_for_load_state()
            assert "rig01" in page.title()
            page.goto(f"{base}/inventory/fabrics/")
            page.get_by_role("link", name=re.compile("rig-01")).first.click()
            page.wait_for_load_state()
            assert page.locator("svg").count() >= 1
            assert errors == []
            # a researcher sees their own jobs (the simulation submits as them)
            researcher = browser.new_page()
            _login(researcher, base, "researcher", passwords["researcher"])
            researcher.goto(f"{base}/jobs/")
            researcher.locator("table tbody tr").first.wait_for(timeout=60_000)
        finally:
            browser.close()

    # Ctrl-C stops it cleanly
    _stop(proc, log)


def _query(db: Path, sql: str, *args: object) -> list[tuple]:
    """Read the demo's SQLite database as it is now (read-only, beside the running demo)."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=20)) as conn:
        return conn.execute(sql, args).fetchall()


def _wait_for(predicate, what: str, proc: subprocess.Popen, log: Path, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"scripts/demo exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        value = predicate()
        if value:
            return value
        time.sleep(1)
    pytest.fail(f"no {what} after {timeout:.0f} s:\n{log.read_text()[-4000:]}")


JOBS = (
    "SELECT c.name, j.job_id, j.id, j.name, j.state FROM jobs_job j "
    "JOIN inventory_cluster c ON c.id = j.cluster_id"
)


def test_a_second_run_continues_the_world_of_the_first(tmp_path):
    """README: a second ./scripts/demo reuses the database - and the simulation goes on with it."""
    from playwright.sync_api import sync_playwright

    _need_chromium()
    copy = _checkout_copy(tmp_path / "rackpilot")
    db = copy / ".demo" / "rackpilot.sqlite3"
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    fast = {"DEMO_JOB_TIME_SCALE": "0.1"}  # the demo's jobs run for 12-42 s instead of 2-7 minutes
    # given a first run that stops (Ctrl-C) while its jobs run
    first_log = tmp_path / "first.log"
    proc = _start_demo(copy, first_log, port, **fast)
    try:
        _wait_healthy(base, proc, first_log)
        _wait_for(lambda: len(_query(db, JOBS + " WHERE j.state = 'RUNNING'")) >= 3, "running jobs", proc,
                  first_log, 90)  # fmt: skip
        _stop(proc, first_log)
    finally:
        _kill(proc)
    first = {(c, jid): state for c, jid, _pk, _name, state in _query(db, JOBS)}
    # when it is started again on the same .demo/
    log = tmp_path / "second.log"
    proc = _start_demo(copy, log, port, **fast)
    try:
        _wait_healthy(base, proc, log)
        # then a completed rig job's energy comes from its four p150a cards' power, fully measured
        energy = _wait_for(
            lambda: _query(
                db,
                "SELECT j.job_id, e.coverage_pct, e.card_kwh FROM monitoring_jobenergy e "
                "JOIN jobs_job j ON j.id = e.job_id JOIN inventory_cluster c ON c.id = j.cluster_id "
                "WHERE c.name = 'rig-01' AND j.state = 'COMPLETED'",
            ),
            "energy of a completed rig job", proc, log, 150,
        )  # fmt: skip
        job_id, coverage, card_kwh = energy[0]
        assert coverage > 90, energy
        assert card_kwh > 0
        # and no (cluster, job id) was given out twice; the first run's jobs are all still there
        rows = _query(db, JOBS)
        pairs = [(c, jid) for c, jid, *_rest in rows]
        assert len(pairs) == len(set(pairs))
        assert set(first) <= set(pairs)
        assert len(pairs) > len(first)
        text = log.read_text()
        assert re.search(r"rig-01 continues from the database: \d+ job\(s\) running", text), text[-3000:]
        # and the newest job that has started shows its own output on its page
        newest = _query(
            db, JOBS + " WHERE j.start_time IS NOT NULL ORDER BY j.submit_time DESC, j.id DESC LIMIT 1"
        )[0]
        cluster, job_id, pk, name, _state = newest
        assert (cluster, job_id) not in first
        passwords = dict(re.findall(r"(admin|researcher)\s+login: \S+\s+password: (\S+)", text))
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                page = browser.new_page()
                _login(page, base, "admin", passwords["admin"])
                page.goto(f"{base}/jobs/{pk}/")
                assert (
                    page.locator("h1").inner_text() == f"Job {job_id} · {name} on {cluster}"
                )  # ids repeat across clusters
                output = page.locator(f"#job-{pk}-output pre.output")
                output.wait_for(timeout=30_000)
                assert f"job {job_id} ({name}) started on" in output.inner_text()
                assert "no such job" not in page.content()
            finally:
                browser.close()
        _stop(proc, log)
    finally:
        _kill(proc)
