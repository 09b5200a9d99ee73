"""Burn-in verdicts from recorded telemetry: tt-smi snapshots, nvidia-smi CSV and kernel log lines in the
tools' real formats go through the real parsers and the ingest service, then the run's evaluation holds
each card against its model's criteria and moves it to accepted or rejected."""

from __future__ import annotations

import copy
import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from inventory.choices import CardStatus, PortKind
from inventory.links import P150_QSFP_CHANNELS
from inventory.models import Card, CardModel, Cluster, Node, PortTemplate
from inventory.services import cable_connect, card_save
from jobs.burnin.services import burnin_advance
from jobs.models import BurnInResult, BurnInRun, BurnInStatus, Job
from monitoring.services.ingest import telemetry_ingest_text

FIXTURES = Path(__file__).resolve().parents[1] / "parsers" / "fixtures"
TT_DEVICE = json.loads((FIXTURES / "tt_smi_4x_p150a.json").read_text())["device_info"][0]
MINUTES = 35


def tt_snapshot(hostname: str, cards: list[dict[str, Any]]) -> str:
    """``tt-smi -s`` JSON for the given cards (bus id, board power, temperature, heartbeat)."""
    devices = []
    for c in cards:
        dev = copy.deepcopy(TT_DEVICE)
        dev["board_info"]["bus_id"] = c["bus"]
        dev["telemetry"].update(
            board_power=f"{c['power']:5.1f}", asic_temperature=f"{c['temp']:.1f}", heartbeat=str(c["hb"]),
            aiclk=str(c.get("aiclk", 1350)),
        )  # fmt: skip
        dev["smbus_telem"]["ETH_LIVE_STATUS"] = hex(c.get("links", 0x3))  # QSFP1's two channels up
        devices.append(dev)
    return json.dumps(
        {"time": "2026-06-01T10:15:02.1", "host_info": {"Hostname": hostname}, "device_info": devices}
    )


def _node(cluster: Cluster, hostname: str) -> Node:
    return Node.objects.create(hostname=hostname, slurm_name=hostname, cluster=cluster)


def _run(node: Node, cards: list[Card], start: dt.datetime, end: dt.datetime, **job: Any) -> BurnInRun:
    """A run whose Slurm job ran from start to end (as the sync records it)."""
    row = Job.objects.create(
        cluster=node.cluster, job_id=4242 + node.pk, name="burnin", user="otto", state=job.get("state", "COMPLETED"),
        exit_code=job.get("exit_code", 0), start_time=start, end_time=end, node_names=f",{node.slurm_name},",
    )  # fmt: skip
    run = BurnInRun.objects.create(node=node, duration_minutes=MINUTES, program="tt-burnin", job=row)
    BurnInResult.objects.bulk_create(BurnInResult(run=run, card=card) for card in cards)
    return run


@pytest.fixture
def rig(db: Any) -> tuple[Node, list[Card]]:
    cluster = Cluster.objects.create(name="bench", backend=Cluster.Backend.SIMULATOR)
    model = CardModel.objects.create(
        vendor="Tenstorrent", name="Blackhole p150a", tdp_w=300, temperature_limit_c=95,
        list_price=Decimal("1400"), tflops_fp16=Decimal("387"),
        packaged_system="QuietBox", packaged_system_price=Decimal("12000"), packaged_system_cards=4,
    )  # fmt: skip
    for name, channels in P150_QSFP_CHANNELS.items():
        PortTemplate.objects.create(
            card_model=model, name=name, kind=PortKind.QSFP_DD, speed_gbps=800, eth_channels=list(channels)
        )
    node = _node(cluster, "rig02")
    cards = [
        card_save(
            Card(
                node=node,
                card_model=model,
                slot=slot,
                pci_bus_id=f"0000:0{i}:00.0",
                status=CardStatus.BURN_IN,
            ),
            user=None,
        )
        for i, slot in ((1, "A"), (2, "B"))
    ]
    a1, b1 = (card.ports.get(name="QSFP1") for card in cards)
    cable_connect(a_port=a1, b_port=b1, user=None, kind="dac")
    return node, cards


def _record_tt(node: Node, start: dt.datetime, *, lead_dips: bool) -> None:
    """One snapshot a minute: card A steady near 229 W; card B the same, but every fifth sample its
    board power dips to 118 W (a bad 8-pin lead: the voltage sags under load)."""
    for minute in range(MINUTES + 1):
        ts = start + dt.timedelta(minutes=minute)
        jitter = (minute % 3 - 1) * 1.5
        b_power = 118.0 if lead_dips and minute % 5 == 2 else 229.0 + jitter
        text = tt_snapshot(node.hostname, [
            {"bus": "0000:01:00.0", "power": 229.0 + jitter, "temp": 70.0 + jitter, "hb": 5000 + 120 * minute},
            {"bus": "0000:02:00.0", "power": b_power, "temp": 71.0, "hb": 6000 + 120 * minute},
        ])  # fmt: skip
        report = telemetry_ingest_text("tt-smi", text, node_hostname=node.hostname, ts=ts)
        assert report.stored > 0 and not report.unknown_cards, report.as_dict()


def _criteria(run: BurnInRun, card: Card) -> dict[str, str]:
    return {x["key"]: x["status"] for x in BurnInResult.objects.get(run=run, card=card).criteria}


def test_a_card_with_power_dips_from_a_bad_lead_is_rejected_and_the_steady_one_accepted(rig: Any) -> None:
    node, (good, bad) = rig
    start = timezone.now() - dt.timedelta(minutes=MINUTES + 5)
    _record_tt(node, start, lead_dips=True)
    run = _run(node, [good, bad], start, start + dt.timedelta(minutes=MINUTES))
    burnin_advance(run.pk)
    run.refresh_from_db()
    assert run.status == BurnInStatus.FAILED
    assert _criteria(run, good) == {
        "stress_job": "pass", "power_band": "pass", "power_stable": "pass", "temperature": "pass",
        "throttling": "pass", "errors": "pass", "heartbeat": "pass", "links": "pass",
    }  # fmt: skip
    assert _criteria(run, bad)["power_stable"] == "fail"
    assert {k: v for k, v in _criteria(run, bad).items() if v != "pass"} == {"power_stable": "fail"}
    stable = next(
        x for x in BurnInResult.objects.get(run=run, card=bad).criteria if x["key"] == "power_stable"
    )
    # minutes 7, 12 … 32: the dip at minute 2 falls in the warm-up (the first tenth of the run)
    assert stable["counts"]["dips"] == 6 and stable["low"] == 118.0 and stable["value"] > 8
    assert Card.objects.get(pk=good.pk).status == CardStatus.ACCEPTED
    bad.refresh_from_db()
    assert bad.status == CardStatus.REJECTED
    assert bad.events.first().reason == f"Burn-in #{run.pk} failed: Power stable (no dips)"
    burnin_advance(run.pk)  # a finished run is left alone
    assert bad.events.count() == 2  # added (in burn-in), rejected


def test_steady_cards_pass_and_a_second_evaluation_changes_nothing(rig: Any) -> None:
    node, cards = rig
    start = timezone.now() - dt.timedelta(minutes=MINUTES + 5)
    _record_tt(node, start, lead_dips=False)
    run = _run(node, cards, start, start + dt.timedelta(minutes=MINUTES))
    assert burnin_advance(run.pk).status == BurnInStatus.PASSED  # type: ignore[union-attr]
    assert [c.status for c in Card.objects.filter(pk__in=[c.pk for c in cards])] == [CardStatus.ACCEPTED] * 2


def test_no_telemetry_is_no_acceptance_and_a_crashed_stress_job_fails(rig: Any) -> None:
    node, (good, bad) = rig
    start = timezone.now() - dt.timedelta(minutes=MINUTES + 5)
    run = _run(node, [good, bad], start, start + dt.timedelta(minutes=MINUTES), state="FAILED", exit_code=1)
    burnin_advance(run.pk)
    crit = _criteria(run, good)
    assert crit["stress_job"] == "fail" and crit["power_band"] == "unmeasured"
    assert Card.objects.get(pk=good.pk).status == CardStatus.REJECTED


def test_a_cancelled_burn_in_gives_no_verdict(rig: Any) -> None:
    node, cards = rig
    start = timezone.now() - dt.timedelta(minutes=10)
    run = _run(node, cards, start, start + dt.timedelta(minutes=2), state="CANCELLED")
    burnin_advance(run.pk)
    run.refresh_from_db()
    assert run.status == BurnInStatus.ERROR and "cancelled" in run.error
    assert {c.status for c in Card.objects.filter(pk__in=[c.pk for c in cards])} == {CardStatus.RECEIVED}
    assert set(BurnInResult.objects.filter(run=run).values_list("verdict", flat=True)) == {"pending"}


def test_a_link_flap_during_the_run_fails_the_links(rig: Any) -> None:
    node, (good, bad) = rig
    start = timezone.now() - dt.timedelta(minutes=MINUTES + 5)
    _record_tt(node, start, lead_dips=False)
    flap = tt_snapshot(node.hostname, [
        {"bus": "0000:01:00.0", "power": 229.0, "temp": 70.0, "hb": 999_000, "links": 0x0},
        {"bus": "0000:02:00.0", "power": 229.0, "temp": 70.0, "hb": 999_000, "links": 0x0},
    ])  # fmt: skip
    telemetry_ingest_text(
        "tt-smi", flap, node_hostname=node.hostname, ts=start + dt.timedelta(minutes=MINUTES, seconds=30)
    )
    run = _run(node, [good, bad], start, start + dt.timedelta(minutes=MINUTES + 1))
    burnin_advance(run.pk)
    crit = _criteria(run, good)
    assert crit["links"] == "fail" and crit["power_stable"] == "pass"
    links = next(x for x in BurnInResult.objects.get(run=run, card=good).criteria if x["key"] == "links")
    assert links["counts"] == {"ports": 1, "ports_down": 1, "flaps": 2}  # both channels of QSFP1 went down


H100_ROW = (
    "{i}, {uuid}, 00000000:{bus}:00.0, NVIDIA H100 80GB HBM3, {temp}, 60, {power}, 700.00, 100, 40, 81559, "
    "70000, 1980, 2619, 5, 16, [N/A], 0, {dbe}, {mask}\n"
)


def test_nvidia_throttling_and_an_xid_reject_the_card(db: Any) -> None:
    cluster = Cluster.objects.create(name="pod", backend=Cluster.Backend.SIMULATOR)
    model = CardModel.objects.create(vendor="NVIDIA", name="H100 SXM 80GB", tdp_w=700, temperature_limit_c=87)
    node = _node(cluster, "gpu09")
    uuids = ["GPU-5e1f0c2a-77aa-4c1e-9d0b-1f2e3d4c5b6a", "GPU-1b2c3d4e-5f60-4718-8293-a4b5c6d7e8f9"]
    cards = [
        card_save(Card(node=node, card_model=model, slot=str(i), gpu_uuid=u, pci_bus_id=f"0000:{bus}:00.0",
                       status=CardStatus.BURN_IN), user=None)
        for i, (u, bus) in enumerate(zip(uuids, ("18", "2a"), strict=True))
    ]  # fmt: skip
    start = timezone.now() - dt.timedelta(minutes=MINUTES + 5)
    for minute in range(MINUTES + 1):
        hot = (
            minute >= 20
        )  # the second GPU's HW slowdown (0x8) from minute 20: 16 of 32 samples after warm-up
        text = H100_ROW.format(
            i=0, uuid=uuids[0], bus="18", temp=66, power=655.5, dbe=0, mask="0x0000000000000004"
        )
        text += H100_ROW.format(i=1, uuid=uuids[1], bus="2A", temp=76 if hot else 70, power=650.0, dbe=0,
                                mask="0x0000000000000008" if hot else "0x0000000000000004")  # fmt: skip
        telemetry_ingest_text(
            "nvidia-smi-csv", text, node_hostname=node.hostname, ts=start + dt.timedelta(minutes=minute)
        )
    xid_at = (start + dt.timedelta(minutes=25)).strftime("%Y-%m-%dT%H:%M:%S+0000")
    log = f"{xid_at} gpu09 kernel: NVRM: Xid (PCI:0000:2a:00): 79, pid=912, name=gpu_burn, GPU has fallen off the bus.\n"
    telemetry_ingest_text("kernel-log", log, node_hostname=node.hostname)
    run = _run(node, cards, start, start + dt.timedelta(minutes=MINUTES))
    burnin_advance(run.pk)
    first, second = (_criteria(run, card) for card in cards)
    assert first == {
        "stress_job": "pass", "power_band": "pass", "power_stable": "pass", "temperature": "pass",
        "throttling": "pass", "errors": "pass", "heartbeat": "not_applicable", "links": "not_applicable",
    }  # fmt: skip
    assert (second["throttling"], second["errors"], second["temperature"]) == ("fail", "fail", "pass")
    errors = next(
        x for x in BurnInResult.objects.get(run=run, card=cards[1]).criteria if x["key"] == "errors"
    )
    assert errors["counts"]["xid"] >= 1
    assert [c.status for c in Card.objects.filter(pk__in=[c.pk for c in cards]).order_by("slot")] == [
        CardStatus.ACCEPTED,
        CardStatus.REJECTED,
    ]


# ---------------------------------------------------------------------------- the record on pages and API


@pytest.fixture
def judged(rig: Any) -> tuple[BurnInRun, Card, Card]:
    node, (good, bad) = rig
    start = timezone.now() - dt.timedelta(minutes=MINUTES + 5)
    _record_tt(node, start, lead_dips=True)
    run = _run(node, [good, bad], start, start + dt.timedelta(minutes=MINUTES))
    burnin_advance(run.pk)
    return run, good, bad


def test_acceptance_api_gives_criteria_with_figures_and_economics(
    judged: Any, api_as: Any, researcher_user: Any
) -> None:
    run, _good, bad = judged
    res = api_as(researcher_user).get(f"/api/inventory/cards/{bad.pk}/acceptance/")
    assert res.status_code == 200
    body = res.json()
    assert (body["result"]["run"], body["result"]["verdict"]) == (run.pk, "fail")
    stable = next(c for c in body["result"]["criteria"] if c["key"] == "power_stable")
    assert (stable["status"], stable["fails"], stable["low"], stable["label"]) == (
        "fail", True, 118.0, "Power stable (no dips)",
    )  # fmt: skip
    economics = body["economics"]
    assert economics["cost"] == "1400.00" and economics["cost_is_list_price"] is True
    assert economics["energy_kwh"] >= 0 and economics["node"]["cards"] == 2
    assert economics["tflops_fp16_per_dollar"] == pytest.approx(387 / 1400)
    # the bench: a $0 host and two $1,400 cards against the $12,000 four-card packaged system
    assert economics["node"]["cost"] == "2800.00" and economics["packaged"]["tflops"] == "1548.0"
    assert economics["advantage"] == pytest.approx((774 / 2800) / (1548 / 12000))


@pytest.mark.parametrize("lang", ["en", "zh-hans"])
def test_card_page_and_printable_record_in_both_languages(
    judged: Any, client: Any, make_user: Any, lang: str
) -> None:
    run, _good, bad = judged
    words = {
        "en": ("Acceptance record", "Power stable (no dips)", "Fail", "Lifecycle", "Rejected"),
        "zh-hans": ("验收记录", "功耗稳定（无跌落）", "失败", "生命周期", "已拒收"),
    }[lang]
    for role in ("admin", "operator", "researcher"):
        user = make_user(f"{role}-{lang}", role)
        client.force_login(user)
        client.cookies["django_language"] = lang
        page = client.get(f"/inventory/cards/{bad.pk}/", HTTP_ACCEPT_LANGUAGE=lang).content.decode()
        for word in words:
            assert word in page, (role, lang, word)
        assert 'id="criterion-power_stable"' in page and "<polyline" in page
        assert (f'action="/inventory/cards/{bad.pk}/transition/"' in page) == (role != "researcher")
        assert (f'href="/jobs/burnin/{run.pk}/"' in page) == (role != "researcher")
        printable = client.get(f"/inventory/cards/{bad.pk}/acceptance/", HTTP_ACCEPT_LANGUAGE=lang)
        assert printable.status_code == 200 and words[0] in printable.content.decode()


def test_transition_on_the_page_refuses_with_the_field_error_and_then_moves(
    judged: Any, client: Any, operator_user: Any
) -> None:
    _run_row, _good, bad = judged
    client.force_login(operator_user)
    url = f"/inventory/cards/{bad.pk}/transition/"
    res = client.post(url, {"to_status": "in_service", "reason": "looks fine to me"}, HTTP_HX_REQUEST="true")
    assert res.status_code == 400 and "Select a valid choice" in res.content.decode()
    assert Card.objects.get(pk=bad.pk).status == CardStatus.REJECTED
    res = client.post(
        url, {"to_status": "rma", "reason": "lead replaced? no: back to the seller"}, HTTP_HX_REQUEST="true"
    )
    assert res.status_code == 204 and res["HX-Redirect"] == f"/inventory/cards/{bad.pk}/"
    assert Card.objects.get(pk=bad.pk).status == CardStatus.RMA
