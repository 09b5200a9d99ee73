from django.apps import AppConfig


class InventoryConfig(AppConfig):
    name = "inventory"
    verbose_name = "Inventory"

    def ready(self) -> None:
        from inventory import live

        live.register()  # its live pages, groups and signals (portal/live is only the mechanism)
