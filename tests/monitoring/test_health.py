"""Health checks: each kind judged from stored telemetry or stored check-command output, flap damping,
the drain/resume ownership rule, transitions in the audit log, the admin API."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from monitoring import services
from monitoring.health.services import health_evaluate, health_probes_store
from monitoring.models import HealthCheck, NodeHealth
from tests.monitoring.conftest import H100_UUIDS, fixture_text

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(microsecond=0)


def _push(node: str, card: str, metric: str, value: float, *, ago: int = 0, **labels: str) -> None:
    sample: dict[str, Any] = {
        "ts": (NOW - dt.timedelta(seconds=ago)).isoformat(),
        "node": node,
        "card": card,
        "metric": metric,
        "value": value,
    }
    if labels:
        sample["labels"] = labels
    report = services.telemetry_ingest_samples([sample])
    assert report.stored == 1, report.as_dict()


def _pod(inv: Any, hostname: str = "gpu01", cards: int = 1) -> Any:
    from inventory.models import Cluster

    cluster = Cluster.objects.filter(name="pod").first() or Cluster.objects.create(
        name="pod", backend="simulator"
    )
    node = inv.node(hostname, cluster=cluster)
    for i in range(cards):
        inv.card(node, gpu_uuid=H100_UUIDS[i])
    return node


def _check(kind: str, *, consecutive: int = 1, drain: bool = False, **params: Any) -> HealthCheck:
    check = HealthCheck(name=f"{kind} check", kind=kind, params=params, consecutive=consecutive, drain=drain)
    check.full_clean()
    check.save()
    return check


def _state(check: HealthCheck, node: Any) -> NodeHealth:
    return NodeHealth.objects.get(health_check=check, node=node)


def test_cards_enumerated_fails_for_a_card_that_stopped_reporting(inv: Any) -> None:
    # given two inventory cards of which only the first reported within 5 minutes
    node = _pod(inv, cards=2)
    check = _check("cards_enumerated")
    _push("gpu01", H100_UUIDS[0], "temperature_c", 50)
    _push("gpu01", H100_UUIDS[1], "temperature_c", 50, ago=900)
    # when the checks run
    health_evaluate(now=NOW)
    # then the node fails, naming the silent card
    state = _state(check, node)
    slot = node.cards.get(gpu_uuid=H100_UUIDS[1]).slot
    assert (state.status, state.message) == ("failing", f"1 of 2 cards not reporting: {slot}")


def test_pcie_width_is_judged_against_the_checks_expectation(inv: Any) -> None:
    # given a card at Gen4 x1 (a mining riser) and a rig check that expects x1, a pod check x16
    node = _pod(inv)
    _push("gpu01", H100_UUIDS[0], "pcie_link_gen", 4)
    _push("gpu01", H100_UUIDS[0], "pcie_link_width", 1)
    riser = _check("pcie_link", min_gen=4, min_width=1)
    server = HealthCheck.objects.create(name="x16", kind="pcie_link", params={"min_width": 16}, consecutive=1)
    # when evaluated
    health_evaluate(now=NOW)
    # then x1 passes where it is expected and fails where x16 is
    assert _state(riser, node).status == "passing"
    assert _state(server, node).status == "failing"
    assert "Gen4 x1 < Gen0 x16" in _state(server, node).message


def test_ecc_uncorrected_errors_and_xids_fail(inv: Any) -> None:
    node = _pod(inv)
    ecc = _check("ecc")
    xid = _check("xid", minutes=30, ignore=[13])
    _push("gpu01", H100_UUIDS[0], "ecc_uncorrected_total", 2, scope="volatile")
    # an Xid 79 (fallen off the bus) recorded by the kernel-log parser 10 minutes ago
    from monitoring.models import Event

    card = node.cards.get()
    Event.objects.create(ts=NOW - dt.timedelta(minutes=10), node=node, card=card, kind="xid",
                         severity="critical", message="Xid 79", data={"xid": 79})  # fmt: skip
    Event.objects.create(ts=NOW - dt.timedelta(minutes=5), node=node, card=card, kind="xid",
                         severity="warning", message="Xid 13", data={"xid": 13})  # fmt: skip
    health_evaluate(now=NOW)
    assert _state(ecc, node).status == "failing"
    assert "2 uncorrected ECC errors" in _state(ecc, node).message
    assert (_state(xid, node).status, _state(xid, node).message) == (
        "failing",
        "Xid 79 in the last 30 minutes",
    )


def test_temperature_headroom_uses_the_cards_own_limit(inv: Any) -> None:
    node = _pod(inv)
    check = _check("temperature_headroom", headroom_c=10)
    _push("gpu01", H100_UUIDS[0], "thermal_limit_c", 90)
    _push("gpu01", H100_UUIDS[0], "temperature_c", 82)
    health_evaluate(now=NOW)
    assert _state(check, node).status == "failing"
    assert "82/90 °C" in _state(check, node).message


def test_tenstorrent_heartbeat_must_rise_and_dram_be_trained(inv: Any) -> None:
    # given a p150a snapshot ingested twice with the same heartbeat (the firmware stopped)
    from inventory.models import Card, CardModel, Cluster

    cluster = Cluster.objects.create(name="rig", backend="simulator")
    node = inv.node("rig01", cluster=cluster)
    model = CardModel.objects.create(vendor="Tenstorrent", name="p150a", tdp_w=300)
    text = fixture_text("tt_smi_4x_p150a.json")
    services.telemetry_ingest_text("tt-smi", text, node_hostname="rig01", ts=NOW - dt.timedelta(seconds=60))
    bus = "0000:01:00.0"
    Card.objects.create(node=node, card_model=model, slot="1", pci_bus_id=bus)
    services.series_relink_cards()
    check = _check("tt_heartbeat", window_s=300)
    services.telemetry_ingest_text("tt-smi", text, node_hostname="rig01", ts=NOW)
    health_evaluate(now=NOW)
    assert (_state(check, node).status, _state(check, node).message) == ("failing", "1: heartbeat not rising")
    # when the heartbeat rises again
    services.telemetry_ingest_text("tt-smi", text.replace('"heartbeat": "5120"', '"heartbeat": "5130"', 1),
                                   node_hostname="rig01", ts=NOW + dt.timedelta(seconds=30))  # fmt: skip
    health_evaluate(now=NOW + dt.timedelta(seconds=30))
    assert _state(check, node).status == "passing"


def test_link_up_fails_on_a_port_down(inv: Any) -> None:
    node = _pod(inv)
    check = _check("link_up")
    _push("gpu01", H100_UUIDS[0], "link_up", 1, port="0")
    _push("gpu01", H100_UUIDS[0], "link_up", 0, port="1")
    health_evaluate(now=NOW)
    assert _state(check, node).status == "failing"
    assert "port=1" in _state(check, node).message


# -- check commands (real outputs) ----------------------------------------------------------------
PS = "systemd\nsshd\nslurmd\nbash\nps\n"
DF = (
    "Filesystem     1024-blocks     Used Available Capacity Mounted on\n"
    "/dev/nvme0n1p2   959863856 911870664   48 100% /\n"
)
FINDMNT_RO = (
    '{\n   "filesystems": [\n      {"target":"/shared", "source":"nas01:/export/shared", "fstype":"nfs4", '
    '"options":"ro,relatime,vers=4.2,rsize=1048576"}\n   ]\n}\n'
)
IBSTAT = """CA 'mlx5_0'
\tCA type: MT4129
\tNumber of ports: 1
\tFirmware version: 28.39.1002
\tHardware version: 0
\tNode GUID: 0xa088c20300f2b1c0
\tSystem image GUID: 0xa088c20300f2b1c0
\tPort 1:
\t\tState: Active
\t\tPhysical state: LinkUp
\t\tRate: 200
\t\tBase lid: 7
\t\tLMC: 0
\t\tSM lid: 1
\t\tCapability mask: 0xa751e848
\t\tPort GUID: 0xa088c20300f2b1c0
\t\tLink layer: InfiniBand
"""
NVIDIA_VERSIONS = "00000000:18:00.0, 550.54.15, 96.00.89.00.01\n"


def test_check_commands_judge_daemons_disk_mounts_ib_and_versions(inv: Any) -> None:
    node = _pod(inv)
    checks = {
        "daemons": _check("daemons"),
        "disk": _check("disk_free", path="/", min_free_pct=5),
        "fs": _check("shared_fs", path="/shared"),
        "ib": _check("ib_link", rate_gbps=400),
        "ver": _check("driver_firmware", driver="550.54.15", firmware={"vbios": "96.00.89.00.01"}),
    }
    # the node's agent (or the SSH pull) stores what each command printed
    health_probes_store(node, [
        {"key": "ps", "exit_code": 0, "stdout": PS},
        {"key": "df:/", "exit_code": 0, "stdout": DF},
        {"key": "findmnt:/shared", "exit_code": 0, "stdout": FINDMNT_RO},
        {"key": "ibstat", "exit_code": 0, "stdout": IBSTAT},
        {"key": "nvidia-smi", "exit_code": 0, "stdout": NVIDIA_VERSIONS},
        {"key": "tt-smi", "exit_code": 127, "stdout": ""},
    ], now=NOW)  # fmt: skip
    health_evaluate(now=NOW)
    got = {name: (_state(c, node).status, _state(c, node).message) for name, c in checks.items()}
    assert got == {
        "daemons": ("failing", "not running: munged"),
        "disk": ("failing", "/: 0.0% free, less than 5%"),
        "fs": ("failing", "/shared is mounted read-only (nas01:/export/shared)"),
        "ib": ("failing", "InfiniBand ports not active at 400 Gb/s: mlx5_0/1 Active 200 Gb/s"),
        "ver": ("passing", "driver and firmware as expected on 1 cards"),
    }


def test_a_check_command_not_asked_for_is_refused(inv: Any) -> None:
    from django.core.exceptions import ValidationError

    node = _pod(inv)
    _check("daemons")
    with pytest.raises(ValidationError):
        health_probes_store(node, [{"key": "df:/etc", "exit_code": 0, "stdout": DF}])


# -- damping, drain ownership, audit --------------------------------------------------------------
def test_flapping_is_damped_and_transitions_are_audited(inv: Any) -> None:
    from portal.models import AuditEntry

    node = _pod(inv)
    check = _check("temperature_headroom", consecutive=3, headroom_c=10, limit_c=90)
    for i, temp in enumerate([85, 85, 60, 85, 85]):  # two hot results, one cool one, two hot ones
        _push("gpu01", H100_UUIDS[0], "temperature_c", temp, ago=-i)
        health_evaluate(now=NOW + dt.timedelta(seconds=i))
    # then never three hot results in a row: still passing, with a streak of two
    state = _state(check, node)
    assert (state.status, state.streak) == ("passing", 2)
    _push("gpu01", H100_UUIDS[0], "temperature_c", 86, ago=-5)
    report = health_evaluate(now=NOW + dt.timedelta(seconds=5))
    assert report.transitions == [("gpu01", "temperature_headroom check", "failing")]
    entry = AuditEntry.objects.get(message="health failing: temperature_headroom check on gpu01")
    assert entry.after["status"] == "failing"


def test_failing_drains_and_passing_resumes_only_its_own_drain(inv: Any) -> None:
    from jobs.models import Action

    node = _pod(inv)
    _check("temperature_headroom", drain=True, headroom_c=10, limit_c=90)
    _push("gpu01", H100_UUIDS[0], "temperature_c", 85)
    report = health_evaluate(now=NOW)
    # then a drain through the cluster layer, by the portal, with the check as reason
    action = Action.objects.get(node=node)
    assert (action.kind, action.requested_by, action.params["reason"]) == (
        "drain", None, "rackpilot-health: temperature_headroom check")  # fmt: skip
    assert report.drains == ["gpu01"]
    Action.objects.filter(pk=action.pk).update(status="succeeded")
    # Slurm shows the drain (the sync writes these); the card cools down
    node.__class__.objects.filter(pk=node.pk).update(
        slurm_state="drained", slurm_reason=action.params["reason"]
    )
    _push("gpu01", H100_UUIDS[0], "temperature_c", 50, ago=-1)
    report = health_evaluate(now=NOW + dt.timedelta(seconds=1))
    assert report.resumes == ["gpu01"]
    assert Action.objects.filter(node=node, kind="resume").count() == 1


def test_a_human_drain_is_never_undone(inv: Any) -> None:
    from jobs.models import Action

    node = _pod(inv)
    _check("temperature_headroom", drain=True, headroom_c=10, limit_c=90)
    node.__class__.objects.filter(pk=node.pk).update(
        slurm_state="drained", slurm_reason="fan replaced, burn-in (bob)"
    )
    _push("gpu01", H100_UUIDS[0], "temperature_c", 50)
    report = health_evaluate(now=NOW)
    assert report.resumes == [] and report.drains == []
    assert not Action.objects.filter(node=node).exists()


# -- admin API ------------------------------------------------------------------------------------
def test_admin_api_checks_params_against_the_kind(api: Any, api_as: Any, researcher_user: Any) -> None:
    url = "/api/monitoring/health-checks/"
    bad = api.post(
        url, {"name": "df", "kind": "disk_free", "params": {"path": "etc", "extra": 1}}, format="json"
    )
    assert bad.status_code == 400
    assert len(bad.json()["params"]) == 2
    assert not HealthCheck.objects.exists()
    ok = api.post(url, {"name": "df", "kind": "disk_free", "params": {"path": "/var"}}, format="json")
    assert ok.status_code == 201, ok.json()
    assert ok.json()["params"] == {"max_age_s": 600, "path": "/var", "min_free_pct": 10}
    denied = api_as(researcher_user).post(url, {"name": "x", "kind": "xid"}, format="json")
    assert denied.status_code == 403
    assert HealthCheck.objects.count() == 1


def test_an_unhealthy_node_is_shown_so_on_its_pages(inv: Any, client: Any, operator_user: Any) -> None:
    from monitoring.overview import node_thermal_list

    node = _pod(inv)
    _check("temperature_headroom", headroom_c=10, limit_c=90)
    _push("gpu01", H100_UUIDS[0], "temperature_c", 85)
    health_evaluate(now=NOW)
    # the live node and rack fragments carry the failing checks
    assert node_thermal_list(node_ids=[node.pk])[0].unhealthy == ["temperature_headroom check"]
    client.force_login(operator_user)
    ops = client.get("/jobs/nodes/")
    assert ops.status_code == 200 and b"1 check failing" in ops.content
    listed = client.get(f"/monitoring/node-health/?node={node.pk}&status=failing")
    assert listed.status_code == 200 and "less than 10 °C below the limit" in listed.content.decode()
