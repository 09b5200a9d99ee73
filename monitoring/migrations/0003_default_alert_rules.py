"""Default alert rules from the field guides (seeds); admins edit or disable them."""

from django.db import migrations

DEFAULT_RULES = [
    dict(name="GPU temperature above 85 °C", kind="threshold", metric="temperature_c", scope="card", op="gt",
         threshold=85, duration_s=60, severity="critical",
         description="Card core temperature above 85 °C for a minute: check airflow and fans."),
    dict(name="Utilisation above 95% sustained", kind="threshold", metric="utilization_pct", scope="card", op="gt",
         threshold=95, duration_s=1800, severity="info",
         description="A card saturated for 30 minutes: information for capacity planning."),
    dict(name="Node power near PSU limit", kind="threshold", metric="node_power_w", scope="node", op="gt",
         threshold=90, relative_to="psu_capacity", duration_s=60, severity="warning",
         description="Node draw above 90% of its usable PSU capacity (a redundant pair counts once)."),
    dict(name="Firmware heartbeat stalled", kind="stall", metric="heartbeat", scope="card", op="gt",
         threshold=0, duration_s=60, severity="critical",
         description="The Tenstorrent firmware heartbeat has not increased for 60 s: the card is hung."),
    dict(name="Link retrained", kind="event", event_kind="link_retrain", scope="card", severity="warning",
         duration_s=3600,
         description="A QSFP/Ethernet link retrained: often behind NCCL watchdog timeouts. Resolves after an hour quiet."),
    dict(name="Link down", kind="event", event_kind="link_down", scope="card", severity="warning", duration_s=3600,
         description="A card link went down (QSFP link resets are behind NCCL timeouts)."),
    dict(name="Xid error", kind="event", event_kind="xid", scope="card", severity="critical", duration_s=0,
         description="The NVIDIA driver reported an Xid; stays open until resolved by hand."),
    dict(name="GPU fell off the bus", kind="event", event_kind="gpu_fell_off_bus", scope="node",
         severity="critical", duration_s=0, description="Xid 79: the card needs a reset or a reboot."),
]


def create(apps, schema_editor):  # type: ignore[no-untyped-def]
    AlertRule = apps.get_model("monitoring", "AlertRule")
    for rule in DEFAULT_RULES:
        AlertRule.objects.get_or_create(name=rule["name"], defaults=rule)


def remove(apps, schema_editor):  # type: ignore[no-untyped-def]
    apps.get_model("monitoring", "AlertRule").objects.filter(name__in=[r["name"] for r in DEFAULT_RULES]).delete()


class Migration(migrations.Migration):
    dependencies = [("monitoring", "0002_sample_table")]
    operations = [migrations.RunPython(create, remove)]
