"""Default alert rules (monitoring/defaults.py); admins edit or disable them."""

from django.db import migrations


def create(apps, schema_editor):  # type: ignore[no-untyped-def]
    from monitoring.defaults import alert_rules_ensure_defaults

    alert_rules_ensure_defaults(apps.get_model("monitoring", "AlertRule"))


def remove(apps, schema_editor):  # type: ignore[no-untyped-def]
    from monitoring.defaults import DEFAULT_RULES

    apps.get_model("monitoring", "AlertRule").objects.filter(
        name__in=[r["name"] for r in DEFAULT_RULES]
    ).delete()


class Migration(migrations.Migration):
    dependencies = [("monitoring", "0002_sample_table")]
    operations = [migrations.RunPython(create, remove)]
