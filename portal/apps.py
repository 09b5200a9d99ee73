from django.apps import AppConfig
from django.db.models.signals import post_migrate


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "Rackpilot portal"

    def ready(self) -> None:
        import portal.lookups  # noqa: F401 (registers ``__any``)
        from portal.roles import roles_sync

        post_migrate.connect(roles_sync, dispatch_uid="portal.roles_sync")
