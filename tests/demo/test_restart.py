"""The demo stopped and started again on the same database (PostgreSQL here, SQLite in the demo): the
simulated clusters continue what the database remembers, on one clock with the telemetry, and a
finished job's energy is measured from its cards' power."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


class Clock:
    """The one clock of a test: telemetry, the simulated clusters and the energy task read it."""

    def __init__(self) -> None:
        self.at = T0

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def world(settings, tmp_path, monkeypatch):
    from inventory.seed import seed_demo
    from jobs.backends import simulator_reset
    from monitoring.defaults import alert_rules_ensure_defaults
    from monitoring.models import AlertRule
    from monitoring.services.ingest import series_cache_clear
    from portal.celery import app
    from portal.demo.accounts import demo_users_ensure

    settings.PORTAL_SIMULATOR_REALTIME = False
    settings.PORTAL_SIMULATOR_CONTINUE = True
    settings.PORTAL_CLUSTER_BACKEND_OVERRIDE = "simulator"
    settings.PORTAL_ENERGY_SETTLE_S = 10
    clock = Clock()
    # the portal's own "now" (sync times, energy windows) is the test's clock too
    monkeypatch.setattr("django.utils.timezone.now", clock)
    old = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager, app.conf.task_eager_propagates = True, True
    series_cache_clear()
    alert_rules_ensure_defaults(AlertRule)
    simulator_reset()
    seed_demo()
    demo_users_ensure(tmp_path / "credentials.json")
    yield clock
    app.conf.task_always_eager, app.conf.task_eager_propagates = old
    simulator_reset()


def _start(clock: Clock):
    """What the demo does when it starts: a fresh simulation loop (and fresh simulators)."""
    from portal.demo.simulation import DemoSimulation

    sim = DemoSimulation(
        seed=1, first_fault_after=10_000, clock=clock, cluster_clock=clock, job_time_scale=0.25
    )
    sim.setup()
    return sim


def _run(sim, clock: Clock, seconds: float, step: float = 5.0) -> None:
    for _ in range(round(seconds / step)):
        clock.at += timedelta(seconds=step)
        sim.tick(step)


def _restart(clock: Clock, *, stopped_for: float):
    from jobs.backends import simulator_reset

    simulator_reset()  # the process ends: its simulators are gone, the database stays
    clock.at += timedelta(seconds=stopped_for)
    return _start(clock)


def _jobs(cluster: str) -> dict[int, str]:
    from jobs.models import Job

    return dict(Job.objects.filter(cluster__name=cluster).values_list("job_id", "state"))


def test_a_restarted_demo_resumes_running_jobs_and_continues_their_ids(world):
    from inventory.models import Cluster
    from jobs.backends import simulator_get
    from jobs.models import Job

    clock = world
    demo = _start(clock)
    _run(demo, clock, 30)
    running = {j.job_id for j in Job.objects.filter(cluster__name="h100-pod", state="RUNNING")}
    assert running
    before = Job.objects.count()
    # when the demo stops for 10 s and starts again
    demo = _restart(clock, stopped_for=10)
    _run(demo, clock, 30)
    # then the jobs that were running still run, with the times the database had
    sim = simulator_get(Cluster.objects.get(name="h100-pod"))
    listed = {j.job_id: j for j in sim.list_jobs()}
    for job in Job.objects.filter(job_id__in=running, cluster__name="h100-pod"):
        assert listed[job.job_id].start_time == job.start_time
        assert job.state in ("RUNNING", "COMPLETED")
    # and the new submissions got new ids: no (cluster, job id) twice, none reused
    pairs = Counter(Job.objects.values_list("cluster__name", "job_id"))
    assert Job.objects.count() > before
    assert [p for p, n in pairs.items() if n > 1] == []
    assert all(j.name for j in Job.objects.all())


def test_jobs_that_could_not_go_on_end_with_the_reason_and_the_nodes_keep_their_state(world):
    from inventory.models import Cluster, Node
    from jobs.backends import simulator_get
    from jobs.models import Job, JobTransition

    clock = world
    demo = _start(clock)
    _run(demo, clock, 20)
    simulator_get(Cluster.objects.get(name="h100-pod")).drain_node("gpu04", "bad DIMM")
    _run(demo, clock, 10)
    last_sync = Cluster.objects.get(name="rig-01").last_sync_ok_at
    rig_running = Job.objects.get(cluster__name="rig-01", state="RUNNING")
    # when the demo was stopped for an hour: every running job's time ran out meanwhile
    demo = _restart(clock, stopped_for=3600)
    _run(demo, clock, 10)
    # then they ended when the portal last heard of them, with the reason recorded
    rig_running.refresh_from_db()
    assert (rig_running.state, rig_running.state_reason, rig_running.end_time) == (
        "CANCELLED", "demo restarted", last_sync,
    )  # fmt: skip
    assert JobTransition.objects.filter(job=rig_running).latest("at").reason == "demo restarted"
    # and the drained node is still drained, by the same reason
    assert Node.objects.get(hostname="gpu04").slurm_reason == "bad DIMM"
    assert simulator_get(Cluster.objects.get(name="h100-pod")).list_nodes()[3].drained


def test_a_completed_rig_job_has_its_energy_from_the_tt_smi_power_readings(world):
    from jobs.models import Job
    from monitoring.models import JobEnergy

    clock = world
    demo = _start(clock)
    # the rig's first job (ttnn-llama-decode, 240 s at a quarter: 60 s) runs across a restart
    _run(demo, clock, 30)
    demo = _restart(clock, stopped_for=5)
    _run(demo, clock, 90)
    job = Job.objects.filter(cluster__name="rig-01", state="COMPLETED").order_by("job_id").first()
    assert job is not None and job.job_id == 1000
    energy = JobEnergy.objects.get(job=job)
    # then its cards' energy is the four p150a cards' board power over its run, all of it measured
    assert energy.coverage_pct > 90
    assert energy.details["nodes"][0]["card_series"] == 4
    seconds = (job.end_time - job.start_time).total_seconds()
    assert 55 <= seconds <= 65
    assert 4 * 60 * seconds / 3.6e6 < energy.card_kwh < 4 * 300 * seconds / 3.6e6  # 60-300 W a card
    assert energy.energy_kwh > energy.card_kwh
