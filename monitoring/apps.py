from typing import Any

from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "monitoring"
    verbose_name = "Telemetry and alerts"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from monitoring import live
        from monitoring.models import AlertRule, Series
        from monitoring.services.alerts import alert_rules_forget

        def forget_series(**_: Any) -> None:
            from monitoring.services.ingest import series_cache_clear

            series_cache_clear()

        # Series go away with their node; this process's series cache must not keep their ids.
        post_delete.connect(forget_series, sender=Series, dispatch_uid="monitoring.forget_series", weak=False)
        # the ingest path keeps an index of the enabled rules: a saved or deleted rule resets it
        post_save.connect(
            alert_rules_forget, sender=AlertRule, dispatch_uid="monitoring.rules_save", weak=False
        )
        post_delete.connect(
            alert_rules_forget, sender=AlertRule, dispatch_uid="monitoring.rules_del", weak=False
        )
        live.register()  # the overview, alerts' routes and the telemetry signal (portal/live is the mechanism)
