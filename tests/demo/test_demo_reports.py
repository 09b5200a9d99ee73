"""The demo's faults and its two wasteful jobs each end in a job report that names the right cause
and object: the QSFP flap (cable A1-B1), the overheating card (rig01/C), the DGX that went down
(gpu03), the notebook that holds 8 GPUs and uses 2, the training job waiting on its disk."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 6, 1, 10, 0, tzinfo=UTC)


@pytest.fixture
def demo(settings, tmp_path):
    """The seeded demo (as tests/demo/test_simulation.py sets it up) whose simulated clusters run on
    the clock the telemetry is stamped with, as they do on the wall clock in the real demo."""
    from django.utils import timezone

    from inventory.seed import seed_demo
    from jobs.backends import simulator_reset
    from monitoring.defaults import alert_rules_ensure_defaults
    from monitoring.models import AlertRule
    from monitoring.services.ingest import series_cache_clear
    from portal.celery import app
    from portal.demo.accounts import demo_users_ensure
    from portal.demo.simulation import DemoSimulation

    settings.PORTAL_SIMULATOR_REALTIME = False
    settings.PORTAL_CLUSTER_BACKEND_OVERRIDE = "simulator"
    old = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager, app.conf.task_eager_propagates = True, True
    series_cache_clear()
    alert_rules_ensure_defaults(AlertRule)
    simulator_reset()
    seed_demo()
    demo_users_ensure(tmp_path / "credentials.json")
    sim = DemoSimulation(seed=1, first_fault_after=10_000)
    start = max(T0, timezone.now())
    sim.clock = lambda: start + timedelta(seconds=sim.elapsed)
    sim.cluster_clock = sim.clock
    sim.setup()
    yield sim
    app.conf.task_always_eager, app.conf.task_eager_propagates = old
    simulator_reset()


def _run(demo, seconds: int, step: int = 5) -> None:
    for _ in range(seconds // step):
        demo.tick(step)


def _report(demo, job):
    """The report as the page would show it now (the demo's clock runs ahead of the wall clock here)."""
    from jobs.output import job_output_get, job_output_refresh
    from jobs.report.selectors import job_report_get

    job.refresh_from_db()
    job_output_refresh(job.pk)
    return job_report_get(job, output=job_output_get(job).text, now=demo.clock())


def _job(cluster: str, **filters):
    from jobs.models import Job

    return Job.objects.filter(cluster__name=cluster, **filters).order_by("-job_id").first()


def test_the_qsfp_flap_ends_in_a_report_naming_the_cable(demo):
    demo.tick(0)
    _run(demo, 10)
    running = _job("rig-01", state="RUNNING")
    assert running is not None

    demo._fault_link_flap(seconds=12)
    _run(demo, 30)

    failed = _job("rig-01", job_id=running.job_id)
    assert failed.state == "FAILED"
    top = _report(demo, failed).diagnosis[0]
    assert top.code == "nccl_link"
    assert top.suspect is not None and (top.suspect.kind, top.suspect.label) == ("cable", "A1-B1")
    assert "rig01/A QSFP1 ↔ rig01/B QSFP1" in top.title


def test_the_overheating_card_ends_in_a_note_naming_it(demo):
    demo.tick(0)
    _run(demo, 10)
    demo._fault_overheat(seconds=10_000)
    _run(demo, 200, step=10)

    job = _job("rig-01", start_time__isnull=False)
    notes = _report(demo, job).notes
    hot = next(n for n in notes if n.code == "thermal_throttle")
    assert hot.suspect is not None and hot.suspect.label == "rig01/C"


def test_the_dgx_that_went_down_ends_in_a_report_naming_it(demo):
    from portal.demo.simulation import JOB_MIX

    demo.tick(0)
    demo._submit(next(j for j in JOB_MIX if j.name == "dpo-ablation"))  # one DGX: the first free, gpu03
    _run(demo, 15)
    on_gpu03 = _job("h100-pod", state="RUNNING", nodes="gpu03")
    assert on_gpu03 is not None

    demo._fault_node_down()  # gpu03 stops responding; Slurm kills its job
    _run(demo, 15)

    report = _report(demo, _job("h100-pod", job_id=on_gpu03.job_id))
    assert report.facts.state == "NODE_FAIL"
    top = report.diagnosis[0]
    assert top.code == "node_down" and top.suspect is not None and top.suspect.label == "gpu03"


@pytest.mark.parametrize(
    ("name", "code", "title"),
    [
        ("notebook-8gpu", "idle_cards", "6 of 8 cards were idle the whole job"),
        ("vit-imagenet-1worker", "io_bound", "data loading is the bottleneck"),
    ],
)
def test_the_wasteful_demo_jobs_end_in_their_notes(demo, name, code, title):
    from portal.demo.simulation import JOB_MIX

    demo.tick(0)
    demo._submit(next(j for j in JOB_MIX if j.name == name))
    _run(demo, 120, step=10)

    job = _job("h100-pod", name=name, start_time__isnull=False)
    note = next(n for n in _report(demo, job).notes if n.code == code)
    assert title in note.title
