"""Room on each page of the latest-value table so that the per-batch updates stay HOT (PostgreSQL)."""

from django.db import migrations


def forwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE monitoring_latestvalue SET (fillfactor = 50)")


def backwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE monitoring_latestvalue RESET (fillfactor)")


class Migration(migrations.Migration):
    dependencies = [("monitoring", "0004_job_energy")]
    operations = [migrations.RunPython(forwards, backwards)]
