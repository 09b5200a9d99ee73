"""Render simulated cards as the real tools print them (the formats in shared FORMATS.md).

* :func:`nvidia_smi_csv` - ``nvidia-smi --query-gpu=<DEFAULT_QUERY_FIELDS> --format=csv,noheader,nounits``
* :func:`tt_smi_snapshot` - ``tt-smi -s --snapshot_no_tty`` JSON
* :func:`dcgm_exporter` - dcgm-exporter's Prometheus text on :9400/metrics

The output goes through monitoring's real parsers, so whatever the parsers accept from the field, the
demo exercises too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from portal.demo.physics import CardSim

NA = "[N/A]"
THROTTLE_IDLE, THROTTLE_SW_POWER, THROTTLE_HW_THERMAL = 0x1, 0x4, 0x40


def nvidia_bus_id(bus_id: str) -> str:
    """``0000:18:00.0`` -> ``00000000:18:00.0`` (nvidia-smi prints an 8-digit domain, upper case)."""
    parts = bus_id.split(":")
    domain = parts[0] if len(parts) == 3 else "0"
    return f"{int(domain, 16):08X}:{':'.join(parts[-2:]).upper()}"


def _throttle(card: CardSim) -> int:
    if card.throttling:
        return THROTTLE_HW_THERMAL
    if card.util < 0.05:
        return THROTTLE_IDLE
    return THROTTLE_SW_POWER if card.power_w >= card.kind.limit_w * 0.98 else 0


def _nvidia_row(card: CardSim) -> list[str]:
    k = card.kind
    unified = k.memory_mib == 0
    return [
        str(card.index),
        card.uuid,
        nvidia_bus_id(card.bus_id),
        k.product,
        f"{card.temp_c:.0f}",
        NA if unified else f"{card.temp_c - 3:.0f}",
        f"{card.power_w:.2f}",
        f"{k.limit_w:.2f}" if k.limit_w else NA,
        f"{card.util * 100:.0f}",
        NA if unified else f"{card.mem_util * 100:.0f}",
        NA if unified else str(k.memory_mib),
        NA if unified else str(card.memory_used_mib),
        str(card.sm_clock_mhz),
        NA if unified else str(k.mem_clock_mhz),
        NA if unified else str(k.pcie[0]),
        NA if unified else str(k.pcie[1]),
        NA,  # fan.speed: passively cooled in a server / shared system fan
        NA if unified else "0",
        NA if unified else "0",
        f"0x{_throttle(card):016X}",
    ]


def nvidia_smi_csv(cards: Sequence[CardSim]) -> str:
    """One line per GPU, fields in monitoring.parsers.DEFAULT_QUERY_FIELDS order."""
    return "".join(", ".join(_nvidia_row(c)) + "\n" for c in cards)


def _tt_device(card: CardSim) -> dict[str, object]:
    k = card.kind
    asic_w = card.power_w * 0.36
    return {
        "smbus_telem": {
            "ASIC_TEMPERATURE": hex(int(card.temp_c * 256)),
            "ETH_LIVE_STATUS": hex(card.eth_live_status()),
            "FAN_RPM": hex(card.fan_rpm),
            "HEARTBEAT": hex(card.heartbeat),
        },
        "board_info": {
            "bus_id": card.bus_id,
            "board_type": k.product,
            "board_id": f"{0x4011C200000 + card.seed % 0x100000:016x}",
            "coords": "N/A",
            "dram_status": True,
            "dram_speed": "16G",
            "pcie_speed": k.pcie[0],
            "pcie_width": str(k.pcie[1]),
        },
        "telemetry": {
            "voltage": f"{0.72 + 0.08 * card.util:.2f}",
            "current": f"{asic_w / 0.8:5.1f}",
            "power": f"{asic_w:5.1f}",
            "board_power": f"{card.power_w:5.1f}",
            "aiclk": f"{card.sm_clock_mhz:4d}",
            "asic_temperature": f"{card.temp_c:.1f}",
            "fan_speed": str(card.fan_rpm),
            "heartbeat": str(card.heartbeat),
        },
        "firmwares": {
            "fw_bundle_version": "18.7.0.0",
            "cm_fw": "0.20.0.0",
            "eth_fw": "1.5.0",
            "dm_app_fw": "0.17.0.0",
            "gddr_fw": "2.10.0",
        },
        "limits": {
            "tdp_limit": "150",
            "tdc_limit": "250",
            "asic_fmax": str(k.sm_clock_mhz[1]),
            "thm_limit": "95",
            "bus_peak_limit": 0,
            "board_power_limit": f"{k.limit_w:.0f}",
        },
    }


def tt_smi_snapshot(hostname: str, cards: Sequence[CardSim], now: datetime) -> str:
    """The JSON of ``tt-smi -s --snapshot_no_tty`` (``time`` is local time without a zone)."""
    doc = {
        "time": now.replace(tzinfo=None).isoformat(),
        "host_info": {
            "OS": "Linux",
            "Distro": "Ubuntu 22.04.5 LTS",
            "Kernel": "6.8.0-60-generic",
            "Hostname": hostname,
            "Platform": "x86_64",
            "Python": "3.10.12",
            "Memory": "251.53 GB",
            "Driver": "TT-KMD 2.0.0",
        },
        "host_sw_vers": {"tt_smi": "3.0.15", "pyluwen": "0.7.2"},
        "device_info": [_tt_device(c) for c in cards],
    }
    return json.dumps(doc, indent=4)


_DCGM = [
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", lambda c: str(c.sm_clock_mhz)),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", lambda c: str(c.kind.mem_clock_mhz)),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", lambda c: f"{c.temp_c - 3:.0f}"),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda c: f"{c.temp_c:.0f}"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda c: f"{c.power_w:.6f}"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).",
     lambda c: str(int(c.energy_j * 1000))),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", lambda c: "0"),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda c: f"{c.util * 100:.0f}"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", lambda c: f"{c.mem_util * 100:.0f}"),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", lambda c: str(c.xid)),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).",
     lambda c: str(c.kind.memory_mib - c.memory_used_mib)),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", lambda c: str(c.memory_used_mib)),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.",
     lambda c: f"{c.util * 0.95:.6f}"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active.",
     lambda c: f"{c.util * 0.55:.6f}"),
]  # fmt: skip


def dcgm_exporter(hostname: str, cards: Sequence[CardSim], *, driver: str = "550.54.15") -> str:
    """dcgm-exporter's /metrics page for the GPUs of one node."""
    lines: list[str] = []
    for name, kind, help_text, value in _DCGM:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for c in cards:
            labels = (
                f'gpu="{c.index}",UUID="{c.uuid}",pci_bus_id="{nvidia_bus_id(c.bus_id)}",device="nvidia{c.index}",'
                f'modelName="{c.kind.product}",Hostname="{hostname}",DCGM_FI_DRIVER_VERSION="{driver}"'
            )
            lines.append(f"{name}{{{labels}}} {value(c)}")
    return "\n".join(lines) + "\n"


def node_exporter(reads: float, writes: float, *, device: str = "nvme0n1") -> str:
    """node_exporter's disk counters of one node (the part of /metrics the I/O-bound note reads)."""
    return (
        "# HELP node_disk_reads_completed_total The total number of reads completed successfully.\n"
        "# TYPE node_disk_reads_completed_total counter\n"
        f'node_disk_reads_completed_total{{device="{device}"}} {reads:.0f}\n'
        "# HELP node_disk_writes_completed_total The total number of writes completed successfully.\n"
        "# TYPE node_disk_writes_completed_total counter\n"
        f'node_disk_writes_completed_total{{device="{device}"}} {writes:.0f}\n'
    )
