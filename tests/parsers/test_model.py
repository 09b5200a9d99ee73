import dataclasses
from pathlib import Path

import pytest

from monitoring.parsers import (
    FORMATS,
    METRICS,
    CardIdentity,
    ParseError,
    ParseResult,
    Sample,
    make_labels,
    normalize_bus_id,
    parse,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("00000000:3B:00.0", "0000:3b:00.0"),
        ("0000:3b:00.0", "0000:3b:00.0"),
        ("0000:01:00.0", "0000:01:00.0"),
        ("3b:00.0", "0000:3b:00.0"),
        ("PCI:0000:3b:00", "0000:3b:00.0"),
        ("0000000F:01:00.0", "000f:01:00.0"),
        ("N/A", None),
        ("", None),
        (None, None),
        ("GPU-5e1f", None),
        ("100000000:01:00.0", None),
    ],
)
def test_normalize_bus_id(raw, expected):
    assert normalize_bus_id(raw) == expected


def test_sample_is_frozen_and_labels_sorted():
    s = Sample("temperature_c", 40.0, "C", labels=make_labels({"sensor": "b", "index": 1, "none": None}))
    assert s.labels == (("index", "1"), ("sensor", "b"))
    assert s.label("sensor") == "b" and s.label("missing") is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.value = 1.0  # type: ignore[misc]
    assert hash(s) == hash(Sample("temperature_c", 40.0, "C", labels=(("index", "1"), ("sensor", "b"))))


def test_parse_error_names_line():
    e = ParseError("bad thing", 7)
    assert isinstance(e, ValueError)
    assert e.line == 7 and str(e) == "line 7: bad thing"
    assert ParseError("whole").line is None


def test_result_value_helpers():
    r = ParseResult(samples=[Sample("power_w", 1.0, "W", card="a"), Sample("power_w", 2.0, "W", card="a")])
    assert len(r.find("power_w", "a")) == 2
    with pytest.raises(LookupError):
        r.value("power_w", "a")
    assert r.value("power_w", "b") is None
    other = ParseResult(cards=[CardIdentity(card="a", vendor="nvidia")])
    r.extend(other)
    assert r.cards[0].card == "a"


def test_metrics_table():
    for name in (
        "temperature_c",
        "memory_temperature_c",
        "power_w",
        "power_limit_w",
        "energy_j",
        "utilization_pct",
        "memory_utilization_pct",
        "memory_used_bytes",
        "memory_total_bytes",
        "memory_free_bytes",
        "sm_clock_mhz",
        "mem_clock_mhz",
        "aiclk_mhz",
        "fan_rpm",
        "fan_pct",
        "voltage_v",
        "current_a",
        "pcie_link_gen",
        "pcie_link_width",
        "pcie_replay_total",
        "ecc_corrected_total",
        "ecc_uncorrected_total",
        "throttle_reasons",
        "heartbeat",
        "link_up",
        "link_retrain_total",
        "xid_last",
        "tensor_active_pct",
        "node_power_w",
        "psu_input_power_w",
        "psu_capacity_w",
        "inlet_temperature_c",
        "throttle_hw_slowdown",
        "throttle_sw_thermal_slowdown",
    ):
        unit, description = METRICS[name]
        assert unit and description
    assert METRICS["memory_used_bytes"][0] == "bytes"
    assert METRICS["energy_j"][0] == "J"


def test_parse_unknown_format_lists_known_ones():
    with pytest.raises(ParseError) as exc:
        parse("nvidia-smi-json", "{}")
    for name in (
        "nvidia-smi-csv",
        "nvidia-smi-xml",
        "prometheus",
        "tt-smi",
        "ipmitool-sdr",
        "ipmitool-sensor",
        "redfish",
    ):
        assert name in FORMATS
        assert name in str(exc.value)


def test_parse_nvidia_smi_csv_with_default_fields():
    from tests.parsers.conftest import read_fixture

    r = parse("nvidia-smi-csv", read_fixture("nvidia_smi_h100_8gpu_nounits.csv"), node="gpu07")
    assert len(r.cards) == 8
    r = parse("nvidia-smi-xml", read_fixture("nvidia_smi_q_x_570.xml"))
    assert r.cards[0].driver_version == "570.124.06"


def test_no_django_imported():
    import subprocess
    import sys

    code = "import sys, monitoring.parsers; print('django' in sys.modules)"
    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=repo)
    assert out.stdout.strip() == "False"
