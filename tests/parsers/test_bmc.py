import pytest

from monitoring.parsers import (
    METRICS,
    ParseError,
    parse,
    parse_chassis_power_status,
    parse_ipmitool_sdr,
    parse_ipmitool_sensor,
    parse_redfish,
)
from tests.parsers.conftest import read_fixture


def _values(r, metric):
    return [(s.label("sensor"), s.value) for s in r.samples if s.metric == metric]


def test_ipmitool_sdr_dell_r720():
    r = parse_ipmitool_sdr(read_fixture("ipmitool_sdr_r720.txt"), node="r720")
    assert r.problems == []
    assert r.value("inlet_temperature_c", sensor="Inlet Temp") == 23.0
    assert r.value("temperature_c", sensor="Exhaust Temp") == 38.0
    assert r.value("temperature_c", sensor="Temp", instance="1") == 54.0
    assert r.value("temperature_c", sensor="Temp", instance="2") == 49.0
    assert r.value("node_power_w", sensor="Pwr Consumption") == 168.0
    assert r.value("current_a", sensor="Current 1") == 0.6
    assert r.value("voltage_v", sensor="Voltage 1") == 230.0
    assert _values(r, "fan_rpm") == [
        ("Fan1 RPM", 3600.0),
        ("Fan2 RPM", 3480.0),
        ("Fan3 RPM", 3600.0),
        ("Fan4 RPM", 3480.0),
        ("Fan5 RPM", 3360.0),
        ("Fan6 RPM", 0.0),
    ]
    assert r.find("current_a", sensor="Current 2") == []  # no reading
    assert len(r.samples) == 13
    assert all(s.node == "r720" and s.card is None for s in r.samples)
    assert all(s.metric in METRICS and s.unit == METRICS[s.metric][0] for s in r.samples)
    assert [(e.severity, e.data["sensor"], e.data["status"]) for e in r.events] == [
        ("critical", "Fan6 RPM", "cr"),
        ("warning", "Fan Redundancy", "nc"),
    ]
    assert r.events[0].kind == "bmc_sensor"


def test_ipmitool_sdr_csv_variant():
    r = parse_ipmitool_sdr(read_fixture("ipmitool_sdr_c.csv"))
    assert r.value("inlet_temperature_c", sensor="Inlet Temp") == 23.0
    assert r.value("node_power_w", sensor="Pwr Consumption") == 168.0
    assert r.value("psu_input_power_w", sensor="PS1 Input Power") == 92.0
    assert r.value("fan_rpm", sensor="Fan6 RPM") == 0.0
    assert [(p.line, p.field, p.raw) for p in r.problems] == [(11, "Temp", "hot")]
    assert [e.data["sensor"] for e in r.events] == ["Fan6 RPM"]


def test_ipmitool_sensor_thresholds_in_labels():
    r = parse_ipmitool_sensor(read_fixture("ipmitool_sensor_r720.txt"))
    assert r.problems == []
    (inlet,) = r.find("inlet_temperature_c")
    assert inlet.value == 23.0
    assert dict(inlet.labels) == {
        "sensor": "Inlet Temp",
        "lcr": "-7.000",
        "lnc": "3.000",
        "unc": "42.000",
        "ucr": "47.000",
    }
    assert r.value("node_power_w", sensor="Pwr Consumption") == 168.0
    assert r.find("current_a", sensor="Current 2") == []
    assert [(e.severity, e.data["sensor"]) for e in r.events] == [("critical", "Fan6 RPM")]


def test_ipmitool_garbage_raises():
    with pytest.raises(ParseError) as exc:
        parse_ipmitool_sdr("\nError: Unable to establish IPMI v2 / RMCP+ session\n")
    assert exc.value.line == 2
    with pytest.raises(ParseError):
        parse_ipmitool_sensor("Could not open device at /dev/ipmi0\n")
    assert parse_ipmitool_sdr("").samples == []


def test_chassis_power_status():
    assert parse_chassis_power_status("Chassis Power is on\n") is True
    assert parse_chassis_power_status("Chassis Power is off") is False
    assert parse_chassis_power_status("Chassis Power Control: Cycle") is None
    assert parse_chassis_power_status("Error: Unable to establish IPMI v2 / RMCP+ session") is None


def test_redfish_legacy_thermal():
    r = parse_redfish(read_fixture("redfish_thermal_legacy.json"), node="idrac")
    assert r.problems == []
    (inlet,) = r.find("inlet_temperature_c")
    assert inlet.value == 24.0
    assert dict(inlet.labels) == {
        "sensor": "System Board Inlet Temp",
        "lcr": "-7",
        "lnc": "3",
        "ucr": "47",
        "unc": "42",
    }
    assert _values(r, "temperature_c") == [("System Board Exhaust Temp", 41.0), ("CPU1 Temp", 61.0)]
    assert _values(r, "fan_rpm") == [("System Board Fan1A", 5400.0), ("System Board Fan2A", 0.0)]
    assert _values(r, "fan_pct") == [("PSU Fan", 34.0)]
    assert [(e.severity, e.data["sensor"]) for e in r.events] == [("critical", "System Board Fan2A")]
    assert all(s.node == "idrac" for s in r.samples)


def test_redfish_legacy_power():
    import json

    r = parse_redfish(json.loads(read_fixture("redfish_power_legacy.json")))
    assert r.value("node_power_w") == 412.0
    assert r.value("node_power_capacity_w") == 1582.0
    assert _values(r, "psu_capacity_w") == [("PS1 Status", 750.0), ("PS2 Status", 750.0)]
    assert _values(r, "psu_output_power_w") == [("PS1 Status", 215.0)]
    assert _values(r, "psu_input_power_w") == [("PS1 Status", 231.0)]
    assert r.value("voltage_v") == 230.0
    assert [(e.severity, e.data["sensor"]) for e in r.events] == [("critical", "PS2 Status")]


def test_redfish_power_subsystem():
    r = parse_redfish(read_fixture("redfish_power_subsystem.json"))
    assert r.value("node_power_capacity_w") == 2000.0
    assert _values(r, "psu_capacity_w") == [("Power Supply Bay 1", 1000.0)]  # Bay2 absent
    assert r.value("psu_input_power_w", sensor="Power Supply Bay 1") == 374.19
    assert r.value("psu_output_power_w", sensor="Power Supply Bay 1") == 352.1
    assert r.value("voltage_v") == 230.2


def test_redfish_psu_metrics_resource_alone():
    doc = {
        "@odata.type": "#PowerSupplyMetrics.v1_0_1.PowerSupplyMetrics",
        "Name": "PSU1 metrics",
        "InputPowerWatts": {"Reading": 120.5},
        "OutputPowerWatts": {"Reading": None},
    }
    r = parse_redfish(doc)
    assert _values(r, "psu_input_power_w") == [("PSU1 metrics", 120.5)]
    assert r.find("psu_output_power_w") == []


def test_redfish_thermal_subsystem():
    r = parse_redfish(read_fixture("redfish_thermal_subsystem.json"))
    assert _values(r, "fan_pct") == [("Fan Bay 1", 45.0)]
    assert _values(r, "fan_rpm") == [("Fan Bay 1", 2200.0)]
    assert _values(r, "inlet_temperature_c") == [("Intake", 24.8), ("IntakeTemp", 24.8)]
    assert _values(r, "temperature_c") == [("Internal", 39.0), ("Exhaust", 40.5), ("CPU1", 44.0)]
    assert [(e.severity, e.data["sensor"]) for e in r.events] == [("warning", "Fan Bay 2")]


def test_redfish_environment_metrics():
    r = parse_redfish(read_fixture("redfish_environment_metrics.json"))
    assert r.value("node_power_w") == 374.2
    assert r.value("temperature_c") == 26.5
    assert r.value("energy_j") == 1.5 * 3.6e6
    assert _values(r, "fan_pct") == [("Fan Bay 1", 45.0)]


def test_redfish_bad_input():
    with pytest.raises(ParseError) as exc:
        parse_redfish('{\n  "Temperatures": [\n')
    assert exc.value.line == 3
    with pytest.raises(ParseError):
        parse_redfish("[1, 2]")
    r = parse_redfish({"Temperatures": [{"Name": "X", "ReadingCelsius": "hot"}]})
    assert [(p.field, p.raw) for p in r.problems] == [("Temperatures[0].ReadingCelsius", "'hot'")]
    assert parse_redfish({"@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot"}).samples == []


def test_dispatch_bmc_formats():
    assert parse("ipmitool-sdr", read_fixture("ipmitool_sdr_r720.txt")).value("node_power_w") == 168.0
    assert parse("ipmitool-sensor", read_fixture("ipmitool_sensor_r720.txt")).value("node_power_w") == 168.0
    assert parse("redfish", read_fixture("redfish_power_legacy.json")).value("node_power_w") == 412.0
