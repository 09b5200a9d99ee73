from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from monitoring.services import job_energy_compute, telemetry_ingest_samples
from monitoring.services.energy import integrate

pytestmark = pytest.mark.django_db
START = timezone.now().replace(microsecond=0) - dt.timedelta(hours=3)


def _t(seconds: float) -> dt.datetime:
    return START + dt.timedelta(seconds=seconds)


def test_trapezoid_integration_skips_gaps_and_clips_to_the_window() -> None:
    # 100 W then 200 W over 10 s = 1500 J; a 300 s gap is not bridged; the last pair is clipped at 330 s
    points = [(_t(0), 100.0), (_t(10), 200.0), (_t(310), 200.0), (_t(340), 200.0)]
    joules, covered = integrate(points, _t(0), _t(330), max_gap_s=60)
    assert covered == 30.0
    assert joules == 1500.0 + 200.0 * 20


def _job(inv: Any, owner: Any, nodes: str, gpus: int, hours: float, account: str = "ml") -> Any:
    from jobs.models import Job

    cluster = inv.cluster()
    return Job.objects.create(
        cluster=cluster,
        job_id=1000 + hash(nodes) % 1000,
        user=owner.username,
        owner=owner,
        account=account,
        state="COMPLETED",
        nodes=nodes,
        node_names=f",{nodes},",
        node_count=1,
        gpus=gpus,
        start_time=START,
        end_time=START + dt.timedelta(hours=hours),
    )


def test_job_energy_integrates_its_share_of_cards_and_host_with_gaps(
    inv: Any, researcher_user: Any, settings: Any
) -> None:
    # given a node with 2 cards (300 W each, sampled every 10 s, card B missing the second half hour)
    settings.PORTAL_ENERGY_TARIFF_PER_KWH = "0.50"
    settings.PORTAL_DEPRECIATION_MONTHS = 10
    settings.PORTAL_ENERGY_MAX_GAP_S = 60
    job = _job(inv, researcher_user, "gpu01", gpus=1, hours=1)
    node = inv.node("gpu01", cluster=job.cluster, purchase_cost=Decimal("6000"))
    node.chassis.base_power_w = 200
    node.chassis.save()
    inv.card(node, gpu_uuid="GPU-aaaaaaaa-0000", price="1000")
    inv.card(node, gpu_uuid="GPU-bbbbbbbb-0000", price="1000")
    samples = []
    for i in range(0, 361):
        samples.append(
            {
                "ts": _t(i * 10).isoformat(),
                "node": "gpu01",
                "card": "GPU-aaaaaaaa-0000",
                "metric": "power_w",
                "value": 300.0,
            }
        )
        if i <= 180:
            samples.append(
                {
                    "ts": _t(i * 10).isoformat(),
                    "node": "gpu01",
                    "card": "GPU-bbbbbbbb-0000",
                    "metric": "power_w",
                    "value": 300.0,
                }
            )
    telemetry_ingest_samples(samples)
    # when its energy is computed (the job held 1 of the 2 GPUs)
    energy = job_energy_compute(job)
    # then cards: (300 W x 3600 s + 300 W x 1800 s) x 1/2 = 0.225 kWh; host: 200 W x 1 h x 1/2 = 0.1 kWh
    assert energy.card_kwh == pytest.approx(0.225)
    assert energy.host_kwh == pytest.approx(0.1)
    assert energy.energy_kwh == pytest.approx(0.325)
    assert energy.coverage_pct == pytest.approx(75.0)
    assert energy.energy_cost == Decimal("0.1625")
    # hardware: 8000 / 10 months / 730 h x 1 h x 1/2
    assert energy.hardware_cost == Decimal("0.5479")
    assert energy.total_cost == Decimal("0.7104")
    assert energy.details["nodes"][0]["host_source"] == "base_load"


def test_energy_api_groups_and_hides_other_users_jobs(
    inv: Any, researcher_user: Any, make_user: Any, api: APIClient
) -> None:
    bob = make_user("bob", "researcher")
    for owner, nodes, account in [
        (researcher_user, "n1", "ml"),
        (researcher_user, "n2", "ml"),
        (bob, "n3", "cv"),
    ]:
        job = _job(inv, owner, nodes, gpus=0, hours=2, account=account)
        node = inv.node(nodes, cluster=job.cluster)
        node.chassis.base_power_w = 500
        node.chassis.save()
        job_energy_compute(job)
    # admin sees all, grouped by account: ml 2 jobs x 1 kWh, cv 1 kWh
    rows = api.get("/api/monitoring/energy/", {"group_by": "account"}).json()
    assert [(r["account"], r["jobs"], r["energy_kwh"]) for r in rows] == [("cv", 1, 1.0), ("ml", 2, 2.0)]
    # a researcher sees only their own jobs
    client = APIClient()
    client.force_authenticate(researcher_user)
    rows = client.get("/api/monitoring/energy/", {"group_by": "user"}).json()
    assert [(r["user"], r["jobs"]) for r in rows] == [("alice", 2)]
    rows = client.get("/api/monitoring/energy/", {"group_by": "month"}).json()
    assert rows[0]["jobs"] == 2
    assert client.get("/api/monitoring/energy/", {"group_by": "planet"}).status_code == 400
