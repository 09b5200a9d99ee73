"""Parsing cost of the telemetry formats added for issue 16. No database.

- nvidia-smi CSV of an 8-GPU H100 node: the default list without a header (mapped by position)
  against the same 20 fields with a `--format=csv` header and units (mapped by the header's names).
- Prometheus remote write: decoding a WriteRequest of 2,000 series x 1 sample (the size of one
  node's dcgm-exporter + node_exporter scrape) and of 10,000 series; snappy here is literal-only
  (no compressor in the virtualenv), so copies, which a real body has, are not in the figure.

Run: .venv/bin/python benchmarks/telemetry_formats.py
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import measure, plain_args, row  # noqa: E402
from monitoring.parsers import DEFAULT_QUERY_FIELDS, parse_nvidia_smi_csv  # noqa: E402
from monitoring.parsers.remote_write import parse_write_request  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "parsers" / "fixtures"
UNITS = {"power.draw": "W", "power.limit": "W", "memory.total": "MiB", "memory.used": "MiB",
         "utilization.gpu": "%", "utilization.memory": "%", "clocks.sm": "MHz", "clocks.mem": "MHz",
         "fan.speed": "%"}  # fmt: skip


def with_header(noheader: str) -> str:
    head = ", ".join(f"{f} [{UNITS[f]}]" if f in UNITS else f for f in DEFAULT_QUERY_FIELDS)
    rows = []
    for line in noheader.splitlines():
        cols = [c.strip() for c in line.split(",")]
        rows.append(", ".join(f"{c} {UNITS[f]}" if f in UNITS and not c.startswith("[") else c
                              for f, c in zip(DEFAULT_QUERY_FIELDS, cols, strict=True)))  # fmt: skip
    return head + "\n" + "\n".join(rows) + "\n"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def _field(num: int, payload: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def write_request(series: int) -> bytes:
    body = bytearray()
    for i in range(series):
        labels = b"".join(
            _field(1, _field(1, k.encode()) + _field(2, v.encode()))
            for k, v in (("__name__", "DCGM_FI_DEV_GPU_TEMP"), ("Hostname", f"gpu{i // 8:03d}"),
                         ("UUID", f"GPU-{i:08d}-77aa-4c1e-9d0b-1f2e3d4c5b6a"), ("gpu", str(i % 8)),
                         ("instance", f"gpu{i // 8:03d}:9400"), ("job", "dcgm"))
        )  # fmt: skip
        sample = (
            _varint(1 << 3 | 1) + struct.pack("<d", 41.0 + i % 40) + _varint(2 << 3) + _varint(1780308000000)
        )
        body += _field(1, labels + _field(2, sample))
    return snappy_literals(bytes(body))


def snappy_literals(raw: bytes) -> bytes:
    """A valid snappy block of literals only (no compressor in the virtualenv)."""
    out = bytearray(_varint(len(raw)))
    for i in range(0, len(raw), 65536):
        chunk = raw[i : i + 65536]
        out.append(62 << 2)
        out += (len(chunk) - 1).to_bytes(3, "little")
        out += chunk
    return bytes(out)


def main() -> None:
    plain_args(__doc__)
    plain = (FIXTURES / "nvidia_smi_h100_8gpu_nounits.csv").read_text()
    headed = with_header(plain)
    assert len(parse_nvidia_smi_csv(headed).samples) == len(parse_nvidia_smi_csv(plain).samples)
    a = measure(lambda: parse_nvidia_smi_csv(plain), runs=200)
    b = measure(lambda: parse_nvidia_smi_csv(headed), runs=200)
    row("nvidia-smi CSV 8 GPUs, noheader,nounits", a, f"min {a['min_ms']:.3f} ms")
    row("nvidia-smi CSV 8 GPUs, header and units", b, f"min {b['min_ms']:.3f} ms "
        f"({(b['min_ms'] / a['min_ms'] - 1) * 100:+.0f}%)")  # fmt: skip
    for n in (2_000, 10_000):
        body = write_request(n)
        assert len(parse_write_request(body)) == n
        f = measure(lambda b=body: parse_write_request(b), runs=20)
        row(f"remote write decode {n:,} series ({len(body) // 1024} KiB)", f,
            f"{n / (f['median_ms'] / 1000):,.0f} samples/s")  # fmt: skip


if __name__ == "__main__":
    main()
