"""The binary forms the telemetry store sends PostgreSQL (monitoring.storage): COPY streams and
arrays packed column by column. Checked against the format written out field by field, and read
back by a real PostgreSQL."""

from __future__ import annotations

import datetime as dt
import struct

import psycopg
import pytest
from django.db import connection

from monitoring import storage

T0 = dt.datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=dt.UTC)
ONE_TIME = [(T0, 7, 41.5), (T0, 8, -0.0), (T0, 2**31 - 1, 1e300), (T0, 1, -273.15)]
MANY_TIMES = [
    (T0, 7, 1.0),
    (T0 + dt.timedelta(seconds=10), 7, 2.0),
    (dt.datetime(1999, 12, 31, 23, 59, 59, tzinfo=dt.UTC), 9, 3.0),  # before PostgreSQL's epoch
    (T0.astimezone(dt.timezone(dt.timedelta(hours=8))), 10, 4.0),  # the same instant elsewhere
]


def _reference_copy(rows: list[tuple[dt.datetime, int, float]]) -> bytes:
    """PostgreSQL's binary COPY format, written out field by field."""
    out = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
    for ts, sid, value in rows:
        micros = (ts - dt.datetime(2000, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
        out += struct.pack(">h", 3)
        out += struct.pack(">iq", 8, micros) + struct.pack(">ii", 4, sid) + struct.pack(">id", 8, value)
    return out + struct.pack(">h", -1)


@pytest.mark.parametrize(
    "rows", [ONE_TIME, MANY_TIMES, ONE_TIME[:1], []], ids=["one", "many", "single", "empty"]
)
def test_copy_stream_is_the_format_field_by_field(rows: list[tuple[dt.datetime, int, float]]) -> None:
    assert storage._copy_binary(rows) == _reference_copy(rows)


@pytest.mark.django_db
@pytest.mark.skipif("connection.vendor != 'postgresql'")
@pytest.mark.parametrize("rows", [ONE_TIME, MANY_TIMES], ids=["one", "many"])
def test_arrays_read_back_by_postgresql(rows: list[tuple[dt.datetime, int, float]]) -> None:
    connection.ensure_connection()
    sids, tss, values = storage._columns(rows, (1, 0, 2))
    with psycopg.Cursor(connection.connection) as cur:
        cur.execute("SELECT %b::int4[], %b::timestamptz[], %b::float8[]", [sids, tss, values], binary=True)
        got = cur.fetchone()
    assert got is not None
    assert got[0] == [r[1] for r in rows]
    assert got[1] == [r[0] for r in rows]
    assert got[2] == [r[2] for r in rows]


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_copy_stream_read_back_by_postgresql() -> None:
    connection.ensure_connection()
    pg = connection.connection
    with psycopg.Cursor(pg) as cur:
        cur.execute("CREATE TEMP TABLE packed (ts timestamptz, series_id int4, value float8)")
        with cur.copy("COPY packed (ts, series_id, value) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(storage._copy_binary(MANY_TIMES + ONE_TIME))
        cur.execute("SELECT ts, series_id, value FROM packed")
        assert cur.fetchall() == MANY_TIMES + ONE_TIME
        cur.execute("DROP TABLE packed")
