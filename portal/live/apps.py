from django.apps import AppConfig


class LiveConfig(AppConfig):
    name = "portal.live"
    label = "live"
    verbose_name = "Live dashboards"

    def ready(self) -> None:
        from portal.live import receivers

        receivers.connect()
