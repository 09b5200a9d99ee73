# ruff: noqa: S608 - identifiers interpolated here are this module's constants; values are parameters
"""The lowest storage layer of telemetry: the only place that branches on the database vendor.

PostgreSQL: daily partitions of ``monitoring_sample``, binary COPY for samples, one UPDATE/INSERT
of binary arrays for latest values, date_trunc rollups, partition drops for retention.
SQLite (the demo): plain tables, executemany, strftime buckets, DELETE for retention.
Everything above this module has one code path.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
from django.db import IntegrityError, ProgrammingError, connection, transaction

SAMPLE_TABLE = "monitoring_sample"
LATEST_TABLE = "monitoring_latestvalue"
ROLLUP_TABLES = {60: "monitoring_rollup_1m", 3600: "monitoring_rollup_1h"}
_PARTITION_RE = re.compile(r"^monitoring_sample_p(\d{8})$")

# (database name, day) of partitions known to exist; filled on commit only, so a rolled-back
# CREATE never leaves a stale entry behind.
_known_partitions: set[tuple[str, dt.date]] = set()

SampleRow = tuple[dt.datetime, int, float]  # ts, series_id, value


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


def samples_write(rows: Sequence[SampleRow], day: dt.date | None = None) -> None:
    """Append raw samples (partitions must exist: see :func:`partitions_ensure`); one sample per
    (series, ts) and batch. A row that repeats a stored one raises :class:`SamplesRepeated`.

    ``day``: all rows fall in this UTC day; PostgreSQL then copies straight into its partition
    (no per-row routing, one partition's indexes opened), which is what a 1,000-sample batch needs.
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
                    copy.set_types(["timestamptz", "int4", "float8"])
                    for row in rows:
                        copy.write_row(row)
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


_MERGE_PG = f"""
INSERT INTO {SAMPLE_TABLE} (ts, series_id, value)
SELECT ts, series_id, value FROM unnest(%b::timestamptz[], %b::int4[], %b::float8[]) AS i (ts, series_id, value)
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
        params = [[r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]]
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


# PostgreSQL: one statement, the rows as three binary arrays: update the existing rows in place
# (HOT updates: the table leaves room on each page, migration 0005), insert the new series' rows.
_LATEST_PG = f"""
WITH i AS (
    SELECT * FROM unnest(%b::int4[], %b::timestamptz[], %b::float8[]) AS i (series_id, ts, value)
), u AS (
    UPDATE {LATEST_TABLE} l SET ts = i.ts, value = i.value FROM i
    WHERE l.series_id = i.series_id AND l.ts <= i.ts RETURNING l.series_id
)
INSERT INTO {LATEST_TABLE} (series_id, ts, value)
SELECT series_id, ts, value FROM i WHERE series_id NOT IN (SELECT series_id FROM u)
ON CONFLICT (series_id) DO UPDATE SET ts = EXCLUDED.ts, value = EXCLUDED.value
WHERE {LATEST_TABLE}.ts <= EXCLUDED.ts
"""


def latest_upsert(rows: Sequence[tuple[int, dt.datetime, float]]) -> None:
    """Upsert (series_id, ts, value); one row per series; an older ts never overwrites a newer one."""
    if not rows:
        return
    if is_postgres():
        connection.ensure_connection()
        params = [[r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]]
        # a server-binding cursor (Django's is client-side): the arrays travel in binary
        with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cur:
            cur.execute(_LATEST_PG, params, prepare=True, binary=True)
        return
    with connection.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {LATEST_TABLE} (series_id, ts, value) VALUES (%s, %s, %s) "
            "ON CONFLICT (series_id) DO UPDATE SET ts = EXCLUDED.ts, value = EXCLUDED.value "
            f"WHERE {LATEST_TABLE}.ts <= EXCLUDED.ts",
            [(sid, _db_value(ts), v) for sid, ts, v in rows],
        )


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
