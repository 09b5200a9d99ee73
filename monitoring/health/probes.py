"""Check commands run on a node (over SSH from the login host, or by the node's agent) and the pure
parsers of what they print. Commands are argv lists built from a check's parameters, never shell
strings; a probe's key names the command and its argument, so one run serves every check that needs it.

Formats (real outputs, see tests/monitoring/test_health_probes.py):
- ``ps -e -o comm=``: one process name per line (Linux truncates to 15 characters);
- ``df -P -k <path>``: POSIX df, a header and one line per file system;
- ``findmnt -J -M <path>``: util-linux JSON ``{"filesystems": [{"target", "source", "fstype",
  "options"}]}``, exit 1 and no output when nothing is mounted there;
- ``ibstat``: ``CA '<name>'`` blocks with ``Port <n>:`` sections (``State:``, ``Rate:``);
- driver and firmware: nvidia-smi's CSV query and tt-smi's snapshot, through the telemetry parsers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from monitoring.parsers import ParseError, parse
from monitoring.parsers.nvidia_smi import nvidia_smi_argv, parse_nvidia_smi_csv

NVIDIA_VERSION_FIELDS = ("pci.bus_id", "driver_version", "vbios_version")
#: exit statuses of a command that is not installed on the node
NOT_INSTALLED = frozenset({126, 127})


def probe_argv(key: str) -> list[str]:
    """The argv of probe ``key`` (``name`` or ``name:argument``)."""
    name, _sep, arg = key.partition(":")
    if name == "ps":
        return ["ps", "-e", "-o", "comm="]
    if name == "df":
        return ["df", "-P", "-k", arg]
    if name == "findmnt":
        return ["findmnt", "-J", "-M", arg]
    if name == "ibstat":
        return ["ibstat"]
    if name == "nvidia-smi":
        return nvidia_smi_argv(NVIDIA_VERSION_FIELDS)
    if name == "tt-smi":
        return ["tt-smi", "-s", "--snapshot_no_tty"]
    raise ValueError(f"unknown probe {key!r}")


def running_processes(stdout: str) -> set[str]:
    return {line.strip() for line in stdout.splitlines() if line.strip()}


@dataclass(frozen=True)
class DiskUsage:
    mount: str
    size_kb: int
    available_kb: int

    @property
    def free_pct(self) -> float:
        return 100.0 * self.available_kb / self.size_kb if self.size_kb else 0.0


def parse_df(stdout: str) -> DiskUsage | None:
    """The last file system line of ``df -P -k`` (the one holding the path)."""
    rows = [line.split() for line in stdout.splitlines()[1:] if line.strip()]
    for row in reversed(rows):
        if len(row) >= 6 and row[1].isdigit() and row[3].isdigit():
            return DiskUsage(mount=" ".join(row[5:]), size_kb=int(row[1]), available_kb=int(row[3]))
    return None


def parse_findmnt(stdout: str) -> dict[str, str] | None:
    """The first file system of ``findmnt -J``; None when the output holds none."""
    try:
        data = json.loads(stdout) if stdout.strip() else {}
    except json.JSONDecodeError:
        return None
    systems = data.get("filesystems") if isinstance(data, dict) else None
    if not systems or not isinstance(systems[0], dict):
        return None
    return {k: str(v) for k, v in systems[0].items() if v is not None and not isinstance(v, list | dict)}


@dataclass(frozen=True)
class IBPort:
    ca: str
    port: int
    state: str
    physical_state: str
    rate_gbps: float


_CA_RE = re.compile(r"^CA '([^']+)'")
_PORT_RE = re.compile(r"^\s*Port (\d+):\s*$")
_FIELD_RE = re.compile(r"^\s*([A-Za-z ]+):\s*(.*)$")


def parse_ibstat(stdout: str) -> list[IBPort]:
    ports: list[IBPort] = []
    ca, port, fields = "", None, dict[str, str]()

    def flush() -> None:
        if port is not None:
            rate = fields.get("Rate", "0").split()[0]
            ports.append(
                IBPort(
                    ca=ca,
                    port=port,
                    state=fields.get("State", ""),
                    physical_state=fields.get("Physical state", ""),
                    rate_gbps=float(rate) if re.fullmatch(r"\d+(\.\d+)?", rate) else 0.0,
                )
            )

    for line in stdout.splitlines():
        if m := _CA_RE.match(line):
            flush()
            ca, port, fields = m.group(1), None, {}
        elif m := _PORT_RE.match(line):
            flush()
            port, fields = int(m.group(1)), {}
        elif port is not None and (m := _FIELD_RE.match(line)):
            fields[m.group(1).strip()] = m.group(2).strip()
    flush()
    return ports


@dataclass(frozen=True)
class CardVersions:
    card: str
    driver: str
    firmware: Mapping[str, str]


def parse_versions(key: str, stdout: str) -> list[CardVersions]:
    """Driver and firmware of each card, from the nvidia-smi query or a tt-smi snapshot."""
    try:
        if key == "nvidia-smi":
            result = parse_nvidia_smi_csv(stdout, list(NVIDIA_VERSION_FIELDS))
        else:
            result = parse("tt-smi", stdout)
    except ParseError:
        return []
    out = []
    for card in result.cards:
        firmware = dict(card.firmware)
        if card.vbios_version:
            firmware["vbios"] = card.vbios_version
        out.append(
            CardVersions(card=card.bus_id or card.card, driver=card.driver_version or "", firmware=firmware)
        )
    return out
