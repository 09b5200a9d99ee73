"""Rack positions never overlap: a PostgreSQL exclusion constraint over U ranges.

Skipped on SQLite (the one-command demo), where Node.clean() holds the rule alone.
"""

from django.db import migrations

CREATE = """
CREATE EXTENSION IF NOT EXISTS btree_gist;
ALTER TABLE inventory_node ADD CONSTRAINT node_no_rack_overlap EXCLUDE USING gist (
    rack_id WITH =,
    int4range(position, position + u_height) WITH &&
) WHERE (rack_id IS NOT NULL AND position IS NOT NULL);
"""
DROP = "ALTER TABLE inventory_node DROP CONSTRAINT IF EXISTS node_no_rack_overlap;"


def forwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def backwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("inventory", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
