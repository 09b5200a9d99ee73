from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("inventory", "0003_fabric_fabricmember_readinesscheck")]

    operations = [
        migrations.AlterModelOptions(
            name="cluster",
            options={
                "ordering": ["name"],
                "permissions": [
                    (
                        "see_infrastructure",
                        "Can see how the portal reaches the hardware (SSH hosts, accounts, keys, BMC addresses)",
                    )
                ],
            },
        ),
    ]
