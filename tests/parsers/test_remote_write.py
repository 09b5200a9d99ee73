"""The remote-write decoder: hand-encoded messages, corrupt input, and what a real Prometheus sends."""

from __future__ import annotations

import http.server
import shutil
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitoring.parsers import ParseError
from monitoring.parsers.remote_write import parse_write_request, snappy_decompress
from tests.lab import in_ci


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num: int, payload: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _sample(value: float, ts: int) -> bytes:
    return _varint(1 << 3 | 1) + struct.pack("<d", value) + _varint(2 << 3) + _varint(ts)


def _label(name: str, value: str) -> bytes:
    return _field(1, name.encode()) + _field(2, value.encode())


def _literal_snappy(raw: bytes) -> bytes:
    """A valid snappy block made of literals only (4-byte lengths)."""
    out = bytearray(_varint(len(raw)))
    for i in range(0, len(raw), 65536):
        chunk = raw[i : i + 65536]
        out.append(62 << 2)  # literal, 3 length bytes follow
        out += (len(chunk) - 1).to_bytes(3, "little")
        out += chunk
    return bytes(out)


def test_snappy_literals_and_overlapping_copies() -> None:
    # 12 bytes: literal "abc", then a 1-byte-offset copy of 9 bytes from 3 back (overlapping)
    assert snappy_decompress(bytes([12, 2 << 2, *b"abc", (5 << 2) | 1, 3])) == b"abcabcabcabc"
    # a 2-byte-offset copy
    assert snappy_decompress(bytes([8, 3 << 2, *b"wxyz", (3 << 2) | 2, 4, 0])) == b"wxyzwxyz"
    assert snappy_decompress(_literal_snappy(b"x" * 70000)) == b"x" * 70000


@pytest.mark.parametrize(
    ("block", "reason"),
    [
        (bytes([5, 2 << 2, *b"abc"]), "snappy block declares 5 bytes, decoded 3"),
        (bytes([3, 2 << 2, *b"ab"]), "truncated snappy literal"),
        (bytes([6, 0, *b"a", (1 << 2) | 1, 9]), "snappy copy points before the start of the output"),
        (bytes([0x80, 0x80, 0x80, 0x80, 0x7F]), "snappy block declares 34091302912 bytes, more than the 67108864 allowed"),
        (b"", "truncated varint"),
    ],
)  # fmt: skip
def test_corrupt_snappy_is_a_parse_error(block: bytes, reason: str) -> None:
    with pytest.raises(ParseError) as exc:
        snappy_decompress(block)
    assert str(exc.value) == reason


def test_write_request_series_labels_samples_and_negative_timestamps() -> None:
    ts1 = _field(1, _label("__name__", "DCGM_FI_DEV_GPU_TEMP") + b"") + _field(1, _label("Hostname", "gpu07"))
    ts1 += _field(2, _sample(41.0, 1780308000000)) + _field(2, _sample(42.5, 1780308015000))
    ts2 = _field(1, _label("__name__", "up")) + _field(2, _sample(1.0, -1000))
    body = _field(1, ts1) + _field(1, ts2) + _field(3, b"\x08\x01")  # + a metadata entry, skipped
    series = parse_write_request(_literal_snappy(body))
    assert [(s.name, s.labels, s.samples) for s in series] == [
        (
            "DCGM_FI_DEV_GPU_TEMP",
            {"__name__": "DCGM_FI_DEV_GPU_TEMP", "Hostname": "gpu07"},
            [(1780308000000, 41.0), (1780308015000, 42.5)],
        ),
        ("up", {"__name__": "up"}, [(-1000, 1.0)]),
    ]
    assert parse_write_request(body, compressed=False) == series


def test_truncated_protobuf_is_a_parse_error() -> None:
    body = _field(1, _field(1, _label("__name__", "up")))[:-3]
    with pytest.raises(ParseError) as exc:
        parse_write_request(body, compressed=False)
    assert str(exc.value) == "truncated length-delimited field"


# -- a real Prometheus remote-writing to a test server --------------------------------------------
PROMETHEUS = shutil.which("prometheus") or (
    "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None
)


def _free_ports(count: int, lo: int = 9190, hi: int = 9199) -> list[int]:
    ports = []
    for port in range(lo, hi + 1):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
        if len(ports) == count:
            return ports
    raise RuntimeError(f"not {count} free ports in {lo}-{hi}")


def test_decodes_what_a_real_prometheus_remote_writes(tmp_path: Path) -> None:
    if PROMETHEUS is None:
        if in_ci():
            pytest.fail("CI=true and prometheus is not installed (apt-get install -y prometheus)")
        pytest.skip("prometheus is not installed (apt-get install -y prometheus)")
    received: list[tuple[dict[str, str], bytes]] = []

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((dict(self.headers.items()), body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    prom_port, recv_port = _free_ports(2)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", recv_port), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = {
        "global": {"scrape_interval": "1s"},
        "scrape_configs": [{"job_name": "self", "static_configs": [{"targets": [f"127.0.0.1:{prom_port}"]}]}],
        "remote_write": [
            {
                "url": f"http://127.0.0.1:{recv_port}/api/monitoring/remote-write",
                "queue_config": {"batch_send_deadline": "1s", "min_backoff": "100ms"},
            }
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        up: list[Any] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None and not up:
            time.sleep(0.5)
            for _headers, body in list(received):
                up += [s for s in parse_write_request(body) if s.name == "up"]
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        headers = received[0][0]
        assert headers["Content-Encoding"] == "snappy"
        assert headers["Content-Type"] == "application/x-protobuf"
        assert headers["X-Prometheus-Remote-Write-Version"] == "0.1.0"
        assert up[0].labels == {"__name__": "up", "instance": f"127.0.0.1:{prom_port}", "job": "self"}
        assert up[0].samples[0][1] == 1.0
        assert abs(up[0].samples[0][0] / 1000 - time.time()) < 120
        # everything Prometheus scraped from itself came through: its own build info among it
        names = {s.name for _h, body in received for s in parse_write_request(body)}
        assert {"up", "scrape_duration_seconds", "prometheus_build_info"} <= names
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        server.shutdown()
        server.server_close()
