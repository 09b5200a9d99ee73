from __future__ import annotations

from decimal import Decimal
from typing import Any

from jobs.models import Job
from monitoring.models import JobEnergy


def test_job_page_shows_energy_and_cost(
    sim_cluster: Any, researcher_user: Any, map_account: Any, client_as: Any
) -> None:
    # given a finished job of alice's with its energy computed
    map_account(researcher_user, sim_cluster, "alice")
    job = Job.objects.create(
        cluster=sim_cluster, job_id=77, name="train", user="alice", owner=researcher_user, state="COMPLETED"
    )
    JobEnergy.objects.create(
        job=job,
        energy_kwh=12.345,
        card_kwh=11.0,
        host_kwh=1.345,
        coverage_pct=80,
        energy_cost=Decimal("2.47"),
        hardware_cost=Decimal("5.10"),
        total_cost=Decimal("7.57"),
        hours=3.5,
    )
    # when she opens the job page
    body = client_as(researcher_user).get(f"/jobs/{job.pk}/").content.decode()
    # then the energy, its coverage warning and the costs are shown
    assert 'id="job-energy"' in body and "12.3 kWh" in body and "cards 11 kWh" in body
    assert "gaps in the power data are not bridged" in body
    assert "$7.57" in body and "$5.10" in body and "3.50 h" in body
