from django.urls import path
from rest_framework.routers import DefaultRouter

from monitoring.api import health, views

app_name = "monitoring"

router = DefaultRouter()
router.register("alert-rules", views.AlertRuleViewSet, basename="alertrule")
router.register("alerts", views.AlertViewSet, basename="alert")
router.register("events", views.EventViewSet, basename="event")
router.register("health-checks", health.HealthCheckViewSet, basename="healthcheck")
router.register("node-health", health.NodeHealthViewSet, basename="nodehealth")
router.register("prometheus-sources", views.PrometheusSourceViewSet, basename="prometheussource")

urlpatterns = [
    path("ingest/", views.IngestView.as_view(), name="ingest"),
    path("remote-write/", views.RemoteWriteView.as_view(), name="remote_write"),
    path("series/", views.SeriesView.as_view(), name="series"),
    path("latest/", views.LatestView.as_view(), name="latest"),
    path("energy/", views.EnergyView.as_view(), name="energy"),
    path("health/probes/", health.HealthProbeView.as_view(), name="health_probes"),
    *router.urls,
]
