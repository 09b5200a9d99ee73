"""The demo loop on the real PostgreSQL: seed, users, sync, telemetry through ingest, jobs and faults."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 6, 1, 10, 0, tzinfo=UTC)


@pytest.fixture
def demo(settings, tmp_path):
    """The seeded demo with its users, an eager Celery and simulators that move only when told."""
    yield from _demo(settings, tmp_path)


@pytest.fixture
def demo_one_clock(settings, tmp_path):
    """The same, but the simulated clusters run on the loop's clock, as in the demo (the wall clock):
    a job's start and end compare with its cards' telemetry."""
    yield from _demo(settings, tmp_path, one_clock=True)


def _demo(settings, tmp_path, *, one_clock=False):
    from inventory.seed import seed_demo
    from jobs.backends import simulator_reset
    from portal.celery import app
    from portal.demo.accounts import demo_users_ensure
    from portal.demo.simulation import DemoSimulation

    settings.PORTAL_SIMULATOR_REALTIME = False
    settings.PORTAL_CLUSTER_BACKEND_OVERRIDE = "simulator"
    old = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager, app.conf.task_eager_propagates = True, True
    from monitoring.services.ingest import series_cache_clear

    series_cache_clear()  # series ids of earlier tests' (flushed) rows
    _default_alert_rules()  # a transactional test's flush removed the migration's rows
    simulator_reset()
    seed_demo()
    creds = demo_users_ensure(tmp_path / "credentials.json")
    sim = DemoSimulation(seed=1, first_fault_after=10_000)
    sim.clock = lambda: timezone_now(sim)
    if one_clock:
        sim.cluster_clock = sim.clock
    sim.setup()
    sim.creds = creds
    yield sim
    app.conf.task_always_eager, app.conf.task_eager_propagates = old
    simulator_reset()


def _default_alert_rules():
    from monitoring.defaults import alert_rules_ensure_defaults
    from monitoring.models import AlertRule

    alert_rules_ensure_defaults(AlertRule)


def timezone_now(sim):
    from django.utils import timezone

    return max(T0, timezone.now()) + timedelta(seconds=sim.elapsed)


def _sim(name):
    from inventory.models import Cluster
    from jobs.backends import simulator_get

    return simulator_get(Cluster.objects.get(name=name))


def _latest(hostname, metric):
    from monitoring.models import LatestValue

    return {
        lv.series.card_ref: lv.value
        for lv in LatestValue.objects.filter(
            series__node__hostname=hostname, series__metric=metric
        ).select_related("series")
    }


def test_users_are_created_once_with_stable_passwords(demo, tmp_path):
    from django.contrib.auth import authenticate

    from jobs.models import ClusterAccount
    from portal.demo.accounts import demo_users_ensure

    # when the demo starts a second time
    again = demo_users_ensure(tmp_path / "credentials.json")
    # then the printed logins are the same and work
    assert again == demo.creds
    assert authenticate(username="admin", password=again["admin"]).is_superuser
    assert authenticate(username="researcher", password=again["researcher"]) is not None
    assert authenticate(username="bob", password="") is None
    assert sorted(ClusterAccount.objects.filter(user__username="researcher").values_list("cluster__name", "username")) == [
        ("bench", "alice"), ("gb10-desk", "alice"), ("h100-pod", "alice"), ("rig-01", "alice"),
    ]  # fmt: skip
    assert oct((tmp_path / "credentials.json").stat().st_mode & 0o777) == "0o600"


def test_setup_builds_a_card_model_per_inventory_card(demo):
    formats = {n.hostname: (n.fmt, len(n.cards)) for n in demo.nodes}
    assert formats == {
        "gb10-a": ("nvidia-smi-csv", 1), "gb10-b": ("nvidia-smi-csv", 1),
        "gpu01": ("nvidia-smi-csv", 8), "gpu02": ("nvidia-smi-csv", 8), "gpu03": ("nvidia-smi-csv", 8),
        "gpu04": ("dcgm-exporter", 8), "rig01": ("tt-smi", 4), "bench01": ("tt-smi", 2),
    }  # fmt: skip
    rig = next(n for n in demo.nodes if n.hostname == "rig01")
    # the guide's six-cable mesh: every card has three cabled QSFP ports, two Ethernet channels each
    assert [c.link_ports for c in rig.cards] == [{"QSFP1": (0, 1), "QSFP2": (2, 3), "QSFP3": (4, 5)}] * 4


def test_a_tick_syncs_submits_and_ingests_telemetry_for_every_node(demo):
    from jobs.models import Action, Job, NodeState

    # when the loop runs its first ticks
    demo.tick(0)
    demo.tick(5)
    # then jobs were submitted as the demo researchers, one per cluster, and synced
    assert sorted(Action.objects.values_list("cluster__name", "status")) == [
        ("gb10-desk", "succeeded"), ("h100-pod", "succeeded"), ("rig-01", "succeeded"),
    ]  # fmt: skip
    assert sorted(Job.objects.values_list("cluster__name", "state")) == [
        ("gb10-desk", "RUNNING"), ("h100-pod", "RUNNING"), ("rig-01", "RUNNING"),
    ]  # fmt: skip
    assert NodeState.objects.filter(node__hostname="rig01").get().gpus_alloc == 4
    # and every compute node's cards report through the parsers and the ingest service
    for node in demo.nodes:
        temps = _latest(node.hostname, "temperature_c")
        assert len(temps) == len(node.cards), node.hostname
    assert _latest("rig01", "link_up")  # the tt-smi snapshot carries the QSFP link state


def test_cards_under_load_heat_up_and_the_rig_runs_hottest(demo):
    demo.tick(0)
    for _ in range(30):
        demo.tick(10)
    rig = _latest("rig01", "temperature_c")
    pod = [
        t for host in ("gpu01", "gpu02", "gpu03", "gpu04") for t in _latest(host, "temperature_c").values()
    ]
    assert min(rig.values()) > 65  # four loaded p150a in the mining chassis
    assert 55 < max(pod) < min(rig.values())  # the loaded H100s in a proper server run cooler


def test_overheat_fault_opens_the_temperature_alert(demo):
    from monitoring.models import Alert

    demo.tick(0)
    # when a fan fails on the loaded rig
    demo._fault_overheat(seconds=10_000)
    for _ in range(40):
        demo.tick(10)
    # then the card passes 85 °C and the default rule fires for that card only
    alerts = Alert.objects.filter(rule__metric="temperature_c").select_related("card")
    assert [(a.card.node.hostname, a.card.pci_bus_id) for a in alerts] == [("rig01", "0000:03:00.0")]
    assert _latest("rig01", "temperature_c")["0000:03:00.0"] > 85


def test_link_flap_records_link_events_and_the_job_fails_with_an_nccl_timeout(demo):
    from monitoring.models import Event

    demo.tick(0)
    demo.tick(5)
    rig_job = next(j for j in _sim("rig-01").list_jobs() if j.state == "RUNNING")
    # when the QSFP link between cards A and B flaps
    demo._fault_link_flap(seconds=12)
    demo.tick(5)
    _sim("rig-01").advance(5)
    for _ in range(4):
        demo.tick(5)
    # then both ends logged both channels of their QSFP1 going down and up again
    events = Event.objects.filter(node__hostname="rig01").select_related("card")
    kinds = sorted((e.card_ref, e.kind, e.data["labels"]) for e in events)
    assert kinds == [
        (bus, kind, f"port={ch}")
        for bus in ("0000:01:00.0", "0000:02:00.0") for kind in ("link_down", "link_up") for ch in (0, 1)
    ]  # fmt: skip
    # and those channels land on the mesh's A/QSFP1 <-> B/QSFP1 cable
    from inventory.links import cable_for_link

    cables = {cable_for_link(e.node_id, e.card_id, e.data["labels"].removeprefix("port=")) for e in events}
    assert len(cables) == 1 and None not in cables
    ends = sorted(
        (t.port.card.slot, t.port.name) for t in cables.pop().terminations.select_related("port__card")
    )
    assert ends == [("A", "QSFP1"), ("B", "QSFP1")]
    # and the rig's running job failed with the NCCL watchdog line in its output
    from jobs.models import Job

    assert Job.objects.get(cluster__name="rig-01", job_id=rig_job.job_id).state == "FAILED"
    output = _sim("rig-01").read_job_output(rig_job.job_id, as_user=rig_job.user)
    assert "Watchdog caught collective operation timeout" in output


def test_node_down_fault_stops_its_telemetry_until_it_comes_back(demo):
    from inventory.models import Node

    demo.tick(0)
    demo.tick(5)
    # when gpu03 stops responding
    demo._fault_node_down(seconds=60)
    demo.tick(5)
    assert Node.objects.get(hostname="gpu03").slurm_state.startswith("down")
    stale = dict(_latest("gpu03", "temperature_c"))
    before = _latest("gpu01", "power_w")
    for _ in range(3):
        demo.tick(5)
    # then the portal hears nothing from it while others keep reporting
    from monitoring.models import LatestValue

    newest = LatestValue.objects.filter(series__node__hostname="gpu03").order_by("-ts").first().ts
    assert newest < LatestValue.objects.filter(series__node__hostname="gpu01").order_by("-ts").first().ts
    assert stale == _latest("gpu03", "temperature_c")
    assert before.keys() == _latest("gpu01", "power_w").keys()
    # and after the undo it is back in service
    for _ in range(9):
        demo.tick(5)
    assert not Node.objects.get(hostname="gpu03").slurm_state.startswith("down")
    assert any("gpu03: back up" in line for line in demo.log)


def test_the_bench_burn_in_rejects_the_card_with_a_bad_lead(demo_one_clock):
    from inventory.models import Card
    from jobs.models import BurnInResult, BurnInRun

    # given the bench's two received second-hand cards, one of them on a sagging 8-pin lead
    assert sorted(Card.objects.filter(node__hostname="bench01").values_list("slot", "status")) == [
        ("A", "received"), ("B", "received"),
    ]  # fmt: skip
    demo = demo_one_clock
    demo.burnin_after, demo.burnin_minutes = 0.0, 2
    # when the loop runs until the burn-in's job has ended and the run has its verdicts
    for _ in range(60):
        demo.tick(5)
        run = BurnInRun.objects.filter(node__hostname="bench01").first()
        if run is not None and not run.is_active:
            break
    # then the steady card is accepted and the one whose power dips is rejected, with the evidence
    assert run is not None and run.status == "failed", (run.error, demo.log[-5:])
    assert dict(Card.objects.filter(node__hostname="bench01").values_list("slot", "status")) == {
        "A": "accepted", "B": "rejected",
    }  # fmt: skip
    bad = BurnInResult.objects.get(run=run, card__slot="B")
    stable = next(x for x in bad.criteria if x["key"] == "power_stable")
    assert stable["status"] == "fail" and stable["counts"]["dips"] >= 1
    good = BurnInResult.objects.get(run=run, card__slot="A")
    assert {x["key"]: x["status"] for x in good.criteria}["power_stable"] == "pass"
    assert any("started burn-in" in line for line in demo.log)


def test_a_hung_card_is_healed_by_the_default_runbook_on_its_own(demo):
    from jobs.models import Action, RunbookRun

    demo.tick(0)
    # when a p150a's firmware hangs on the loaded rig
    demo._fault_card_hang()
    run = None
    for _ in range(120):
        _sim("rig-01").advance(10)  # the test's simulated clusters move only when advanced
        demo.tick(10)
        run = RunbookRun.objects.filter(node__hostname="rig01").first()
        if run is not None and not run.is_active:
            break
    # then the heartbeat check started the card-fault runbook, which reset that card and resumed the rig
    assert run is not None and run.status == "succeeded", run and run.summary
    assert run.requested_by is None and run.reason == "health check failing: Tenstorrent heartbeat and DRAM"
    reset = Action.objects.get(run=run, params__step="reset")
    assert "Resetting board at 0000:01:00.0 ... done" in reset.output
    assert not demo._node("rig01").cards[0].hung
    assert not next(n for n in _sim("rig-01").list_nodes() if n.name == "rig01").drained
    assert any("firmware beats again" in line for line in demo.log)
