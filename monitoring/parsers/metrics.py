"""Canonical metric names, units and unit conversions.

Every :class:`~monitoring.parsers.model.Sample` produced by a parser uses a name from
:data:`METRICS` and the unit listed there.  Labels distinguish several samples of the same
metric on one card/node (``sensor`` for BMC sensors, ``port`` for links, ``xid``...).
"""

from __future__ import annotations

import math

# units
C = "C"
W = "W"
J = "J"
PCT = "%"
BYTES = "bytes"
MHZ = "MHz"
RPM = "rpm"
V = "V"
A = "A"
COUNT = "count"
BOOL = "bool"
GEN = "gen"
LANES = "lanes"
BITMASK = "bitmask"
BYTES_PER_S = "bytes/s"
IOPS = "ops/s"

METRICS: dict[str, tuple[str, str]] = {
    # --- per accelerator -------------------------------------------------------------
    "temperature_c": (C, "GPU / ASIC core temperature; BMC temperature sensors carry a sensor label"),
    "memory_temperature_c": (C, "HBM / memory temperature"),
    "power_w": (
        W,
        "card power draw (NVIDIA: board power, average where both exist; TT: board power "
        "when reported, else ASIC power)",
    ),
    "power_instant_w": (W, "instantaneous card power (nvidia-smi power.draw.instant)"),
    "asic_power_w": (W, "Tenstorrent ASIC core power (tt-smi telemetry.power)"),
    "power_limit_w": (W, "configured card power limit"),
    "enforced_power_limit_w": (W, "power limit actually enforced"),
    "energy_j": (J, "energy consumed since driver load (counter)"),
    "utilization_pct": (PCT, "compute utilisation"),
    "memory_utilization_pct": (PCT, "memory controller / copy utilisation"),
    "memory_used_bytes": (BYTES, "framebuffer memory used"),
    "memory_total_bytes": (BYTES, "framebuffer memory total"),
    "memory_free_bytes": (BYTES, "framebuffer memory free"),
    "sm_clock_mhz": (MHZ, "SM clock"),
    "mem_clock_mhz": (MHZ, "memory clock"),
    "graphics_clock_mhz": (MHZ, "graphics clock"),
    "aiclk_mhz": (MHZ, "Tenstorrent AI clock"),
    "aiclk_max_mhz": (MHZ, "Tenstorrent AI clock limit (asic_fmax)"),
    "fan_rpm": (RPM, "fan speed (card fan, or BMC fan with a sensor label)"),
    "fan_pct": (PCT, "fan duty in percent"),
    "voltage_v": (V, "core voltage (card) or BMC voltage sensor (sensor label)"),
    "current_a": (A, "current (card) or BMC current sensor (sensor label)"),
    "current_limit_a": (A, "Tenstorrent TDC limit"),
    "thermal_limit_c": (C, "Tenstorrent thermal limit"),
    "pcie_link_gen": (GEN, "current PCIe generation"),
    "pcie_link_gen_max": (GEN, "maximum PCIe generation"),
    "pcie_link_width": (LANES, "current PCIe link width"),
    "pcie_link_width_max": (LANES, "maximum PCIe link width"),
    "pcie_replay_total": (COUNT, "PCIe replay counter"),
    "ecc_corrected_total": (COUNT, "ECC corrected errors (label scope=volatile|aggregate)"),
    "ecc_uncorrected_total": (COUNT, "ECC uncorrected errors (label scope=volatile|aggregate)"),
    "throttle_reasons": (BITMASK, "clock event / throttle reasons bitmask as float"),
    "pstate": (COUNT, "performance state number (P0 -> 0)"),
    "reset_required": (BOOL, "1 when the driver asks for a GPU reset"),
    "heartbeat": (COUNT, "firmware heartbeat counter (alive while it increases)"),
    "dram_ok": (BOOL, "Tenstorrent dram_status (1 = trained)"),
    "link_up": (BOOL, "1 when a link is up (label port=...)"),
    "link_retrain_total": (COUNT, "link retrain count (label port=...)"),
    "xid_last": (COUNT, "last Xid reported by DCGM (gauge, never resets)"),
    "xid_errors_total": (COUNT, "Xid occurrences (dcgm-exporter DCGM_EXP_XID_ERRORS_COUNT, label xid)"),
    "tensor_active_pct": (PCT, "tensor pipe active"),
    "graphics_engine_active_pct": (PCT, "graphics engine active"),
    "sm_active_pct": (PCT, "SM active"),
    "dram_active_pct": (PCT, "DRAM active"),
    "nvlink_bandwidth_total": (COUNT, "NVLink bandwidth counter, all lanes"),
    "nvlink_crc_flit_errors_total": (COUNT, "NVLink CRC flit errors"),
    "nvlink_crc_data_errors_total": (COUNT, "NVLink CRC data errors"),
    "nvlink_replay_errors_total": (COUNT, "NVLink replay errors"),
    "nvlink_recovery_errors_total": (COUNT, "NVLink recovery errors"),
    # --- per node (BMC) --------------------------------------------------------------
    "node_power_w": (W, "whole-node power consumption (BMC)"),
    "node_power_capacity_w": (W, "whole-node power capacity (Redfish PowerSubsystem.CapacityWatts)"),
    "psu_input_power_w": (W, "PSU input power (sensor label)"),
    "psu_output_power_w": (W, "PSU output power (sensor label)"),
    "psu_capacity_w": (W, "PSU rated capacity (sensor label)"),
    "inlet_temperature_c": (C, "air inlet / intake temperature"),
    # --- per node (node_exporter), label device -------------------------------------
    "net_rx_bytes_total": (BYTES, "bytes received on a network interface (counter)"),
    "net_tx_bytes_total": (BYTES, "bytes transmitted on a network interface (counter)"),
    "net_speed_bytes_per_s": (BYTES_PER_S, "network interface link speed"),
    "net_util_pct": (PCT, "interface utilisation: max(rx, tx) rate / link speed (derived on ingest)"),
    "disk_reads_total": (COUNT, "reads completed on a block device (counter)"),
    "disk_writes_total": (COUNT, "writes completed on a block device (counter)"),
    "disk_iops": (IOPS, "reads + writes completed per second (derived on ingest)"),
}

# clocks_event_reasons / clocks_throttle_reasons bits (nvml.h nvmlClocksEventReason*)
THROTTLE_BITS: dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}
for _name in THROTTLE_BITS:
    METRICS[f"throttle_{_name}"] = (BOOL, f"clock event reason {_name} active")

MIB = 1024 * 1024

# Plausible ranges, in the canonical unit: a value outside is a broken sensor, a unit mix-up or a
# forged sample, and is refused. Wide on purpose (a 100 kW chassis, -40 °C outdoor air, a 2^64
# counter); narrower where the unit itself bounds the value (a percentage, a flag, PCIe lanes).
COUNTER_MAX = float(2**64)
UNIT_BOUNDS: dict[str, tuple[float, float]] = {
    C: (-60.0, 250.0),
    W: (0.0, 100_000.0),
    J: (0.0, COUNTER_MAX),
    PCT: (0.0, 100.0),
    BYTES: (0.0, COUNTER_MAX),
    MHZ: (0.0, 100_000.0),
    RPM: (0.0, 100_000.0),
    V: (-1_000.0, 1_000.0),
    A: (-10_000.0, 10_000.0),
    COUNT: (0.0, COUNTER_MAX),
    BOOL: (0.0, 1.0),
    GEN: (0.0, 16.0),
    LANES: (0.0, 64.0),
    BITMASK: (0.0, COUNTER_MAX),
    BYTES_PER_S: (0.0, COUNTER_MAX),
    IOPS: (0.0, 1e12),
}
# metrics whose range is narrower (or other) than their unit's
METRIC_BOUNDS: dict[str, tuple[float, float]] = {
    "temperature_c": (-60.0, 200.0),
    "memory_temperature_c": (-60.0, 200.0),
    "inlet_temperature_c": (-60.0, 100.0),
    "thermal_limit_c": (0.0, 250.0),
    "pstate": (0.0, 32.0),
    # a percentage computed from two counters read a moment apart can overshoot a little
    "net_util_pct": (0.0, 1_000.0),
}


def bounds_of(metric: str) -> tuple[float, float]:
    """The plausible (low, high) of ``metric``, inclusive, in its canonical unit."""
    found = METRIC_BOUNDS.get(metric)
    return found if found is not None else UNIT_BOUNDS[METRICS[metric][0]]


def _bounds_table() -> dict[str, tuple[float, float]]:
    return {name: bounds_of(name) for name in METRICS}


# metric -> (low, high) for every metric: the ingest service checks a batch against this
BOUNDS: dict[str, tuple[float, float]] = _bounds_table()


def unit_of(metric: str) -> str:
    return METRICS[metric][0]


def mib_to_bytes(v: float) -> float:
    return v * MIB


def mj_to_j(v: float) -> float:
    return v / 1000.0


def ratio_to_pct(v: float) -> float:
    return v * 100.0


def mv_to_v(v: float) -> float:
    return v / 1000.0


def fahrenheit_to_c(v: float) -> float:
    return (v - 32.0) * 5.0 / 9.0


def throttle_flags(mask: int) -> dict[str, float]:
    """``throttle_<reason>`` -> 0.0/1.0 for every known bit of ``mask``."""
    return {f"throttle_{name}": 1.0 if mask & bit else 0.0 for name, bit in THROTTLE_BITS.items()}


def is_number(v: float) -> bool:
    return not math.isnan(v)
