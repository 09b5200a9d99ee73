from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs and cluster actions"

    def ready(self) -> None:
        from jobs import live

        live.register()  # its live pages, groups and signals (portal/live is only the mechanism)
