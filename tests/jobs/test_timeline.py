"""The incident timeline: one chronological merge of Slurm transitions, actions and who asked,
alerts, telemetry events, readiness changes and edits, per job, node, card and cable; filters; the
same entries in the API; what researchers may not see stays out."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from inventory.models import Cable, Card, Node
from inventory.readiness import readiness_set
from jobs import services
from jobs.models import Job, JobTransition, NodeTransition
from jobs.report import services as report_services
from jobs.report import timeline as tl
from monitoring.models import Alert
from portal.demo.nodes import NodeSim
from tests.jobs.telemetry import NCCL_LOG, feed, make_job, sims, start_ago

pytestmark = pytest.mark.django_db


def _flap(t: int, s: NodeSim) -> None:
    for card in s.cards[:2]:  # rig01/A and rig01/B lose QSFP1 for 30 s, two minutes in
        if t == 120:
            card.links_down.add(0)
        if t == 150:
            card.links_down.discard(0)


def _rig_incident(rig: Any, operator: Any, owner: Any) -> Any:
    """A job on rig01 that failed of a flapping cable; card C ran hot; the operator drained the node."""
    start = start_ago(30)
    sim = sims("rig01")
    sim.cards[2].fan_fault = True
    feed(sim, start, 900, at=_flap)
    job = make_job(rig, "rig01", state="FAILED", start=start, minutes=15, exit_code=1, gpus=4, owner=owner)
    JobTransition.objects.create(job=job, from_state="RUNNING", to_state="FAILED", at=job.end_time)
    rig01 = Node.objects.get(hostname="rig01")
    NodeTransition.objects.create(
        node=rig01, from_state="alloc", to_state="drained", reason="fan", at=job.end_time
    )
    services.node_drain_request(rig01, user=operator, reason="fan on card C")
    return job


def test_a_node_timeline_merges_every_source_newest_first(rig, operator_user, researcher_user) -> None:
    job = _rig_incident(rig, operator_user, researcher_user)
    rig01 = Node.objects.get(hostname="rig01")
    readiness_set(
        rig01, key="above_4g_decoding", status="fail", detail="Above 4G decoding off", user=operator_user
    )

    entries = tl.timeline_list(tl.scope_for("node", rig01), user=operator_user)

    assert [e.ts for e in entries] == sorted((e.ts for e in entries), reverse=True)
    sources = {e.source for e in entries}
    assert sources == {"slurm", "action", "alert", "event", "readiness"}
    titles = [e.title for e in entries]
    assert f"Job {job.slurm_id}: RUNNING → FAILED" in titles
    assert "Node rig01: alloc → drained" in titles
    drain = next(e for e in entries if e.source == "action")
    assert drain.title == "Drain rig01 requested" and drain.who == "otto" and drain.detail == "fan on card C"
    assert any(e.title.startswith("Alert firing: GPU temperature above 85 °C on rig01/C") for e in entries)
    flap = [e for e in entries if e.source == "event" and e.title.startswith("link down")]
    assert {e.target for e in flap} == {"rig01/A", "rig01/B"}
    assert all(e.detail == "cable A1-B1 (rig01/A QSFP1 ↔ rig01/B QSFP1)" for e in flap)
    ready = next(e for e in entries if e.source == "readiness")
    assert ready.severity == "critical" and ready.detail == "Above 4G decoding off"


def test_filters_by_source_and_severity(rig, operator_user, researcher_user) -> None:
    _rig_incident(rig, operator_user, researcher_user)
    scope = tl.scope_for("node", Node.objects.get(hostname="rig01"))

    events = tl.timeline_list(scope, user=operator_user, sources=["event"])
    warnings = tl.timeline_list(scope, user=operator_user, min_severity="warning")

    assert events and {e.source for e in events} == {"event"}
    assert warnings and {e.severity for e in warnings} <= {"warning", "critical"}
    assert len(warnings) < len(tl.timeline_list(scope, user=operator_user))


def test_a_cable_shows_its_flap_history_and_being_marked_faulty(rig, operator_user, researcher_user) -> None:
    job = _rig_incident(rig, operator_user, researcher_user)
    from django.core.cache import cache

    cache.set(f"jobs:output:{job.pk}", {"text": NCCL_LOG, "error": "", "at": timezone.now(), "final": True})
    report_services.job_suspect_cable_mark_faulty(job, user=operator_user)
    cable = Cable.objects.get(label="A1-B1")
    other = Cable.objects.get(label="C2-D2")

    entries = tl.timeline_list(tl.scope_for("cable", cable), user=operator_user)

    downs = [e for e in entries if e.source == "event" and e.title.startswith("link down")]
    assert len(downs) == 2 and {e.target for e in downs} == {"rig01/A", "rig01/B"}
    change = next(e for e in entries if e.source == "change")
    assert change.detail == f"report of job {job.job_id} on rig-01: nccl_link" and change.who == "otto"
    assert not [
        e for e in tl.timeline_list(tl.scope_for("cable", other), user=operator_user) if e.source == "event"
    ]


def test_a_job_timeline_covers_its_run_on_its_nodes(rig, operator_user, researcher_user) -> None:
    job = _rig_incident(rig, operator_user, researcher_user)

    entries = tl.timeline_list(tl.scope_for("job", job), user=researcher_user)

    assert {"slurm", "event", "alert"} <= {e.source for e in entries}
    assert all(job.start_time - dt.timedelta(minutes=5) <= e.ts for e in entries)
    card = Card.objects.get(node__hostname="rig01", slot="A")
    card_entries = tl.timeline_list(tl.scope_for("card", card), user=operator_user, sources=["event"])
    assert card_entries and {e.target for e in card_entries} == {"rig01/A"}


def test_researchers_see_no_alerts_events_or_other_jobs_on_a_node(
    rig, operator_user, researcher_user, make_user
) -> None:
    _rig_incident(rig, operator_user, make_user("bob", "researcher"))
    scope = tl.scope_for("node", Node.objects.get(hostname="rig01"))

    entries = tl.timeline_list(scope, user=researcher_user)

    assert {e.source for e in entries} <= {"slurm", "readiness"}
    assert not [e for e in entries if e.title.startswith("Job ")]


def test_the_page_and_the_api_list_the_same_entries(
    rig, operator_user, researcher_user, client, api_as
) -> None:
    _rig_incident(rig, operator_user, researcher_user)
    rig01 = Node.objects.get(hostname="rig01")
    client.force_login(operator_user)

    page = client.get(reverse("jobs:timeline", args=["node", rig01.pk]), {"source": "action"})
    body = (
        api_as(operator_user).get(f"/api/inventory/nodes/{rig01.pk}/timeline/", {"source": "action"}).json()
    )

    assert page.status_code == 200
    assert [e["title"] for e in body] == ["Drain rig01 requested"]
    assert "Drain rig01 requested" in page.content.decode()
    assert body[0]["url"].startswith("/jobs/actions/")
    bad = api_as(operator_user).get(f"/api/inventory/nodes/{rig01.pk}/timeline/", {"source": "gossip"})
    assert bad.status_code == 400 and "source" in bad.json()
    job_api = api_as(operator_user).get(
        f"/api/jobs/jobs/{Job.objects.get().pk}/timeline/", {"source": "slurm"}
    )
    assert [e["source"] for e in job_api.json()] and {e["source"] for e in job_api.json()} == {"slurm"}
    assert Alert.objects.exists()
