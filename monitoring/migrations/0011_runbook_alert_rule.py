"""The default event rule that alerts when a remediation runbook gives up (inserted only where absent)."""

from django.db import migrations

NEW_RULES = ["Remediation runbook gave up"]


def create(apps, schema_editor):  # type: ignore[no-untyped-def]
    from monitoring.defaults import alert_rules_ensure_defaults

    alert_rules_ensure_defaults(apps.get_model("monitoring", "AlertRule"), names=NEW_RULES)


def remove(apps, schema_editor):  # type: ignore[no-untyped-def]
    apps.get_model("monitoring", "AlertRule").objects.filter(name__in=NEW_RULES).delete()


class Migration(migrations.Migration):
    dependencies = [("monitoring", "0010_health_checks")]

    operations = [migrations.RunPython(create, remove)]
