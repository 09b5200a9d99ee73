"""The demo's tool output goes through monitoring's real parsers: what they read is what was simulated."""

from __future__ import annotations

from datetime import UTC, datetime

from monitoring.parsers import parse
from portal.demo import render
from portal.demo.physics import KINDS, CardSim, card_kind_for

NOW = datetime(2026, 6, 1, 10, 15, tzinfo=UTC)


def _values(result, metric):
    return {(s.card, s.labels): s.value for s in result.samples if s.metric == metric}


def _h100(index=0, **kw):
    return CardSim(KINDS["h100"], index, f"0000:{0x18 + index:02x}:00.0", uuid=f"GPU-{index:08d}", **kw)


def test_card_kind_for_maps_the_seed_card_models():
    assert card_kind_for("H100 SXM 80GB").key == "h100"
    assert card_kind_for("GB10").key == "gb10"
    assert card_kind_for("Blackhole p150a").key == "p150a"


def test_nvidia_bus_id_has_an_eight_digit_domain():
    assert render.nvidia_bus_id("0000:2a:00.0") == "00000000:2A:00.0"
    assert render.nvidia_bus_id("000f:01:00.0") == "0000000F:01:00.0"


def test_nvidia_smi_csv_round_trips_through_the_parser():
    # given two H100s, one loaded and heated
    busy, idle = _h100(0), _h100(1)
    busy.load = 1.0
    for _ in range(120):
        busy.step(5)
        idle.step(5)
    # when the CSV is parsed
    result = parse("nvidia-smi-csv", render.nvidia_smi_csv([busy, idle]), node="gpu01", ts=NOW)
    # then every value is read back
    assert result.problems == []
    temps = {card: v for (card, _labels), v in _values(result, "temperature_c").items()}
    assert temps == {"GPU-00000000": round(busy.temp_c), "GPU-00000001": round(idle.temp_c)}
    power = {card: v for (card, _labels), v in _values(result, "power_w").items()}
    assert power == {"GPU-00000000": round(busy.power_w, 2), "GPU-00000001": round(idle.power_w, 2)}
    assert {c.bus_id for c in result.cards} == {"0000:18:00.0", "0000:19:00.0"}


def test_gb10_prints_na_for_unified_memory_and_still_parses():
    card = CardSim(KINDS["gb10"], 0, "000f:01:00.0", uuid="GPU-gb10")
    line = render.nvidia_smi_csv([card])
    assert line.count("[N/A]") == 11  # as the real GB10 prints (tests/parsers/fixtures/nvidia_smi_gb10.csv)
    result = parse("nvidia-smi-csv", line, node="gb10-a", ts=NOW)
    assert result.problems == []
    assert "memory_used_bytes" not in {s.metric for s in result.samples}
    assert {s.metric for s in result.samples} >= {"temperature_c", "power_w", "utilization_pct"}


def test_tt_smi_snapshot_round_trips_with_link_state():
    # given a p150a with cables on QSFP1-3 (channels 0-5), QSFP1's channel 0 held down
    ports = {"QSFP1": (0, 1), "QSFP2": (2, 3), "QSFP3": (4, 5)}
    card = CardSim(KINDS["p150a"], 0, "0000:01:00.0", link_ports=ports, ambient_c=35.0)
    card.links_down.add(0)
    # when the snapshot is parsed
    result = parse("tt-smi", render.tt_smi_snapshot("rig01", [card], NOW), node="rig01", ts=NOW)
    # then temperature, power and each channel's link state come back
    assert result.problems == []
    assert _values(result, "temperature_c") == {
        ("0000:01:00.0", (("board_type", "p150a"),)): round(card.temp_c, 1)
    }
    links = {dict(labels)["port"]: v for (_card, labels), v in _values(result, "link_up").items()}
    assert [links[str(ch)] for ch in range(8)] == [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    assert _values(result, "heartbeat") == {
        ("0000:01:00.0", (("board_type", "p150a"),)): float(card.heartbeat)
    }


def test_dcgm_exporter_text_round_trips():
    cards = [_h100(0), _h100(1)]
    cards[0].load = 1.0
    cards[0].step(30)
    result = parse("dcgm-exporter", render.dcgm_exporter("gpu04", cards), node="gpu04", ts=NOW)
    assert result.problems == []
    temps = {card: v for (card, _labels), v in _values(result, "temperature_c").items()}
    assert temps == {"GPU-00000000": round(cards[0].temp_c), "GPU-00000001": round(cards[1].temp_c)}
    energy = {card: v for (card, _labels), v in _values(result, "energy_j").items()}
    assert energy["GPU-00000000"] == int(cards[0].energy_j * 1000) / 1000


def test_temperature_follows_power_with_a_lag():
    # given an idle H100 at its steady temperature
    card = _h100()
    start = card.temp_c
    # when a job starts: power jumps within seconds, temperature lags behind
    card.load = 1.0
    card.step(10)
    assert card.power_w > 600
    assert start < card.temp_c < card.steady_temp(card.power_w) - 10
    for _ in range(60):
        card.step(10)
    assert abs(card.temp_c - card.steady_temp(card.power_w)) < 1.5


def test_the_mining_chassis_runs_hotter_and_a_failed_fan_overheats():
    rig = CardSim(KINDS["p150a"], 0, "0000:01:00.0", ambient_c=35.0)
    pod = _h100()
    for c in (rig, pod):
        c.load = 1.0
        for _ in range(100):
            c.step(5)
    assert rig.temp_c > pod.temp_c
    assert rig.temp_c < 85
    rig.fan_fault = True
    for _ in range(100):
        rig.step(5)
    assert rig.temp_c > 85
    assert rig.fan_rpm == 0
