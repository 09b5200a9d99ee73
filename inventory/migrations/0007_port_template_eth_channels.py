from django.db import migrations, models

import inventory.models.devices

P150 = ["Blackhole p150a", "Blackhole p150b", "p150a", "p150b"]


def p150_default(apps, schema_editor):  # noqa: ARG001
    """Blackhole p150a/p150b: two 400G channels per 800G QSFP-DD cage (inventory.links: an assumption)."""
    PortTemplate = apps.get_model("inventory", "PortTemplate")
    for i in range(1, 5):
        PortTemplate.objects.filter(
            card_model__vendor="Tenstorrent", card_model__name__in=P150, name=f"QSFP{i}"
        ).update(eth_channels=[2 * i - 2, 2 * i - 1])


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0006_verbose_names_and_bmc_label"),
    ]

    operations = [
        migrations.AddField(
            model_name="porttemplate",
            name="eth_channels",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="The card's Ethernet channels (cores) wired to this port, as tt-smi and the kernel "
                "number them, e.g. [0, 1]: link telemetry and link events of these channels land on this port "
                "and its cable.",
                validators=[inventory.models.devices.eth_channels_validator],
                verbose_name="Ethernet channels",
            ),
        ),
        migrations.RunPython(p150_default, migrations.RunPython.noop),
    ]
