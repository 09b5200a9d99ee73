from datetime import UTC, datetime, timedelta, timezone

import pytest

from monitoring.parsers import (
    METRICS,
    ParseError,
    heartbeat_events,
    parse,
    parse_tt_link_status,
    parse_tt_smi_snapshot,
)
from tests.parsers.conftest import read_fixture


def test_blackhole_4x_p150a():
    r = parse_tt_smi_snapshot(read_fixture("tt_smi_4x_p150a.json"))
    assert r.problems == []
    assert [c.card for c in r.cards] == ["0000:01:00.0", "0000:02:00.0", "0000:41:00.0", "0000:42:00.0"]
    c = r.cards[0]
    assert (c.vendor, c.board_type, c.board_id, c.driver_version) == (
        "tenstorrent",
        "p150a",
        "000004011c200010",
        "TT-KMD 2.0.0",
    )
    assert dict(c.firmware)["dm_app_fw"] == "0.17.0.0"
    assert dict(c.firmware)["fw_bundle_version"] == "18.7.0.0"
    assert "dm_bl_fw" not in dict(c.firmware)  # "N/A"
    card = "0000:01:00.0"
    assert r.value("voltage_v", card) == 0.80
    assert r.value("current_a", card) == 31.0
    assert r.value("asic_power_w", card) == 27.0
    assert r.value("power_w", card) == 75.0  # board_power preferred
    assert r.value("aiclk_mhz", card) == 1350.0
    assert r.value("temperature_c", card) == 45.3
    assert r.value("fan_rpm", card) == 1800.0
    assert r.value("fan_pct", card) is None
    assert r.value("heartbeat", card) == 5120.0
    assert r.value("power_limit_w", card) == 300.0
    assert r.value("thermal_limit_c", card) == 95.0
    assert r.value("current_limit_a", card) == 250.0
    assert r.value("aiclk_max_mhz", card) == 1350.0
    assert r.value("dram_ok", card) == 1.0
    assert r.value("pcie_link_gen", card) == 5.0
    assert r.value("pcie_link_width", card) == 16.0
    # ETH_LIVE_STATUS 0x3: ports 0 and 1 up of 14 Blackhole ports
    ups = {s.label("port"): s.value for s in r.find("link_up", card)}
    assert len(ups) == 14
    assert ups["0"] == 1.0 and ups["1"] == 1.0 and ups["2"] == 0.0
    s = r.find("temperature_c", card)[0]
    assert s.node == "rig01"
    assert s.ts == datetime(2026, 6, 1, 10, 15, 2, 104871, tzinfo=UTC)
    assert all(x.metric in METRICS and x.unit == METRICS[x.metric][0] for x in r.samples)


def test_blackhole_missing_values():
    r = parse_tt_smi_snapshot(read_fixture("tt_smi_4x_p150a.json"))
    card = "0000:41:00.0"
    assert r.value("power_w", card) == 26.2  # board_power N/A -> ASIC power
    assert r.value("power_limit_w", card) == 150.0  # board_power_limit 0 = unknown -> tdp_limit
    assert r.value("dram_ok", card) == 0.0
    assert r.value("pcie_link_gen", card) == 4.0
    assert r.value("pcie_link_width", card) == 8.0
    assert r.value("aiclk_mhz", card) == 800.0
    assert r.find("link_up", card) == []  # ETH_LIVE_STATUS null
    ups = {s.label("port"): s.value for s in r.find("link_up", "0000:42:00.0")}
    assert [p for p, v in sorted(ups.items(), key=lambda kv: int(kv[0])) if v] == ["0", "2", "3", "5"]  # 0x2d


def test_wormhole_n300_old_firmware():
    r = parse_tt_smi_snapshot(read_fixture("tt_smi_n300_wormhole_old.json"), node="override")
    assert r.problems == []
    left, right = r.cards
    assert left.card == "0000:04:00.0"
    assert left.board_type == "n300 L"
    assert dict(left.firmware)["bm_app_fw"] == "5.7.0.0"
    assert right.card == "tt:010001851170801a:R"
    assert right.bus_id is None
    assert right.board_type == "n300 R"
    assert "bm_app_fw" not in dict(right.firmware)
    assert r.value("fan_pct", left.card) == 55.0  # percent before tt-smi v5.3 (value <= 100)
    assert r.value("fan_rpm", left.card) is None
    assert r.value("fan_pct", right.card) is None  # "N/A"
    assert r.value("power_w", left.card) == 34.0  # no board_power before v6.2
    assert r.value("power_limit_w", left.card) == 85.0
    assert r.value("pcie_link_width", right.card) is None  # "N/A" on remote chip
    assert r.value("pcie_link_gen", right.card) is None
    assert r.value("temperature_c", right.card) == 49.9
    assert r.value("link_up", left.card, port="8") == 1.0
    assert r.value("link_up", left.card, port="0") == 0.0
    assert all(s.node == "override" for s in r.samples)
    assert r.samples[0].ts == datetime(2024, 3, 11, 14, 2, 55, 870412, tzinfo=UTC)


def test_fan_units_from_version_hint():
    text = read_fixture("tt_smi_n300_wormhole_old.json")
    assert parse_tt_smi_snapshot(text, version="5.3.0").value("fan_rpm", "0000:04:00.0") == 55.0
    assert parse_tt_smi_snapshot(text, version="5.2.9").value("fan_pct", "0000:04:00.0") == 55.0
    assert parse_tt_smi_snapshot(text, fan_units="rpm").value("fan_rpm", "0000:04:00.0") == 55.0


def test_time_zone_and_ts_override():
    text = read_fixture("tt_smi_tty_progress.txt")
    cet = timezone(timedelta(hours=2))
    r = parse_tt_smi_snapshot(text, tz=cet)
    assert r.samples[0].ts == datetime(2026, 6, 1, 8, 15, 2, 100000, tzinfo=UTC)
    given = datetime(2030, 1, 1, tzinfo=UTC)
    assert parse_tt_smi_snapshot(text, ts=given).samples[0].ts == given


def test_snapshot_after_colour_and_progress_line():
    r = parse_tt_smi_snapshot(read_fixture("tt_smi_tty_progress.txt"))
    assert [c.card for c in r.cards] == ["0000:01:00.0"]
    assert r.value("power_w", "0000:01:00.0") == 75.0
    assert r.value("power_limit_w", "0000:01:00.0") == 150.0
    assert r.samples[0].node == "rig01"


def test_bad_telemetry_value_is_problem_rest_kept():
    text = read_fixture("tt_smi_4x_p150a.json").replace(
        '"asic_temperature": "45.3"', '"asic_temperature": "hot"'
    )
    r = parse_tt_smi_snapshot(text)
    assert [(p.field, p.raw) for p in r.problems] == [("device_info[0].telemetry.asic_temperature", "hot")]
    assert r.value("temperature_c", "0000:01:00.0") is None
    assert r.value("aiclk_mhz", "0000:01:00.0") == 1350.0


def test_truncated_json_raises_with_line():
    text = read_fixture("tt_smi_4x_p150a.json")
    with pytest.raises(ParseError) as exc:
        parse_tt_smi_snapshot(text[: len(text) // 2])
    assert exc.value.line is not None and exc.value.line > 1


def test_no_json_and_wrong_shape_raise():
    with pytest.raises(ParseError):
        parse_tt_smi_snapshot("Error: no Tenstorrent devices detected\n")
    with pytest.raises(ParseError):
        parse_tt_smi_snapshot('{"hello": 1}')


def test_heartbeat_stall_events():
    r = parse_tt_smi_snapshot(read_fixture("tt_smi_4x_p150a.json"))
    assert heartbeat_events({}, r) == []
    events = heartbeat_events({"0000:01:00.0": 5000, "0000:02:00.0": 5122}, r)
    assert [(e.kind, e.card, e.severity) for e in events] == [("heartbeat_stall", "0000:02:00.0", "critical")]
    # a heartbeat lower than before is a firmware restart (card reset, a restarted demo), not a stall
    assert heartbeat_events({"0000:01:00.0": 9000}, r) == []


def test_link_status_lines():
    r = parse_tt_link_status(read_fixture("tt_link_status.txt"), node="wh", card="0000:04:00.0")
    assert r.value("link_up", "0000:04:00.0", port="8") == 1.0
    assert r.value("link_retrain_total", "0000:04:00.0", port="9") == 3.0
    assert r.value("link_up", "0000:04:00.0", port="0") == 0.0
    assert r.value("link_retrain_total", "0000:04:00.0", port="0") is None
    assert r.find("link_up", port="8")[0].label("peer_chip") == "1"
    (e,) = r.events
    assert (e.kind, e.severity, e.data["port"]) == ("link_down", "warning", 0)


def test_dispatch_tt_smi():
    assert len(parse("tt-smi", read_fixture("tt_smi_tty_progress.txt")).cards) == 1
