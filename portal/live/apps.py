from django.apps import AppConfig


class LiveConfig(AppConfig):
    """The mechanism only: the apps register their kinds, routes and consumers themselves
    (``<app>/live.py``, from their ``AppConfig.ready``)."""

    name = "portal.live"
    label = "live"
    verbose_name = "Live dashboards"
