from datetime import UTC, datetime

import pytest

from monitoring.parsers import (
    DEFAULT_QUERY_FIELDS,
    METRICS,
    THROTTLE_BITS,
    ParseError,
    nvidia_smi_argv,
    parse_nvidia_smi_csv,
    parse_nvidia_smi_xml,
)
from tests.parsers.conftest import read_fixture

MIB = 1024 * 1024
TS = datetime(2026, 6, 1, 10, 0, tzinfo=UTC)
H100_0 = "GPU-5e1f0c2a-77aa-4c1e-9d0b-1f2e3d4c5b6a"


def test_argv_default_fields():
    argv = nvidia_smi_argv()
    assert argv[0] == "nvidia-smi"
    assert argv[1] == "--query-gpu=" + ",".join(DEFAULT_QUERY_FIELDS)
    assert argv[2] == "--format=csv,noheader,nounits"
    assert nvidia_smi_argv(["index"], units=True) == [
        "nvidia-smi",
        "--query-gpu=index",
        "--format=csv,noheader",
    ]
    for f in (
        "index",
        "uuid",
        "pci.bus_id",
        "name",
        "temperature.gpu",
        "temperature.memory",
        "power.draw",
        "power.limit",
        "utilization.gpu",
        "utilization.memory",
        "memory.total",
        "memory.used",
        "clocks.sm",
        "clocks.mem",
        "pcie.link.gen.current",
        "pcie.link.width.current",
        "fan.speed",
        "ecc.errors.corrected.volatile.total",
        "ecc.errors.uncorrected.volatile.total",
    ):
        assert f in DEFAULT_QUERY_FIELDS
    assert "clocks_throttle_reasons.active" in DEFAULT_QUERY_FIELDS


def test_h100_8gpu_nounits():
    r = parse_nvidia_smi_csv(
        read_fixture("nvidia_smi_h100_8gpu_nounits.csv"), DEFAULT_QUERY_FIELDS, node="gpu07", ts=TS
    )
    assert r.problems == []
    assert len(r.cards) == 8
    assert [c.index for c in r.cards] == list(range(8))
    c0 = r.cards[0]
    assert c0.uuid == H100_0
    assert c0.bus_id == "0000:18:00.0"
    assert c0.name == "NVIDIA H100 80GB HBM3"
    assert c0.card == H100_0
    assert r.cards[5].bus_id == "0000:ab:00.0"
    assert r.value("temperature_c", H100_0) == 41.0
    assert r.value("memory_temperature_c", H100_0) == 38.0
    assert r.value("power_w", H100_0) == 68.40
    assert r.value("power_limit_w", H100_0) == 700.0
    assert r.value("memory_total_bytes", H100_0) == 81559 * MIB
    assert r.value("memory_used_bytes", H100_0) == 3 * MIB
    assert r.value("sm_clock_mhz", H100_0) == 345.0
    assert r.value("mem_clock_mhz", H100_0) == 2619.0
    assert r.value("pcie_link_gen", H100_0) == 5.0
    assert r.value("pcie_link_width", H100_0) == 16.0
    assert r.value("fan_pct", H100_0) is None  # [N/A]
    assert r.value("ecc_corrected_total", H100_0, scope="volatile") == 0.0
    assert r.value("throttle_reasons", H100_0) == 1.0
    assert r.value("throttle_gpu_idle", H100_0) == 1.0
    busy = r.cards[3].card
    assert r.value("power_w", busy) == 702.10
    assert r.value("utilization_pct", busy) == 100.0
    assert r.value("throttle_reasons", busy) == 4.0
    assert r.value("throttle_sw_power_cap", busy) == 1.0
    assert r.value("throttle_gpu_idle", busy) == 0.0
    assert r.value("ecc_corrected_total", r.cards[5].card) == 2.0
    s = r.find("temperature_c", H100_0)[0]
    assert s.node == "gpu07" and s.ts == TS and s.unit == "C" and s.label("index") == "0"
    assert all(s.metric in METRICS and s.unit == METRICS[s.metric][0] for s in r.samples)


def test_units_and_header_line():
    fields = [
        "index",
        "name",
        "pci.bus_id",
        "temperature.gpu",
        "power.draw",
        "memory.used",
        "memory.total",
        "utilization.gpu",
        "clocks.sm",
        "fan.speed",
    ]
    r = parse_nvidia_smi_csv(read_fixture("nvidia_smi_units_header.csv"), fields)
    assert r.problems == []
    assert [c.card for c in r.cards] == ["0000:01:00.0", "0000:21:00.0"]
    assert r.value("power_w", "0000:01:00.0") == 110.25
    assert r.value("memory_used_bytes", "0000:01:00.0") == 1071 * MIB
    assert r.value("utilization_pct", "0000:01:00.0") == 5.0
    assert r.value("sm_clock_mhz", "0000:01:00.0") == 1395.0
    assert r.value("fan_pct", "0000:21:00.0") == 78.0
    assert r.value("power_w", "0000:21:00.0") is None
    assert r.value("memory_used_bytes", "0000:21:00.0") == 24010 * MIB


def test_header_equal_to_field_names_is_skipped():
    text = "index, temperature.gpu\n0, 40\n"
    r = parse_nvidia_smi_csv(text, ["index", "temperature.gpu"])
    assert r.problems == []
    assert r.value("temperature_c", "index:0") == 40.0


def test_new_header_names_for_old_fields_map_by_position():
    fields = [
        "index",
        "uuid",
        "clocks_throttle_reasons.active",
        "pcie.link.gen.current",
        "power.draw",
        "power.draw.instant",
    ]
    r = parse_nvidia_smi_csv(read_fixture("nvidia_smi_new_header_quirk.csv"), fields)
    assert r.problems == []
    assert r.value("throttle_reasons", H100_0) == 0x44.__float__()
    assert r.value("throttle_sw_power_cap", H100_0) == 1.0
    assert r.value("throttle_hw_thermal_slowdown", H100_0) == 1.0
    assert r.value("throttle_hw_slowdown", H100_0) == 0.0
    assert r.value("pcie_link_gen", H100_0) == 5.0
    assert r.value("power_w", H100_0) == 512.30
    assert r.value("power_instant_w", H100_0) == 640.75


def test_gpucurrent_and_average_field_names():
    fields = ["uuid", "pcie.link.gen.gpucurrent", "power.draw.average", "clocks_event_reasons.active"]
    r = parse_nvidia_smi_csv(f"{H100_0}, 4, 300.5, 0x0000000000000000\n", fields)
    assert r.value("pcie_link_gen", H100_0) == 4.0
    assert r.value("power_w", H100_0) == 300.5
    assert r.value("throttle_reasons", H100_0) == 0.0


def test_not_supported_and_unknown_error_are_missing_not_problems():
    r = parse_nvidia_smi_csv(read_fixture("nvidia_smi_not_supported.csv"), DEFAULT_QUERY_FIELDS)
    assert r.problems == []
    a, b = (c.card for c in r.cards)
    assert r.value("memory_temperature_c", a) is None
    assert r.value("ecc_corrected_total", a) is None
    assert r.value("fan_pct", a) == 23.0
    assert r.value("power_w", a) == 14.07
    assert r.value("power_w", b) is None
    assert r.value("throttle_reasons", b) is None
    assert r.value("temperature_c", b) == 36.0


def test_gb10_unified_memory():
    r = parse_nvidia_smi_csv(read_fixture("nvidia_smi_gb10.csv"), DEFAULT_QUERY_FIELDS)
    assert r.problems == []
    (card,) = r.cards
    assert card.name == "NVIDIA GB10"
    assert card.bus_id == "000f:01:00.0"
    u = card.card
    assert r.value("temperature_c", u) == 42.0
    assert r.value("power_w", u) == 11.52
    assert r.value("utilization_pct", u) == 3.0
    assert r.value("sm_clock_mhz", u) == 2405.0
    for metric in ("memory_total_bytes", "memory_used_bytes", "power_limit_w", "pcie_link_gen", "fan_pct"):
        assert r.value(metric, u) is None


def test_bad_value_is_a_problem_and_rest_of_row_kept():
    r = parse_nvidia_smi_csv(read_fixture("nvidia_smi_bad_value.csv"), DEFAULT_QUERY_FIELDS)
    assert [(p.line, p.field, p.raw) for p in r.problems] == [
        (2, "temperature.gpu", "hot"),
        (2, "clocks_throttle_reasons.active", "0xZZ"),
        (3, None, r.problems[2].raw),
    ]
    assert (
        r.problems[2].reason
        == "expected 20 columns, got 6 (no header line: the default field list is assumed)"
    )
    bad = "GPU-1b2c3d4e-5f60-4718-8293-a4b5c6d7e8f9"
    assert r.value("temperature_c", bad) is None
    assert r.value("memory_temperature_c", bad) == 40.0
    assert r.value("power_w", bad) == 71.12
    assert r.value("temperature_c", H100_0) == 41.0
    assert len(r.cards) == 2


def test_garbage_csv_raises_parse_error_naming_line():
    with pytest.raises(ParseError) as exc:
        parse_nvidia_smi_csv("\nhello world\nthis is not csv\n", DEFAULT_QUERY_FIELDS)
    assert exc.value.line == 2
    assert "line 2" in str(exc.value)


def test_nvidia_smi_failure_message_raises():
    text = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure ...\n"
    with pytest.raises(ParseError) as exc:
        parse_nvidia_smi_csv(text, DEFAULT_QUERY_FIELDS)
    assert exc.value.line == 1


def test_no_devices_and_empty_output():
    assert parse_nvidia_smi_csv("No devices were found\n", DEFAULT_QUERY_FIELDS).cards == []
    assert parse_nvidia_smi_csv("", DEFAULT_QUERY_FIELDS).samples == []


# ---------------------------------------------------------------- XML


def test_xml_525_power_readings_and_throttle_reasons():
    r = parse_nvidia_smi_xml(read_fixture("nvidia_smi_q_x_525.xml"), node="t4box")
    assert r.problems == []
    (c,) = r.cards
    u = "GPU-3d2c1b0a-9f8e-7d6c-5b4a-392817160504"
    assert (c.card, c.uuid, c.bus_id, c.name, c.serial) == (u, u, "0000:af:00.0", "Tesla T4", "1322920038475")
    assert (c.driver_version, c.cuda_version, c.vbios_version) == ("525.147.05", "12.0", "90.04.96.00.9F")
    assert r.value("power_w", u) == 9.87
    assert r.value("power_limit_w", u) == 70.0
    assert r.value("enforced_power_limit_w", u) == 70.0
    assert r.value("temperature_c", u) == 33.0
    assert r.value("memory_temperature_c", u) is None  # N/A on GDDR6
    assert r.value("fan_pct", u) is None
    assert r.value("memory_total_bytes", u) == 15360 * MIB
    assert r.value("pcie_link_gen", u) == 1.0
    assert r.value("pcie_link_gen_max", u) == 3.0
    assert r.value("pcie_link_width", u) == 16.0
    assert r.value("pstate", u) == 8.0
    assert r.value("ecc_corrected_total", u, scope="volatile") == 4.0
    assert r.value("ecc_corrected_total", u, scope="aggregate") == 9.0
    assert r.value("ecc_uncorrected_total", u, scope="volatile") == 0.0
    assert r.value("throttle_reasons", u) == 1.0
    assert r.value("throttle_gpu_idle", u) == 1.0
    s = r.find("power_w", u)[0]
    assert s.ts == datetime(2024, 1, 16, 8, 2, 11, tzinfo=UTC)
    assert s.node == "t4box"


def test_xml_470_geforce():
    r = parse_nvidia_smi_xml(read_fixture("nvidia_smi_q_x_470.xml"))
    u = "GPU-9c8b7a6f-5e4d-3c2b-1a09-f8e7d6c5b4a3"
    assert r.problems == []
    assert r.cards[0].serial is None
    assert r.cards[0].driver_version == "470.141.03"
    assert r.value("fan_pct", u) == 41.0
    assert r.value("power_w", u) == 349.63
    assert r.value("throttle_reasons", u) == 4.0
    assert r.value("ecc_corrected_total", u) is None


def test_xml_535_gpu_power_readings_two_gpus():
    r = parse_nvidia_smi_xml(read_fixture("nvidia_smi_q_x_535.xml"))
    assert r.problems == []
    a, b = r.cards
    assert (a.bus_id, b.bus_id) == ("0000:3b:00.0", "0000:5e:00.0")
    assert (a.index, b.index) == (0, 1)
    assert a.driver_version == b.driver_version == "535.161.08"
    assert dict(a.firmware)["inforom_img"] == "G506.0210.00.04"
    assert r.value("power_w", a.card) == 63.52
    assert r.value("power_limit_w", a.card) == 400.0
    assert r.value("memory_used_bytes", a.card) == 1071 * MIB
    assert r.value("utilization_pct", a.card) == 5.0
    assert r.value("ecc_corrected_total", a.card, scope="volatile") == 3.0
    assert r.value("ecc_corrected_total", a.card, scope="aggregate") == 42.0
    assert r.value("ecc_uncorrected_total", a.card, scope="aggregate") == 1.0
    assert r.value("power_w", b.card) == 398.71
    assert r.value("pcie_link_gen", b.card) == 3.0
    assert r.value("pcie_link_width", b.card) == 8.0
    assert r.value("pcie_link_width_max", b.card) == 16.0
    assert r.value("pcie_replay_total", b.card) == 17.0
    assert r.value("throttle_reasons", b.card) == float(0x4 | 0x20)
    assert r.value("throttle_sw_thermal_slowdown", b.card) == 1.0


def test_xml_570_average_and_instant_power():
    r = parse_nvidia_smi_xml(read_fixture("nvidia_smi_q_x_570.xml"))
    assert r.problems == []
    u = H100_0
    assert r.value("power_w", u) == 612.34
    assert r.value("power_instant_w", u) == 655.02
    assert r.value("power_limit_w", u) == 700.0
    assert r.value("memory_temperature_c", u) == 66.0
    assert r.value("ecc_corrected_total", u, scope="volatile") == 5.0
    assert r.value("ecc_uncorrected_total", u, scope="volatile") == 0.0
    assert r.value("throttle_reasons", u) == 0.0
    assert r.cards[0].cuda_version == "12.8"
    assert r.value("reset_required", u) == 0.0


def test_xml_bad_value_is_problem():
    text = read_fixture("nvidia_smi_q_x_570.xml").replace(
        "<gpu_temp>58 C</gpu_temp>", "<gpu_temp>warm</gpu_temp>"
    )
    r = parse_nvidia_smi_xml(text)
    assert [(p.field, p.raw) for p in r.problems] == [("gpu[0]/temperature/gpu_temp", "warm")]
    assert r.value("temperature_c", H100_0) is None
    assert r.value("power_w", H100_0) == 612.34


def test_xml_truncated_raises_with_line():
    text = read_fixture("nvidia_smi_q_x_535.xml")[:3000]
    with pytest.raises(ParseError) as exc:
        parse_nvidia_smi_xml(text)
    assert exc.value.line is not None and exc.value.line > 1


def test_xml_wrong_root_and_not_xml():
    with pytest.raises(ParseError):
        parse_nvidia_smi_xml("<html><body/></html>")
    with pytest.raises(ParseError) as exc:
        parse_nvidia_smi_xml("index, uuid\n0, GPU-x\n")
    assert exc.value.line == 1


def test_xml_internal_doctype_and_entities_refused():
    bomb = (
        '<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
        ' <!ENTITY lol2 "&lol;&lol;&lol;&lol;">\n]>\n<nvidia_smi_log>&lol2;</nvidia_smi_log>'
    )
    with pytest.raises(ParseError) as exc:
        parse_nvidia_smi_xml(bomb)
    assert exc.value.line == 3
    with pytest.raises(ParseError) as exc:
        parse_nvidia_smi_xml("<!DOCTYPE nvidia_smi_log [ ]>\n<nvidia_smi_log/>")
    assert exc.value.line == 1
    with pytest.raises(ParseError):
        parse_nvidia_smi_xml(
            '<!DOCTYPE nvidia_smi_log SYSTEM "file:///etc/passwd" [<!ELEMENT a ANY>]><nvidia_smi_log/>'
        )


# -- a header line: columns mapped by the header's names -----------------------------------------
A100_0 = "GPU-3f2e1d0c-b9a8-4765-8432-10fedcba9876"
A100_1 = "GPU-9a8b7c6d-5e4f-4321-9fed-cba987654321"
H100_1 = "GPU-1b2c3d4e-5f60-4718-8293-a4b5c6d7e8f9"
B200_0 = "GPU-b1c2d3e4-f5a6-4b7c-8d9e-0f1a2b3c4d5e"
B200_1 = "GPU-c2d3e4f5-a6b7-4c8d-9e0f-1a2b3c4d5e6f"


def _warnings(r):
    return [(w.code, w.field) for w in r.warnings]


def test_header_470_values_with_units_not_supported_and_unknown_fields():
    # given: driver 470 `--format=csv` (units in header and values), a field order of the admin's own
    r = parse_nvidia_smi_csv(read_fixture("nvidia_smi_470_header_units.csv"), node="ws01", ts=TS)
    # then: every column found by name, [Not Supported] missing, unknown fields listed not refused
    assert r.problems == []
    assert _warnings(r) == [("unknown_field", "persistence_mode"), ("unknown_field", "compute_mode")]
    assert [(c.card, c.index, c.name) for c in r.cards] == [
        ("0000:01:00.0", 0, "NVIDIA GeForce GTX 1080 Ti"),
        ("0000:02:00.0", 1, "NVIDIA GeForce GTX 1080 Ti"),
    ]
    busy = "0000:02:00.0"
    assert r.value("temperature_c", busy) == 71.0
    assert r.value("power_w", busy) == 243.51
    assert r.value("power_limit_w", busy) == 250.0
    assert r.value("memory_used_bytes", busy) == 10873 * MIB
    assert r.value("memory_total_bytes", busy) == 11264 * MIB
    assert r.value("utilization_pct", busy) == 99.0
    assert r.value("sm_clock_mhz", busy) == 1835.0
    assert r.value("fan_pct", busy) == 64.0
    assert r.value("pstate", busy) == 2.0
    assert r.value("throttle_reasons", busy) == 4.0
    assert r.value("throttle_sw_power_cap", busy) == 1.0
    assert r.value("ecc_corrected_total", busy, scope="volatile") is None
    assert r.value("pstate", "0000:01:00.0") == 8.0
    assert len(r.samples) == 2 * (8 + 1 + 1 + len(THROTTLE_BITS))  # 8 numeric, pstate, mask, its bits
    assert {s.node for s in r.samples} == {"ws01"}


def test_header_525_nounits_old_throttle_names_and_timestamps():
    # given: `--format=csv,nounits`: units stay in the header, values are bare; old throttle names
    r = parse_nvidia_smi_csv(read_fixture("nvidia_smi_525_a100_nounits_header.csv"))
    assert r.problems == []
    assert _warnings(r) == [("unknown_field", "mig.mode.current")]
    assert [c.card for c in r.cards] == [A100_0, A100_1]
    assert r.value("memory_temperature_c", A100_1) == 67.0
    assert r.value("power_w", A100_1) == 391.40
    assert r.value("memory_utilization_pct", A100_1) == 71.0
    assert r.value("memory_used_bytes", A100_1) == 79122 * MIB
    assert r.value("ecc_uncorrected_total", A100_1, scope="volatile") == 0.0
    assert r.value("throttle_hw_slowdown", A100_1) == 0.0
    assert r.value("throttle_sw_thermal_slowdown", A100_1) == 1.0
    assert r.value("throttle_sw_thermal_slowdown", A100_0) == 0.0
    assert r.value("throttle_reasons", A100_1) is None  # only asked for two single reasons
    s = r.find("power_w", A100_1)[0]
    assert s.ts == datetime(2026, 6, 1, 10, 0, 0, 125000, tzinfo=UTC)
    assert s.labels == ()  # no index column: the card is keyed by its uuid alone


def test_header_535_prints_new_names_subset_in_own_order():
    # given: 535.113+ prints clocks_event_reasons.* and clocks.current.* for what was asked
    r = parse_nvidia_smi_csv(read_fixture("nvidia_smi_535_h100_header.csv"))
    assert r.problems == []
    assert _warnings(r) == [("unknown_field", "clocks.max.sm")]
    assert [c.card for c in r.cards] == [H100_0, H100_1]
    assert r.cards[0].bus_id == "0000:18:00.0"
    assert r.value("throttle_reasons", H100_0) == float(0x44)
    assert r.value("throttle_hw_thermal_slowdown", H100_0) == 1.0
    assert r.value("throttle_gpu_idle", H100_1) == 1.0
    assert r.value("sm_clock_mhz", H100_0) == 1755.0
    assert r.value("mem_clock_mhz", H100_0) == 2619.0
    assert r.value("power_w", H100_0) == 512.30
    assert r.value("enforced_power_limit_w", H100_0) == 700.0
    assert r.value("pcie_link_gen", H100_0) == 5.0
    assert r.value("pcie_link_width", H100_0) == 16.0
    assert r.value("temperature_c", H100_0) == 83.0
    assert r.value("memory_free_bytes", H100_1) == 81005 * MIB


def test_header_570_average_instant_and_repeated_power_column():
    r = parse_nvidia_smi_csv(read_fixture("nvidia_smi_570_header.csv"))
    assert r.problems == []
    assert _warnings(r) == [
        ("duplicate_field", "power.draw.average"),
        ("unknown_field", "temperature.gpu.tlimit"),
    ]
    assert r.value("power_w", B200_0) == 948.12  # one sample, not two
    assert r.value("power_instant_w", B200_0) == 1003.50
    assert r.value("power_limit_w", B200_0) == 1000.0
    assert r.value("pcie_link_gen", B200_0) == 5.0
    assert r.value("fan_pct", B200_0) is None
    assert r.value("throttle_sw_power_cap", B200_0) == 1.0
    assert r.value("throttle_hw_thermal_slowdown", B200_0) == 0.0
    assert r.value("throttle_reasons", B200_0) == 4.0
    assert r.value("throttle_gpu_idle", B200_1) == 1.0
    assert r.value("throttle_sw_power_cap", B200_1) == 0.0
    assert r.cards[1].name == "NVIDIA B200"


def test_header_old_and_new_name_of_one_field_is_a_duplicate():
    text = f"uuid, clocks_throttle_reasons.active, clocks_event_reasons.active\n{H100_0}, 0x4, 0x1\n"
    r = parse_nvidia_smi_csv(text)
    assert _warnings(r) == [("duplicate_field", "clocks_event_reasons.active")]
    assert r.value("throttle_reasons", H100_0) == 4.0


def test_header_without_card_id_numbers_cards_by_row():
    text = "temperature.gpu, power.draw [W]\n40, 100.00 W\n45, 200.00 W\n"
    r = parse_nvidia_smi_csv(text)
    assert r.problems == []
    assert _warnings(r) == [("no_card_id", None)]
    assert [c.card for c in r.cards] == ["index:0", "index:1"]
    assert r.value("power_w", "index:1") == 200.0


def test_header_of_unknown_fields_only_is_still_a_header():
    r = parse_nvidia_smi_csv("index, persistence_mode\n0, Enabled\n")
    assert r.problems == []
    assert _warnings(r) == [("unknown_field", "persistence_mode")]
    assert r.samples == []
    assert [c.card for c in r.cards] == ["index:0"]


def test_without_header_own_field_count_names_the_default_list():
    with pytest.raises(ParseError) as exc:
        parse_nvidia_smi_csv("0, 41, 68.40\n")
    assert str(exc.value) == (
        "line 1: not nvidia-smi CSV output: expected 20 columns, got 3 "
        "(no header line: the default field list is assumed)"
    )
