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


def test_energy_card_polls_until_the_figures_are_computed(
    sim_cluster: Any, researcher_user: Any, map_account: Any, client_as: Any
) -> None:
    from datetime import UTC, datetime

    # given a finished job of alice's whose energy is not computed yet
    map_account(researcher_user, sim_cluster, "alice")
    job = Job.objects.create(
        cluster=sim_cluster, job_id=78, name="train", user="alice", owner=researcher_user, state="COMPLETED",
        start_time=datetime(2026, 12, 1, 9, 0, tzinfo=UTC), end_time=datetime(2026, 12, 1, 9, 4, tzinfo=UTC),
    )  # fmt: skip
    c = client_as(researcher_user)
    # then its page's energy card asks for itself again
    page = c.get(f"/jobs/{job.pk}/").content.decode()
    assert f'hx-get="/jobs/{job.pk}/?part=energy" hx-trigger="every 5s"' in page
    r = c.get(f"/jobs/{job.pk}/", {"part": "energy"}, HTTP_HX_REQUEST="true").content.decode()
    assert r.lstrip().startswith('<section class="card" id="job-energy"') and "<html" not in r
    assert "Computed when the job has run" in r and 'hx-trigger="every 5s"' in r
    # and once the figures are in, the card shows them and stops asking
    JobEnergy.objects.create(
        job=job, energy_kwh=0.5, card_kwh=0.4, host_kwh=0.1, coverage_pct=99.6, energy_cost=Decimal("0.15"),
        hardware_cost=Decimal("0.10"), total_cost=Decimal("0.25"), hours=4 / 60,
    )  # fmt: skip
    r = c.get(f"/jobs/{job.pk}/", {"part": "energy"}, HTTP_HX_REQUEST="true").content.decode()
    assert "500 Wh" in r and "100 %" in r
    assert "hx-trigger" not in r


def test_a_job_that_never_ran_does_not_poll_for_energy(
    sim_cluster: Any, researcher_user: Any, map_account: Any, client_as: Any
) -> None:
    map_account(researcher_user, sim_cluster, "alice")
    job = Job.objects.create(
        cluster=sim_cluster, job_id=79, name="train", user="alice", owner=researcher_user, state="CANCELLED"
    )
    page = client_as(researcher_user).get(f"/jobs/{job.pk}/").content.decode()
    assert "?part=energy" not in page
