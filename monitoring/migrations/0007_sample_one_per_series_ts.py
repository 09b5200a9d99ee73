"""One sample per (series, ts): repeats already stored are removed (the first row kept) and the
(series_id, ts) index becomes unique, so the store refuses a repeat (ingest then merges)."""

from django.db import migrations

PG_FORWARDS = [
    # only the groups that repeat are touched; ctid is per partition, and a repeat shares its ts,
    # so its partition (tableoid)
    """
    DELETE FROM monitoring_sample s USING (
        SELECT tableoid, series_id, ts, min(ctid) AS keep FROM monitoring_sample
        GROUP BY tableoid, series_id, ts HAVING count(*) > 1
    ) d
    WHERE s.tableoid = d.tableoid AND s.series_id = d.series_id AND s.ts = d.ts AND s.ctid <> d.keep
    """,
    "DROP INDEX IF EXISTS monitoring_sample_series_ts",
    "CREATE UNIQUE INDEX monitoring_sample_series_ts_uniq ON monitoring_sample (series_id, ts)",
]
PG_BACKWARDS = [
    "DROP INDEX IF EXISTS monitoring_sample_series_ts_uniq",
    "CREATE INDEX monitoring_sample_series_ts ON monitoring_sample (series_id, ts)",
]
SQLITE_FORWARDS = [
    "DELETE FROM monitoring_sample WHERE rowid NOT IN "
    "(SELECT MIN(rowid) FROM monitoring_sample GROUP BY series_id, ts)",
    "DROP INDEX IF EXISTS monitoring_sample_series_ts",
    "CREATE UNIQUE INDEX monitoring_sample_series_ts_uniq ON monitoring_sample (series_id, ts)",
]
SQLITE_BACKWARDS = PG_BACKWARDS


def forwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    pg = schema_editor.connection.vendor == "postgresql"
    for sql in PG_FORWARDS if pg else SQLITE_FORWARDS:
        schema_editor.execute(sql)


def backwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    pg = schema_editor.connection.vendor == "postgresql"
    for sql in PG_BACKWARDS if pg else SQLITE_BACKWARDS:
        schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("monitoring", "0006_rule_only_when_node_busy")]
    operations = [migrations.RunPython(forwards, backwards)]
