"""The raw samples table: partitioned by day on PostgreSQL, a plain table on SQLite (the demo)."""

from django.db import migrations

PG_CREATE = """
CREATE TABLE monitoring_sample (
    ts timestamptz NOT NULL,
    series_id integer NOT NULL,
    value double precision NOT NULL
) PARTITION BY RANGE (ts);
CREATE INDEX monitoring_sample_ts_brin ON monitoring_sample USING brin (ts);
CREATE INDEX monitoring_sample_series_ts ON monitoring_sample (series_id, ts);
"""

SQLITE_CREATE = """
CREATE TABLE monitoring_sample (ts datetime NOT NULL, series_id integer NOT NULL, value real NOT NULL);
CREATE INDEX monitoring_sample_series_ts ON monitoring_sample (series_id, ts);
"""


def create(apps, schema_editor):  # type: ignore[no-untyped-def]
    sql = PG_CREATE if schema_editor.connection.vendor == "postgresql" else SQLITE_CREATE
    for statement in filter(None, (s.strip() for s in sql.split(";"))):
        schema_editor.execute(statement)


def drop(apps, schema_editor):  # type: ignore[no-untyped-def]
    schema_editor.execute("DROP TABLE IF EXISTS monitoring_sample")


class Migration(migrations.Migration):
    dependencies = [("monitoring", "0001_initial")]
    operations = [migrations.RunPython(create, drop)]
