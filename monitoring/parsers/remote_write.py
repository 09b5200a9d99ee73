"""Prometheus remote write 1.0: a snappy-compressed protobuf ``WriteRequest``.

What Prometheus, Grafana Alloy and vmagent POST (``Content-Encoding: snappy``,
``Content-Type: application/x-protobuf``).  Pure Python, no generated code: the snappy block
format and the few protobuf messages involved are small.  The ingest endpoint
(``/api/monitoring/remote-write/``) maps the series to nodes and cards with
:mod:`monitoring.parsers.prom_mapping`.

    message WriteRequest { repeated TimeSeries timeseries = 1; reserved 2; repeated MetricMetadata metadata = 3; }
    message TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; ... }
    message Label        { string name = 1; string value = 2; }
    message Sample       { double value = 1; int64 timestamp = 2; }   // ms since the epoch
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from .model import ParseError

MAX_DECOMPRESSED = 64 * 1024 * 1024
_DOUBLE = struct.Struct("<d").unpack_from  # a bigger body is refused before decompressing


@dataclass(slots=True)
class RemoteSeries:
    labels: dict[str, str]
    samples: list[tuple[int, float]] = field(default_factory=list)  # (timestamp ms, value)

    @property
    def name(self) -> str:
        return self.labels.get("__name__", "")


# -- snappy (block format, what remote write uses; not the framing format) ------------------------
def _uvarint(buf: bytes | bytearray, pos: int, end: int) -> tuple[int, int]:
    if pos < end and buf[pos] < 0x80:  # one byte: most tags and lengths
        return buf[pos], pos + 1
    shift = result = 0
    while True:
        if pos >= end:
            raise ParseError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 64:
            raise ParseError("varint longer than 64 bits")


def snappy_decompress(data: bytes, *, limit: int = MAX_DECOMPRESSED) -> bytes:
    """Decode one snappy block; ParseError on corrupt input or a declared size above ``limit``."""
    n = len(data)
    size, pos = _uvarint(data, 0, n)
    if size > limit:
        raise ParseError(f"snappy block declares {size} bytes, more than the {limit} allowed")
    out = bytearray()
    while pos < n:
        tag = data[pos]
        pos += 1
        kind = tag & 3
        if kind == 0:  # literal
            length = tag >> 2
            if length >= 60:
                extra = length - 59
                if pos + extra > n:
                    raise ParseError("truncated snappy literal length")
                length = int.from_bytes(data[pos : pos + extra], "little")
                pos += extra
            length += 1
            if pos + length > n:
                raise ParseError("truncated snappy literal")
            out += data[pos : pos + length]
            pos += length
        else:
            if kind == 1:
                if pos >= n:
                    raise ParseError("truncated snappy copy")
                length = ((tag >> 2) & 7) + 4
                offset = ((tag >> 5) << 8) | data[pos]
                pos += 1
            else:
                width = 2 if kind == 2 else 4
                if pos + width > n:
                    raise ParseError("truncated snappy copy")
                length = (tag >> 2) + 1
                offset = int.from_bytes(data[pos : pos + width], "little")
                pos += width
            if offset == 0 or offset > len(out):
                raise ParseError("snappy copy points before the start of the output")
            start = len(out) - offset
            if offset >= length:
                out += out[start : start + length]
            else:  # overlapping copy: the pattern repeats
                for i in range(length):
                    out.append(out[start + i])
        if len(out) > size:
            raise ParseError("snappy block longer than it declares")
    if len(out) != size:
        raise ParseError(f"snappy block declares {size} bytes, decoded {len(out)}")
    return bytes(out)


# -- protobuf wire format -------------------------------------------------------------------------
def _fields(buf: bytes, pos: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """Yield (field number, wire type, a, b): a varint's value in ``a``, else the span a:b."""
    while pos < end:
        key, pos = _uvarint(buf, pos, end)
        num, wt = key >> 3, key & 7
        if wt == 0:
            val, pos = _uvarint(buf, pos, end)
            yield num, wt, val, 0
        elif wt == 1:
            if pos + 8 > end:
                raise ParseError("truncated 64-bit field")
            yield num, wt, pos, pos + 8
            pos += 8
        elif wt == 2:
            length, pos = _uvarint(buf, pos, end)
            if pos + length > end:
                raise ParseError("truncated length-delimited field")
            yield num, wt, pos, pos + length
            pos += length
        elif wt == 5:
            if pos + 4 > end:
                raise ParseError("truncated 32-bit field")
            yield num, wt, pos, pos + 4
            pos += 4
        else:
            raise ParseError(f"unsupported protobuf wire type {wt}")


def _text(buf: bytes, lo: int, hi: int) -> str:
    try:
        return buf[lo:hi].decode("utf-8")
    except UnicodeDecodeError:
        raise ParseError("label is not UTF-8")


def _label(buf: bytes, lo: int, hi: int) -> tuple[str, str]:
    # the usual encoding: 0x0a <len> name 0x12 <len> value, both shorter than 128 bytes
    if hi - lo >= 4 and buf[lo] == 0x0A and buf[lo + 1] < 0x80:
        a = lo + 2
        b = a + buf[lo + 1]
        if b + 2 <= hi and buf[b] == 0x12 and buf[b + 1] < 0x80 and b + 2 + buf[b + 1] == hi:
            try:
                return buf[a:b].decode("utf-8"), buf[b + 2 : hi].decode("utf-8")
            except UnicodeDecodeError:
                raise ParseError("label is not UTF-8")
    name = value = ""
    for num, wt, a, b in _fields(buf, lo, hi):
        if num == 1 and wt == 2:
            name = _text(buf, a, b)
        elif num == 2 and wt == 2:
            value = _text(buf, a, b)
    return name, value


def _sample(buf: bytes, lo: int, hi: int) -> tuple[int, float]:
    ts, v = 0, 0.0
    for num, wt, a, _b in _fields(buf, lo, hi):
        if num == 1 and wt == 1:
            v = _DOUBLE(buf, a)[0]
        elif num == 2 and wt == 0:
            ts = a - (1 << 64) if a >= 1 << 63 else a
    return ts, v


def _series(buf: bytes, start: int, end: int) -> RemoteSeries:
    labels: dict[str, str] = {}
    samples: list[tuple[int, float]] = []
    for num, wt, lo, hi in _fields(buf, start, end):
        if num == 1 and wt == 2:
            name, value = _label(buf, lo, hi)
            labels[name] = value
        elif num == 2 and wt == 2:
            samples.append(_sample(buf, lo, hi))
    return RemoteSeries(labels, samples)


def parse_write_request(body: bytes, *, compressed: bool = True) -> list[RemoteSeries]:
    """The series of one remote-write POST body (snappy-compressed unless ``compressed=False``).

    Exemplars, native histograms and metadata are skipped.
    """
    raw = snappy_decompress(body) if compressed else body
    out = []
    for num, wt, lo, hi in _fields(raw, 0, len(raw)):
        if num == 1 and wt == 2:
            out.append(_series(raw, lo, hi))
    return out
