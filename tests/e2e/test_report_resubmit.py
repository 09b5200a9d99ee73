"""End to end in headless Chromium: a researcher opens her failed job's report and follows
"Resubmit excluding <node>" to a new job that runs elsewhere.

The job runs on the loopback Slurm lab (a simulator cluster without it, unless CI=true) and exits 1;
its node's kernel log (a recorded dmesg line, ingested as a node agent posts it) says a GPU fell
off the bus during it, so the report names that node.
"""

from __future__ import annotations

import time

import pytest

from tests.demo.test_demo_e2e import _login
from tests.e2e.test_researcher_submits import ARGS, CHROMIUM, _browser, _cluster, _eager  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCRIPT = "#!/bin/bash\necho 'step 10 loss=2.1'\nsleep 2\nexit 1\n"


def _until(cluster, predicate, what: str, seconds: float = 60):
    """Sync ``cluster`` until ``predicate()`` holds."""
    from jobs.sync import cluster_sync

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
        cluster_sync(cluster)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_failed_jobs_report_resubmits_it_excluding_the_suspect_node(
    live_server, make_user, monkeypatch, django_capture_on_commit_callbacks
) -> None:
    from jobs import services
    from jobs.models import Action, ClusterAccount, Job
    from monitoring.services import telemetry_ingest_text

    alice = make_user("alice", "researcher")
    cluster = _cluster()
    ClusterAccount.objects.create(user=alice, cluster=cluster, username="alice")
    with django_capture_on_commit_callbacks(execute=True):
        first = services.job_submit(user=alice, cluster=cluster, name="e2e-xid", script=SCRIPT, gpus=1,
                                    time_limit_minutes=5, work_dir="/tmp")  # fmt: skip
    job = _until(
        cluster,
        lambda: Job.objects.filter(submitted_by_action=first, state="FAILED").first(),
        "the job to fail",
    )
    node = cluster.nodes.get(slurm_name=job.nodes)
    line = (
        f"{job.start_time.isoformat()} {node.hostname} kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', "
        "name=<unknown>, GPU has fallen off the bus."
    )
    telemetry_ingest_text("kernel-log", line, node_hostname=node.hostname)

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with _browser() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        page.set_default_timeout(30_000)
        _login(page, live_server.url, "alice", "pw-alice")
        page.goto(f"{live_server.url}/jobs/{job.pk}/")
        report = page.locator(f"#job-{job.pk}-report")
        report.locator("text=Why it failed").wait_for()
        assert "Xid 79 on " in report.inner_text() and "GPU has fallen off the bus" in report.inner_text()
        page.click(f"text=Resubmit excluding {node.slurm_name}")
        page.wait_for_url("**/jobs/actions/*/")
        page.click("text=Go to job")
        page.wait_for_url("**/jobs/*/")
        new = Job.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))
        browser.close()

    action = Action.objects.get(pk=new.submitted_by_action_id)
    assert action.params["spec"]["exclude"] == [node.slurm_name] and action.requested_by == alice
    started = _until(cluster, lambda: Job.objects.filter(pk=new.pk).exclude(nodes="").first(), "it to start")
    assert started.nodes != node.slurm_name and new.pk != job.pk
