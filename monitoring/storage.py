# ruff: noqa: S608 - identifiers interpolated here are this module's constants; values are parameters
"""The lowest storage layer of telemetry: the only place that branches on the database vendor.

PostgreSQL: daily partitions of ``monitoring_sample``, binary COPY for samples, one UPDATE/INSERT
of binary arrays for latest values (written behind the batch by this process's writer thread: see
"latest values, written behind the batch"), date_trunc rollups, partition drops for retention.
SQLite (the demo): plain tables, executemany, strftime buckets, DELETE for retention.
Everything above this module has one code path.
"""

from __future__ import annotations

import atexit
import datetime as dt
import logging
import operator
import os
import re
import struct
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from itertools import islice
from typing import Any

import psycopg
from django.db import IntegrityError, ProgrammingError, connection, transaction
from django.db.models import QuerySet
from psycopg import pq
from psycopg.adapt import Dumper

log = logging.getLogger(__name__)

SAMPLE_TABLE = "monitoring_sample"
LATEST_TABLE = "monitoring_latestvalue"
ROLLUP_TABLES = {60: "monitoring_rollup_1m", 3600: "monitoring_rollup_1h"}
_PARTITION_RE = re.compile(r"^monitoring_sample_p(\d{8})$")

# (database name, day) of partitions known to exist; filled on commit only, so a rolled-back
# CREATE never leaves a stale entry behind.
_known_partitions: set[tuple[str, dt.date]] = set()

SampleRow = tuple[dt.datetime, int, float]  # ts, series_id, value


# -- binary arrays ------------------------------------------------------------------------------
# A batch's columns go to PostgreSQL as binary arrays packed here in one struct call each (psycopg
# dumps a list element by element in Python: a tenth of a batch's time at 1,000 rows).
class _PackedArray(bytes):
    """A column already in PostgreSQL's binary array format."""

    oid = 0


class _Int4Array(_PackedArray):
    oid = 1007


class _Float8Array(_PackedArray):
    oid = 1022


class _TimestamptzArray(_PackedArray):
    oid = 1185


_PG_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
_ONE_US = dt.timedelta(microseconds=1)


def _array_header(oid: int, n: int) -> bytes:
    return struct.pack(">5i", 1, 0, oid, n, 1)  # 1 dimension, no NULLs, element type, size, from 1


def _strided(n: int, template: bytes, fields: Sequence[tuple[int, int, bytes]]) -> bytearray:
    """``n`` copies of ``template`` with each field (its offset in the template, its width, and
    the column packed big-endian in one struct call, ``width`` bytes per value) written into
    every copy, byte by byte over strided slices: all in C, a quarter of the time of packing the
    rows' values interleaved (40 against 180 us for a 1,000-row COPY)."""
    step = len(template)
    buf = bytearray(template * n)
    for offset, width, column in fields:
        for b in range(width):
            buf[offset + b :: step] = column[b::width]
    return buf


def _micros(values: Sequence[dt.datetime]) -> tuple[int | None, bytes]:
    """Times as PostgreSQL's microseconds since 2000: the one value when they are all the same
    (a batch's usual case), else ``None`` and the column packed."""
    micros = {ts: (ts - _PG_EPOCH) // _ONE_US for ts in set(values)}  # a batch has few times
    if len(micros) == 1:
        return next(iter(micros.values())), b""
    return None, struct.pack(f">{len(values)}q", *map(micros.__getitem__, values))


def _int4s(values: Sequence[int]) -> _Int4Array:
    n = len(values)
    body = _strided(n, struct.pack(">ii", 4, 0), [(4, 4, struct.pack(f">{n}i", *values))])
    return _Int4Array(_array_header(23, n) + body)


def _float8s(values: Sequence[float]) -> _Float8Array:
    n = len(values)
    body = _strided(n, struct.pack(">id", 8, 0.0), [(4, 8, struct.pack(f">{n}d", *values))])
    return _Float8Array(_array_header(701, n) + body)


def _timestamptzs(values: Sequence[dt.datetime]) -> _TimestamptzArray:
    n = len(values)
    same, column = _micros(values)
    body = _strided(n, struct.pack(">iq", 8, same or 0), [] if same is not None else [(4, 8, column)])
    return _TimestamptzArray(_array_header(1184, n) + body)


_COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)  # no flags, no header extension
_COPY_TRAILER = struct.pack(">h", -1)
_COPY_ROW = struct.Struct(">hiqiiid")  # 3 fields, each its length and value: ts, series_id, value


def _copy_binary(rows: Sequence[SampleRow]) -> bytes:
    """``rows`` (ts, series_id, value) as one binary COPY stream: :func:`copy_stream`."""
    if not rows:
        return _COPY_SIGNATURE + _COPY_TRAILER
    tss, sids, values = zip(*rows, strict=True)
    return copy_stream(tss, sids, values)


def copy_stream(tss: Sequence[dt.datetime], sids: Sequence[int], values: Sequence[float]) -> bytes:
    """Samples given as columns as one binary COPY stream (signature, tuples, trailer), packed
    column by column (:func:`_strided`): a twentieth of the time of ``copy.write_row`` row by
    row. A caller may pack it while it waits on the database (:func:`samples_write`'s ``packed``)."""
    n = len(sids)
    if not n:
        return _COPY_SIGNATURE + _COPY_TRAILER
    same, column = _micros(tss)
    fields = [] if same is not None else [(6, 8, column)]
    fields += [(18, 4, struct.pack(f">{n}i", *sids)), (26, 8, struct.pack(f">{n}d", *values))]
    body = _strided(n, _COPY_ROW.pack(3, 8, same or 0, 4, 0, 8, 0.0), fields)
    return _COPY_SIGNATURE + body + _COPY_TRAILER


class _PackedDumper(Dumper):
    format = pq.Format.BINARY

    def dump(self, obj: Any) -> bytes:
        return bytes(obj)


for _cls in (_Int4Array, _Float8Array, _TimestamptzArray):
    psycopg.adapters.register_dumper(
        _cls, type(f"{_cls.__name__}Dumper", (_PackedDumper,), {"oid": _cls.oid})
    )


def _columns(rows: Sequence[tuple[Any, Any, Any]], order: tuple[int, int, int]) -> list[_PackedArray]:
    """(series ids, times, values) of ``rows`` as binary arrays; ``order`` says where each is in a row."""
    sid, ts, value = order
    return _arrays([r[sid] for r in rows], [r[ts] for r in rows], [r[value] for r in rows])


def _arrays(sids: Sequence[int], tss: Sequence[dt.datetime], values: Sequence[float]) -> list[_PackedArray]:
    """Columns (series ids, times, values) as binary arrays."""
    return [_int4s(sids), _timestamptzs(tss), _float8s(values)]


def is_postgres() -> bool:
    return connection.vendor == "postgresql"


def _db_value(value: dt.datetime) -> Any:
    """A datetime as the backend wants it in raw SQL (SQLite: naive UTC text)."""
    return connection.ops.adapt_datetimefield_value(value)


def partition_name(day: dt.date) -> str:
    return f"{SAMPLE_TABLE}_p{day:%Y%m%d}"


# -- partitions ---------------------------------------------------------------------------------
def partitions_ensure(days: Iterable[dt.date]) -> list[str]:
    """Create the daily partitions of these days that do not exist yet; returns the names created."""
    if not is_postgres():
        return []
    db = connection.settings_dict["NAME"]
    wanted = sorted({d for d in days if (db, d) not in _known_partitions})
    created: list[str] = []
    if not wanted:
        return created
    with connection.cursor() as cur:
        # concurrent batches would race on the catalog: one creator at a time (until commit)
        cur.execute("SELECT pg_advisory_xact_lock(hashtext('monitoring_sample_partitions'))")
        for day in wanted:
            name = partition_name(day)
            cur.execute("SELECT to_regclass(%s)", [name])
            if cur.fetchone()[0] is None:
                start = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
                cur.execute(
                    f'CREATE TABLE IF NOT EXISTS "{name}" PARTITION OF {SAMPLE_TABLE} '
                    "FOR VALUES FROM (%s) TO (%s)",
                    [start, start + dt.timedelta(days=1)],
                )
                created.append(name)
    transaction.on_commit(lambda: _known_partitions.update((db, d) for d in wanted))
    return created


def partitions_forget() -> None:
    """Forget which partitions exist (they will be checked again)."""
    _known_partitions.clear()


def partitions_list() -> list[tuple[str, dt.date]]:
    """(name, day) of the existing sample partitions, oldest first."""
    if not is_postgres():
        return []
    with connection.cursor() as cur:
        cur.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = %s",
            [SAMPLE_TABLE],
        )
        names = [r[0] for r in cur.fetchall()]
    out = []
    for name in names:
        m = _PARTITION_RE.match(name)
        if m:
            out.append((name, dt.datetime.strptime(m.group(1), "%Y%m%d").date()))
    return sorted(out, key=lambda x: x[1])


def samples_drop_before(cutoff: dt.datetime) -> int:
    """Retention of raw samples. PostgreSQL drops whole partitions ending at or before ``cutoff``
    (so up to a day more is kept); SQLite deletes rows. Returns partitions dropped / rows deleted."""
    if not is_postgres():
        with connection.cursor() as cur:
            cur.execute(f"DELETE FROM {SAMPLE_TABLE} WHERE ts < %s", [_db_value(cutoff)])
            return int(cur.rowcount)
    db = connection.settings_dict["NAME"]
    dropped = 0
    with connection.cursor() as cur:
        for name, day in partitions_list():
            end = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)
            if end <= cutoff:
                cur.execute(f'DROP TABLE "{name}"')
                _known_partitions.discard((db, day))
                dropped += 1
    return dropped


def rollups_delete_before(step: int, cutoff: dt.datetime) -> int:
    with connection.cursor() as cur:
        cur.execute(f"DELETE FROM {ROLLUP_TABLES[step]} WHERE bucket < %s", [_db_value(cutoff)])
        return int(cur.rowcount)


# -- writes -------------------------------------------------------------------------------------
class PartitionMissing(Exception):
    """The daily partition of some rows does not exist (dropped since this process checked)."""


class SamplesRepeated(Exception):
    """Some rows repeat a (series, ts) already stored (the unique index refused the write); the
    transaction (or savepoint) is aborted: write the batch again with :func:`samples_merge`."""


def samples_write(
    rows: Sequence[SampleRow],
    day: dt.date | None = None,
    *,
    meanwhile: Callable[[], None] | None = None,
    packed: bytes | None = None,
) -> None:
    """Append raw samples (partitions must exist: see :func:`partitions_ensure`); one sample per
    (series, ts) and batch. A row that repeats a stored one raises :class:`SamplesRepeated`.

    ``day``: all rows fall in this UTC day; PostgreSQL then copies straight into its partition
    (no per-row routing, one partition's indexes opened), which is what a 1,000-sample batch needs.
    ``meanwhile``: called once the rows are sent, while PostgreSQL copies them (it must not use
    the database connection).
    ``packed``: PostgreSQL: ``rows`` already packed by :func:`copy_stream`.
    """
    if not rows:
        return
    with connection.cursor() as cur:
        if is_postgres():
            table = f'"{partition_name(day)}"' if day is not None else SAMPLE_TABLE
            try:
                with (
                    connection.wrap_database_errors,
                    cur.cursor.copy(
                        f"COPY {table} (ts, series_id, value) FROM STDIN (FORMAT BINARY)"
                    ) as copy,
                ):
                    # sent now (binary data is not buffered)
                    copy.write(packed if packed is not None else _copy_binary(rows))
                    if meanwhile is not None:
                        meanwhile()
            except (IntegrityError, ProgrammingError) as exc:
                # 23514: no partition for a row; 42P01: the partition copied into is gone
                state = getattr(exc.__cause__, "sqlstate", None)
                if state in ("23514", "42P01"):
                    raise PartitionMissing(str(exc)) from exc
                if state == "23505":
                    raise SamplesRepeated(str(exc)) from exc
                raise
        else:
            try:
                cur.executemany(
                    f"INSERT INTO {SAMPLE_TABLE} (ts, series_id, value) VALUES (%s, %s, %s)",
                    [(_db_value(ts), sid, v) for ts, sid, v in rows],
                )
            except IntegrityError as exc:
                raise SamplesRepeated(str(exc)) from exc
            if meanwhile is not None:
                meanwhile()


_MERGE_PG = f"""
INSERT INTO {SAMPLE_TABLE} (ts, series_id, value)
SELECT ts, series_id, value FROM unnest(%b::int4[], %b::timestamptz[], %b::float8[]) AS i (series_id, ts, value)
ON CONFLICT (series_id, ts) DO NOTHING RETURNING series_id, ts
"""


def samples_merge(rows: Sequence[SampleRow]) -> set[tuple[int, dt.datetime]]:
    """Append the rows whose (series, ts) is not stored yet; the stored sample stays as it was.
    Returns the (series_id, ts) written. The slow path of a batch that repeats stored samples (an
    agent resending after a timeout): PostgreSQL settles concurrent writers of one sample with
    ON CONFLICT; SQLite (the demo, one writer) reads what is there first."""
    if not rows:
        return set()
    if is_postgres():
        connection.ensure_connection()
        params = _columns(rows, (1, 0, 2))
        with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cur:
            cur.execute(_MERGE_PG, params, binary=True)
            return {(int(sid), ts) for sid, ts in cur.fetchall()}
    from monitoring.models import Sample

    stored = set(
        Sample.objects.filter(
            series_id__in={r[1] for r in rows},
            ts__gte=min(r[0] for r in rows),
            ts__lte=max(r[0] for r in rows),
        ).values_list("series_id", "ts")
    )
    fresh = [r for r in rows if (r[1], r[0]) not in stored]
    samples_write(fresh)
    return {(r[1], r[0]) for r in fresh}


# PostgreSQL: the rows as three binary arrays. The common case (every series has its row) is a
# plain UPDATE (HOT: the table leaves room on each page, migration 0005); when it updated fewer
# rows than it was given (new series, or a sample older than the stored one) the upsert follows.
_LATEST_UPDATE_PG = f"""
UPDATE {LATEST_TABLE} l SET ts = i.ts, value = i.value
FROM unnest(%b::int4[], %b::timestamptz[], %b::float8[]) AS i (series_id, ts, value)
WHERE l.series_id = i.series_id AND l.ts <= i.ts
"""
_LATEST_PG = f"""
INSERT INTO {LATEST_TABLE} (series_id, ts, value)
SELECT * FROM unnest(%b::int4[], %b::timestamptz[], %b::float8[]) AS i (series_id, ts, value)
ON CONFLICT (series_id) DO UPDATE SET ts = EXCLUDED.ts, value = EXCLUDED.value
WHERE {LATEST_TABLE}.ts <= EXCLUDED.ts
"""


# A read: a value queryset (``values_list``, not flat), or one compiled once by its caller as
# (SQL with %s placeholders, parameters): sent as it is and prepared on the server (no queryset to
# build and compile, no plan to make, per call).
Read = QuerySet[Any, Any] | tuple[str, Sequence[Any]]


def _compiled(reads: Sequence[Read]) -> list[tuple[str, Any, bool]]:
    """The SQL, parameters and whether to prepare it, of each read (Django compiles querysets
    here, in Python)."""
    return [(*r, True) if isinstance(r, tuple) else (*r.query.sql_with_params(), False) for r in reads]


def _read_here(read: Read) -> list[tuple[Any, ...]]:
    """Run a read on Django's connection (raw SQL returns what the driver gives: naive text times
    on SQLite, which is why compiled reads are for PostgreSQL)."""
    if not isinstance(read, tuple):
        return list(read)
    with connection.cursor() as cur:
        cur.execute(*read)
        return [tuple(row) for row in cur.fetchall()]


def _send_reads(
    conn: psycopg.Connection[Any], queries: Sequence[tuple[str, Any, bool]]
) -> list[psycopg.Cursor[Any]]:
    """Execute compiled reads (:func:`_compiled`) on a raw connection (in its pipeline, if one is
    open): one cursor each, to be fetched by the caller. A cursor that failed to send is closed
    with the others."""
    readers: list[psycopg.Cursor[Any]] = []
    try:
        for sql, params, prepare in queries:
            readers.append(reader := psycopg.Cursor(conn))
            reader.execute(sql, params, prepare=prepare or None)
    except BaseException:
        for reader in readers:
            reader.close()
        raise
    return readers


def _logged(queries: Sequence[tuple[str, Any, bool]]) -> None:
    """Reads sent past Django's cursor, logged by hand where Django logs queries (so that query
    counts in tests and the debug toolbar stay true)."""
    if connection.queries_logged:
        connection.queries_log.extend(
            {"sql": sql % tuple(params), "time": "0.000"} for sql, params, _prepared in queries
        )


def reads_first(
    reads: Sequence[Read], *, meanwhile: Callable[[], None] | None = None
) -> list[list[tuple[Any, ...]]]:
    """Run reads in the current transaction, returning each one's rows (tuples). PostgreSQL sends
    them together and, as the first statements of a transaction, with its BEGIN (pipeline mode):
    they cost the round trip the BEGIN costs anyway. ``meanwhile``: called once they are sent,
    while PostgreSQL runs them (it must not use the database connection); elsewhere, after them."""
    pg = None
    if reads and is_postgres() and psycopg.Pipeline.is_supported():
        connection.ensure_connection()
        pg = connection.connection
    if pg is None:
        out = [_read_here(r) for r in reads]
        if meanwhile is not None:
            meanwhile()
        return out
    queries = _compiled(reads)
    readers: list[psycopg.Cursor[Any]] = []
    try:
        with connection.wrap_database_errors:
            with pg.pipeline():
                readers = _send_reads(pg, queries)
                if meanwhile is not None:
                    meanwhile()
            out = [reader.fetchall() for reader in readers]
    finally:
        for reader in readers:
            reader.close()
    _logged(queries)
    return out


def latest_upsert(
    rows: Sequence[tuple[int, dt.datetime, float]], *, reads: Sequence[QuerySet[Any, Any]] = ()
) -> list[list[tuple[Any, ...]]]:
    """Upsert (series_id, ts, value); one row per series; an older ts never overwrites a newer one.

    ``reads``: value querysets to run first, as of before the upsert; their rows are returned in
    order. PostgreSQL sends them and the update in one round trip (pipeline mode): a batch's
    alert states and previous values cost no extra wait on the database.
    """
    if not is_postgres():
        out = [list(q) for q in reads]
        if rows:
            with connection.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {LATEST_TABLE} (series_id, ts, value) VALUES (%s, %s, %s) "
                    "ON CONFLICT (series_id) DO UPDATE SET ts = EXCLUDED.ts, value = EXCLUDED.value "
                    f"WHERE {LATEST_TABLE}.ts <= EXCLUDED.ts",
                    [(sid, _db_value(ts), v) for sid, ts, v in rows],
                )
        return out
    if not rows and not reads:
        return []
    connection.ensure_connection()
    pg = connection.connection
    params = _columns(rows, (0, 1, 2)) if rows else []
    queries = _compiled(reads)
    readers: list[psycopg.Cursor[Any]] = []
    # server-binding cursors (Django's are client-side): the arrays travel in binary
    update = psycopg.Cursor(pg)
    try:
        with connection.wrap_database_errors:
            # a libpq older than 14 has no pipeline mode: the same statements, one trip each
            with pg.pipeline() if psycopg.Pipeline.is_supported() else nullcontext():
                readers = _send_reads(pg, queries)
                if rows:
                    update.execute(_LATEST_UPDATE_PG, params, prepare=True, binary=True)
            out = [reader.fetchall() for reader in readers]
            if rows and update.rowcount < len(rows):  # new series (or older samples: no-ops)
                update.execute(_LATEST_PG, params, prepare=True, binary=True)
    finally:
        for used in [*readers, update]:
            used.close()
    _logged(queries)
    return out


# -- latest values, written behind the batch --------------------------------------------------
# A batch's latest-value UPDATE costs PostgreSQL two thirds of what its COPY costs (4 against 6-7 ms
# of server CPU per 1,000 rows here: benchmarks/telemetry_ingest.py). In the batch's path, even on
# a side connection that ran it beside the COPY, it held the ingest service at 36-43 % of raw COPY.
# So it is written behind: once a batch's samples commit, its latest values go to this process's
# writer, a thread with its own connection (autocommit, synchronous_commit off), which writes them
# while the caller goes on (validating its next batch, when the database is otherwise idle) and
# then calls the batch's ``then`` (the ingest signal: live frames show committed values).
#
# What "committed" means for latest values (/api/monitoring/latest/, the pages, alert inputs):
# - when an ingest call returns, its samples are committed; its latest values are committed
#   a few milliseconds later (their UPDATE's time; longer only while the writer is behind, and
#   a caller waits once WRITER_BACKLOG batches are pending, so the lag stays bounded);
# - in the process that ingested, every read of latest values sees them at once: such reads
#   wait for the writer first (latest_flush; LatestValue's manager does it, raw SQL readers call it);
# - another process may read the previous value for those milliseconds, never a value older
#   than the previous one, and never a latest value whose sample is not committed;
# - latest values are derived data: a write that fails twice is logged and the next batch of the
#   series rewrites its row; a PostgreSQL crash may lose their last fraction of a second
#   (synchronous_commit off), never a sample.
WRITER_BACKLOG = 16
WRITER_FLUSH_TIMEOUT_S = 10.0
_SIDE_PARAMS_DROPPED = ("cursor_factory", "context", "prepare_threshold")

ConnKey = tuple[Any, ...]


def _conn_key() -> ConnKey:
    """Which database Django's connection uses (a writer or side session per database)."""
    sd = connection.settings_dict
    return (sd["NAME"], sd["HOST"], sd["PORT"], sd["USER"])


def _connect_params() -> tuple[ConnKey, dict[str, Any]]:
    """The key and the psycopg parameters of a plain connection to the database Django's
    connection uses (UTC, commits not waiting for their WAL flush: derived data)."""
    key = _conn_key()
    params = connection.get_connection_params()
    kept = {k: v for k, v in params.items() if k not in _SIDE_PARAMS_DROPPED}
    kept["options"] = f"{kept.get('options', '')} -c synchronous_commit=off -c timezone=UTC".strip()
    return key, kept


class _LatestWriter:
    """This process's latest-value writer: a queue of batches' columns, written in order by one
    daemon thread (started on first use) on a connection of its own per database."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: deque[
            tuple[ConnKey, dict[str, Any], tuple[Any, Any, Any], Callable[[], None] | None]
        ] = deque()
        self._submitted = self._done = 0
        self._thread: threading.Thread | None = None
        self._io = threading.Lock()  # held while writing, and across a fork
        self._conns: dict[ConnKey, psycopg.Connection[Any]] = {}
        self._params: dict[ConnKey, dict[str, Any]] = {}

    def submit(
        self,
        sids: Sequence[int],
        tss: Sequence[dt.datetime],
        values: Sequence[float],
        then: Callable[[], None] | None,
    ) -> None:
        key = _conn_key()
        params = self._params.get(key)
        if params is None:
            key, params = _connect_params()
            self._params[key] = params
        with self._cond:
            # a writer that cannot keep up slows its callers down instead of piling up batches
            # (for WRITER_FLUSH_TIMEOUT_S at most: a writer stuck on a lock never stops ingest)
            self._cond.wait_for(lambda: len(self._queue) < WRITER_BACKLOG, WRITER_FLUSH_TIMEOUT_S)
            self._queue.append((key, params, (sids, tss, values), then))
            self._submitted += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="latest-values", daemon=True)
                self._thread.start()
                _at_exit(self._flush_at_exit)
            self._cond.notify_all()

    def flush(self, timeout: float = WRITER_FLUSH_TIMEOUT_S) -> bool:
        """Wait until every batch submitted so far is written (and its ``then`` called); False
        when ``timeout`` ran out first. The writer's own thread (a ``then`` that reads) returns
        at once."""
        if threading.current_thread() is self._thread:
            return True
        with self._cond:
            target = self._submitted
            if self._done >= target:
                return True
            done = self._cond.wait_for(lambda: self._done >= target, timeout)
        if not done:
            log.warning("telemetry: latest values still being written after %.0f s", timeout)
        return done

    def _flush_at_exit(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            self.flush(timeout=5.0)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._queue))
                key, params, columns, then = self._queue.popleft()
                self._cond.notify_all()  # room in the backlog
            try:
                with self._io:
                    self._write(key, params, columns)
            except Exception:  # noqa: BLE001 - the thread must outlive any one batch
                log.exception("telemetry: latest values of a batch not written")
            try:
                if then is not None:
                    then()
            except Exception:  # noqa: BLE001
                log.exception("telemetry: after latest values were written")
            finally:
                with self._cond:
                    self._done += 1
                    self._cond.notify_all()

    def _write(self, key: ConnKey, params: dict[str, Any], columns: tuple[Any, Any, Any]) -> None:
        """UPDATE the rows of these columns (one statement, in series id order: one lock order for
        every writer), then insert the series that had none; once more on a fresh connection
        when the connection broke."""
        sids, tss, values = columns
        if not all(map(operator.lt, sids, islice(sids, 1, None))):
            order = sorted(range(len(sids)), key=sids.__getitem__)
            sids, tss, values = [sids[i] for i in order], [tss[i] for i in order], [values[i] for i in order]
        arrays = _arrays(sids, tss, values)
        for attempt in (1, 2):
            conn = self._conns.get(key)
            try:
                if conn is None or conn.closed:
                    conn = self._conns[key] = psycopg.connect(**params, autocommit=True)
                with psycopg.Cursor(conn) as cur:
                    cur.execute(_LATEST_UPDATE_PG, arrays, prepare=True, binary=True)
                    if cur.rowcount < len(sids):  # new series (or older samples: no-ops)
                        cur.execute(_LATEST_PG, arrays, prepare=True, binary=True)
                return
            except psycopg.OperationalError:
                if conn is not None:
                    conn.close()
                self._conns.pop(key, None)
                if attempt == 2:
                    raise
                log.warning("telemetry: the latest-value connection broke; writing again", exc_info=True)

    def close(self) -> None:
        """Close the writer's connections (the next batch opens them again)."""
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def before_fork(self) -> None:
        self.flush(timeout=2.0)
        self._io.acquire()
        self.close()

    def after_fork_in_parent(self) -> None:
        self._io.release()


_writer = _LatestWriter()


def _writer_reset_in_child() -> None:
    """A forked child starts with a writer of its own (the parent's thread did not come along;
    its connections were closed before the fork)."""
    global _writer  # noqa: PLW0603
    _writer = _LatestWriter()


os.register_at_fork(
    before=lambda: _writer.before_fork(),
    after_in_parent=lambda: _writer.after_fork_in_parent(),
    after_in_child=_writer_reset_in_child,
)


def _at_exit(flush: Callable[[], None]) -> None:
    """Run ``flush`` when the interpreter exits, before the atexit handlers: what it writes sends
    the batches' ingest signals, whose live push flushes in an atexit handler (registered when
    the first signal arrives: a short-lived process, a management command, still pushes). The
    threading module's exit hooks run first (concurrent.futures uses them the same way)."""
    register = getattr(threading, "_register_atexit", None)
    try:
        if register is not None:
            register(flush)
            return
    except RuntimeError:  # the interpreter is already shutting down
        return
    atexit.register(flush)


def latest_behind() -> bool:
    """Whether latest values can be written behind their batch here (PostgreSQL, outside any
    caller's transaction, whose fate the batch cannot know). Elsewhere the caller upserts them
    with :func:`latest_upsert` in its own transaction."""
    return is_postgres() and not connection.in_atomic_block


def latest_later(
    sids: Sequence[int],
    tss: Sequence[dt.datetime],
    values: Sequence[float],
    *,
    then: Callable[[], None] | None = None,
) -> None:
    """Hand these columns (series ids, times, values; one point per series, their samples
    committed) to this process's writer; ``then`` is called on its thread once they are written
    (or failed to be). See the section's comment for what callers and readers can rely on."""
    _writer.submit(sids, tss, values, then)


def latest_flush(timeout: float = WRITER_FLUSH_TIMEOUT_S) -> bool:
    """Wait until the latest values this process handed to its writer are committed (at once
    when none are pending). Every reader of latest values calls it: read-your-writes."""
    return _writer.flush(timeout)


def latest_writer_close() -> None:
    """Write what is pending, then close the writer's connections (tests)."""
    _writer.flush()
    with _writer._io:
        _writer.close()


# -- a side connection for reads ----------------------------------------------------------------
_side = threading.local()
# every thread's open side connection (a server thread pool's threads each open one)
_side_open: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()
_side_lock = threading.Lock()


def _side_connection() -> psycopg.Connection[Any] | None:
    """This thread's side connection to the database Django's connection uses (opened on first
    use; reopened after it broke)."""
    conn: psycopg.Connection[Any] | None = getattr(_side, "conn", None)
    key = _conn_key()
    if conn is not None and (conn.closed or getattr(_side, "key", None) != key):
        conn.close()
        conn = _side.conn = None
    if conn is None:
        try:
            key, params = _connect_params()
            conn = psycopg.connect(**params)
        except psycopg.Error:
            log.warning("telemetry: no side connection for reads", exc_info=True)
            return None
        _side.conn, _side.key = conn, key
        with _side_lock:
            _side_open.add(conn)
    return conn


def side_connection_close() -> None:
    """Close this thread's side connection (one that failed; tests)."""
    conn = getattr(_side, "conn", None)
    if conn is not None:
        conn.close()
        _side.conn = None


def side_connections_close_all() -> None:
    """Close the side connection of every thread: before a fork (a child must not share their
    sockets: its copy of a connection, collected, would end the parent's session) and before the
    test database is dropped. A thread whose connection was closed opens a new one when it next
    reads aside."""
    with _side_lock:
        conns = list(_side_open)
        _side_open.clear()
    for conn in conns:
        conn.close()


os.register_at_fork(before=side_connections_close_all)


@contextmanager
def reads_aside(reads: Sequence[QuerySet[Any, Any]]) -> Iterator[Callable[[], list[list[tuple[Any, ...]]]]]:
    """Send value querysets (``values_list``, not flat) on this thread's side connection, where a
    second server process runs them while the caller's own queries run here; yields the function
    that collects their rows (tuples), in order. Outside a transaction only (the side connection
    sees committed rows, not the caller's uncommitted ones): inside one, on SQLite, or when the
    side connection fails, the rows are read here when collected. The side connection's read
    transaction ends at the block's end."""

    def here() -> list[list[tuple[Any, ...]]]:
        return [list(q) for q in reads]

    conn = _side_connection() if is_postgres() and not connection.in_atomic_block else None
    readers: list[psycopg.Cursor[Any]] = []
    pipeline = conn.pipeline() if conn is not None else None

    def end(failed: BaseException | None = None) -> None:
        """Leave the pipeline and the read transaction; a session that failed is dropped."""
        nonlocal conn
        try:
            if failed is None:
                pipeline.__exit__(None, None, None)  # type: ignore[union-attr]
                conn.rollback()  # type: ignore[union-attr]
                return
            log.warning("side reads failed; read on this connection", exc_info=failed)
            pipeline.__exit__(type(failed), failed, failed.__traceback__)  # type: ignore[union-attr]
        except psycopg.Error:
            pass
        side_connection_close()
        conn = None

    if pipeline is not None:
        try:
            pipeline.__enter__()
            readers = _send_reads(conn, _compiled(reads))  # type: ignore[arg-type]
        except psycopg.Error as exc:
            end(exc)
    collected: list[list[tuple[Any, ...]]] | None = None

    def collect() -> list[list[tuple[Any, ...]]]:
        nonlocal collected
        if collected is None and conn is not None:
            try:
                pipeline.__exit__(None, None, None)  # type: ignore[union-attr]
                collected = [reader.fetchall() for reader in readers]
                conn.rollback()
            except psycopg.Error as exc:
                end(exc)
        if collected is None:
            collected = here()
        return collected

    try:
        yield collect
    finally:
        for reader in readers:
            reader.close()
        if conn is not None and collected is None:  # the block ended before collecting
            end()


# -- rollups ------------------------------------------------------------------------------------
def _bucket_sql(column: str, step: int) -> str:
    if is_postgres():
        return f"date_trunc('{'minute' if step == 60 else 'hour'}', {column})"
    return f"strftime('{'%Y-%m-%d %H:%M:00' if step == 60 else '%Y-%m-%d %H:00:00'}', {column})"


def rollup_compute(step: int, start: dt.datetime, end: dt.datetime) -> int:
    """(Re)compute the ``step`` rollup buckets in [start, end): 1 min from raw, 1 h from 1 min.

    Idempotent: existing buckets are overwritten with the recomputed figures.
    """
    dst = ROLLUP_TABLES[step]
    if step == 60:
        b = _bucket_sql("ts", step)
        select = (
            f"SELECT series_id, {b}, MIN(value), AVG(value), MAX(value), COUNT(*) FROM {SAMPLE_TABLE} "
            f"WHERE ts >= %s AND ts < %s GROUP BY series_id, {b}"
        )
    else:
        b = _bucket_sql("bucket", step)
        select = (
            f"SELECT series_id, {b}, MIN(min), SUM(avg * count) / SUM(count), MAX(max), SUM(count) "
            f"FROM {ROLLUP_TABLES[60]} WHERE bucket >= %s AND bucket < %s GROUP BY series_id, {b}"
        )
    sql = (
        f"INSERT INTO {dst} (series_id, bucket, min, avg, max, count) {select} "
        "ON CONFLICT (series_id, bucket) DO UPDATE SET min = EXCLUDED.min, avg = EXCLUDED.avg, "
        "max = EXCLUDED.max, count = EXCLUDED.count"
    )
    with connection.cursor() as cur:
        cur.execute(sql, [_db_value(start), _db_value(end)])
        return int(cur.rowcount)


# -- reads --------------------------------------------------------------------------------------
def series_buckets(
    series_ids: Sequence[int], step: int, start: dt.datetime, end: dt.datetime, source: int
) -> list[tuple[int, int, float, float, float]]:
    """(series_id, bucket epoch s, min, avg, max) over [start, end) in ``step`` second buckets,
    read from raw samples (``source`` 0) or a rollup table (60 / 3600)."""
    if not series_ids:
        return []
    if source == 0:
        table, col, mn, av, mx = SAMPLE_TABLE, "ts", "MIN(value)", "AVG(value)", "MAX(value)"
    else:
        table, col = ROLLUP_TABLES[source], "bucket"
        mn, av, mx = "MIN(min)", "SUM(avg * count) / SUM(count)", "MAX(max)"
    params: list[Any]
    if is_postgres():
        epoch = f"(floor(extract(epoch FROM {col}) / {int(step)}) * {int(step)})::bigint"
        ids_sql, params = "series_id = ANY(%s)", [[*series_ids]]
    else:
        epoch = f"(CAST(strftime('%%s', {col}) AS INTEGER) / {int(step)}) * {int(step)}"
        ids_sql, params = f"series_id IN ({', '.join(['%s'] * len(series_ids))})", [*series_ids]
    sql = (
        f"SELECT series_id, {epoch} AS b, {mn}, {av}, {mx} FROM {table} "
        f"WHERE {ids_sql} AND {col} >= %s AND {col} < %s GROUP BY series_id, b ORDER BY series_id, b"
    )
    with connection.cursor() as cur:
        cur.execute(sql, [*params, _db_value(start), _db_value(end)])
        return [(int(r[0]), int(r[1]), float(r[2]), float(r[3]), float(r[4])) for r in cur.fetchall()]


def latest_power_by_cluster(
    cluster_ids: Sequence[int], node_metric: str, card_metric: str, fresh_after: dt.datetime
) -> list[tuple[int, float, dt.datetime]]:
    """(cluster id, measured power, newest reading) of each cluster with a fresh reading: per node
    the whole-node power where it is reported (``node_metric``), else the sum of its cards'
    (``card_metric``); summed per cluster in the database (one row per cluster, not per node).
    The freshness test sits in the aggregates, not in WHERE: right after an ingest every ``ts``
    lies past the column's histogram and the planner would expect one row."""
    if not cluster_ids:
        return []
    params: list[Any]
    if is_postgres():
        ids_sql, params = "n.cluster_id = ANY(%s)", [list(cluster_ids)]
    else:
        ids_sql, params = f"n.cluster_id IN ({', '.join(['%s'] * len(cluster_ids))})", [*cluster_ids]
    fresh = _db_value(fresh_after)
    sql = (
        "SELECT cluster_id, SUM(COALESCE(node_w, card_w, 0)), MAX(newest) FROM ("
        " SELECT n.cluster_id AS cluster_id,"
        " SUM(CASE WHEN s.metric = %s AND l.ts >= %s THEN l.value END) AS node_w,"
        " SUM(CASE WHEN s.metric = %s AND l.ts >= %s THEN l.value END) AS card_w,"
        " MAX(CASE WHEN l.ts >= %s THEN l.ts END) AS newest"
        f" FROM {LATEST_TABLE} l JOIN monitoring_series s ON s.id = l.series_id"
        " JOIN inventory_node n ON n.id = s.node_id"
        f" WHERE {ids_sql} AND s.metric IN (%s, %s) GROUP BY n.cluster_id, s.node_id"
        ") per_node WHERE newest IS NOT NULL GROUP BY cluster_id"
    )
    args = [node_metric, fresh, card_metric, fresh, fresh, *params, node_metric, card_metric]
    latest_flush()
    with connection.cursor() as cur:
        cur.execute(sql, args)
        rows = cur.fetchall()
    out = []
    for cid, watts, newest in rows:
        if not isinstance(newest, dt.datetime):  # SQLite: naive UTC text
            newest = dt.datetime.fromisoformat(str(newest)).replace(tzinfo=dt.UTC)
        out.append((int(cid), float(watts or 0.0), newest))
    return out


def raw_points(
    series_ids: Sequence[int], start: dt.datetime, end: dt.datetime
) -> list[tuple[int, dt.datetime, float]]:
    """Raw (series_id, ts, value) in [start, end), ordered by series then time (energy integration)."""
    if not series_ids:
        return []
    from monitoring.models import Sample

    qs = (
        Sample.objects.filter(series_id__in=list(series_ids), ts__gte=start, ts__lt=end)
        .order_by("series_id", "ts")
        .values_list("series_id", "ts", "value")
    )
    return list(qs)


def series_window_aggregate(
    series_ids: Sequence[int],
    start: dt.datetime,
    end: dt.datetime,
    source: int,
    *,
    above: float | None = None,
) -> list[tuple[int, float, float, float, int, float]]:
    """(series_id, min, mean, max, samples, share above) of each series over [start, end), read
    from raw samples (``source`` 0) or a rollup (60 / 3600: the buckets starting in the window's
    first partial bucket .. end). ``share above``: the share of samples (raw) or of time (buckets
    whose max exceeds it) above ``above``; 0 when ``above`` is None. One query for all series."""
    if not series_ids:
        return []
    if source == 0:
        table, col, mn, mean, mx, n = SAMPLE_TABLE, "ts", "MIN(value)", "AVG(value)", "MAX(value)", "COUNT(*)"
        hot = "SUM(CASE WHEN value > %s THEN 1 ELSE 0 END)"
        start_at = start
    else:
        table, col, mn, mx, n = ROLLUP_TABLES[source], "bucket", "MIN(min)", "MAX(max)", "SUM(count)"
        mean = "SUM(avg * count) / SUM(count)"
        hot = "SUM(CASE WHEN max > %s THEN count ELSE 0 END)"
        start_at = dt.datetime.fromtimestamp(start.timestamp() // source * source, tz=dt.UTC)
    params: list[Any]
    if is_postgres():
        ids_sql, params = "series_id = ANY(%s)", [[*series_ids]]
    else:
        ids_sql, params = f"series_id IN ({', '.join(['%s'] * len(series_ids))})", [*series_ids]
    sql = (
        f"SELECT series_id, {mn}, {mean}, {mx}, {n}, {hot} FROM {table} "
        f"WHERE {ids_sql} AND {col} >= %s AND {col} < %s GROUP BY series_id"
    )
    threshold = 1e308 if above is None else above
    with connection.cursor() as cur:
        cur.execute(sql, [threshold, *params, _db_value(start_at), _db_value(end)])
        return [
            (
                int(r[0]),
                float(r[1]),
                float(r[2]),
                float(r[3]),
                int(r[4]),
                float(r[5] or 0) / max(1, int(r[4])),
            )
            for r in cur.fetchall()
        ]
