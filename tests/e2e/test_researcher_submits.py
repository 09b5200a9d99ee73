"""End to end in headless Chromium: a researcher logs in, submits from a template and sees the job.

Runs on the loopback Slurm lab when it is up (scripts/slurm-lab/start.sh), else on a simulator cluster;
under CI=true always on the lab (a missing lab fails the test).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from tests.clusters import lab_cluster_create
from tests.lab import LAB_DIR, ensure_lab, in_ci

CHROMIUM = "/usr/bin/chromium"
LAB_ENV = LAB_DIR / "env"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _eager(settings, celery_eager):
    from jobs.backends import simulator_reset

    settings.PORTAL_SIMULATOR_REALTIME = True
    simulator_reset()
    yield
    simulator_reset()


@contextlib.contextmanager
def _browser():
    """Playwright's sync API. Its event loop gives the ORM calls made in the block connections of
    their own (asgiref's context-local storage): they are closed when the block ends, or they
    would outlive the test database."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {CHROMIUM} is missing")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    from django.db import connections
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        try:
            yield pw
        finally:
            connections.close_all()


def _cluster():
    from inventory.choices import NodeRole
    from inventory.models import Card, CardModel, Cluster, Node
    from jobs.sync import cluster_sync

    if LAB_ENV.exists() or in_ci():  # under CI=true the lab is required, never swapped for the simulator
        cluster = lab_cluster_create(ensure_lab(), name="lab-e2e")
    else:
        cluster = Cluster.objects.create(name="sim-e2e", backend=Cluster.Backend.SIMULATOR)
    model = CardModel.objects.create(vendor="Fake", name="fake-e2e", tdp_w=100)
    for name in ("node1", "node2", "node3", "node4"):
        node = Node.objects.create(
            hostname=f"{name}-e2e", slurm_name=name, cluster=cluster, role=NodeRole.COMPUTE
        )
        for slot in range(4):
            Card.objects.create(node=node, card_model=model, slot=str(slot))
    result = cluster_sync(cluster)
    assert result.ok, result.error
    return cluster


def test_researcher_logs_in_submits_from_a_template_and_sees_the_job(live_server, make_user, monkeypatch):
    from jobs.models import ClusterAccount, Job
    from jobs.seed import SINGLE_NODE_GPU, jobs_seed_templates

    alice = make_user("alice", "researcher")
    cluster = _cluster()
    ClusterAccount.objects.create(user=alice, cluster=cluster, username="alice")
    jobs_seed_templates()
    # Playwright's sync API keeps an event loop on this thread; the ORM reads below are plain sync code.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with _browser() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        page.set_default_timeout(20_000)
        page.goto(f"{live_server.url}/login/")
        page.fill("input[name=username]", "alice")
        page.fill("input[name=password]", "pw-alice")
        page.press("input[name=password]", "Enter")
        page.wait_for_url(f"{live_server.url}/")
        page.goto(f"{live_server.url}/jobs/submit/")
        page.click(f"text={SINGLE_NODE_GPU}")
        page.wait_for_url("**/jobs/submit/?template=*")
        assert page.is_disabled("#id_nodes")  # locked by the template
        page.fill("#id_name", "e2e-job")
        page.fill("#id_work_dir", "/tmp")
        page.press("#id_work_dir", "Tab")  # inline validation runs on change
        page.wait_for_load_state("networkidle")
        assert page.locator("#submit-form .errors").count() == 0
        page.click("button[type=submit].primary")
        page.wait_for_url("**/jobs/actions/*/")
        page.click("text=Go to job")  # appears when the action has submitted the job
        page.wait_for_url("**/jobs/*/")
        job = Job.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))
        assert job.name == "e2e-job"
        assert page.inner_text("h1").startswith(f"Job {job.job_id}")
        page.goto(f"{live_server.url}/jobs/")
        assert page.locator(f"#job-{job.pk}").inner_text().startswith(str(job.job_id))
        browser.close()
    assert job.user == "alice" and job.owner_id == alice.pk
