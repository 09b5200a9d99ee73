from django.urls import path

from monitoring import views as v

app_name = "monitoring"

urlpatterns = [
    path("alerts/", v.AlertListView.as_view(), name="alert_list"),
    path("alerts/<int:pk>/acknowledge/", v.alert_acknowledge, name="alert_acknowledge"),
    path("alerts/<int:pk>/resolve/", v.alert_resolve, name="alert_resolve"),
    path("alert-rules/", v.AlertRuleListView.as_view(), name="alertrule_list"),
    path("alert-rules/add/", v.AlertRuleEditView.as_view(), name="alertrule_add"),
    path("alert-rules/<int:pk>/", v.AlertRuleView.as_view(), name="alertrule"),
    path("alert-rules/<int:pk>/edit/", v.AlertRuleEditView.as_view(), name="alertrule_edit"),
    path("alert-rules/<int:pk>/delete/", v.AlertRuleDeleteView.as_view(), name="alertrule_delete"),
    path("health-checks/", v.HealthCheckListView.as_view(), name="healthcheck_list"),
    path("health-checks/add/", v.HealthCheckEditView.as_view(), name="healthcheck_add"),
    path("health-checks/<int:pk>/", v.HealthCheckView.as_view(), name="healthcheck"),
    path("health-checks/<int:pk>/edit/", v.HealthCheckEditView.as_view(), name="healthcheck_edit"),
    path("health-checks/<int:pk>/delete/", v.HealthCheckDeleteView.as_view(), name="healthcheck_delete"),
    path("node-health/", v.NodeHealthListView.as_view(), name="nodehealth_list"),
    path("prometheus-sources/", v.PrometheusSourceListView.as_view(), name="prometheussource_list"),
    path("prometheus-sources/add/", v.PrometheusSourceEditView.as_view(), name="prometheussource_add"),
    path("prometheus-sources/<int:pk>/", v.PrometheusSourceView.as_view(), name="prometheussource"),
    path(
        "prometheus-sources/<int:pk>/edit/",
        v.PrometheusSourceEditView.as_view(),
        name="prometheussource_edit",
    ),
    path(
        "prometheus-sources/<int:pk>/delete/",
        v.PrometheusSourceDeleteView.as_view(),
        name="prometheussource_delete",
    ),
]
