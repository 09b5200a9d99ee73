from typing import Any

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.utils import extend_schema, inline_serializer
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse

from monitoring import views as monitoring_views
from portal.api import audit as audit_api
from portal.views import system
from portal.views.audit import AuditListView
from portal.views.home import home


@extend_schema(
    responses=inline_serializer(
        "ApiRoot", {name: serializers.URLField() for name in ("inventory", "jobs", "monitoring", "audit")}
    )
)
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def api_root(request: Request) -> Response:
    return Response(
        {
            "inventory": reverse("api:inventory:api-root", request=request),
            "jobs": reverse("api:jobs:api-root", request=request),
            "monitoring": reverse("api:monitoring:api-root", request=request),
            "audit": reverse("api:portal:auditentry-list", request=request),
        }
    )


api_patterns: list[Any] = [
    path("", api_root, name="root"),
    path("inventory/", include("inventory.api.urls")),
    path("jobs/", include("jobs.api.urls")),
    path("monitoring/", include("monitoring.api.urls")),
    path("", include((audit_api.urlpatterns, "portal"))),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # the split view serves its script from a URL, not inline: the Content-Security-Policy allows it
    path(
        "docs/",
        SpectacularSwaggerSplitView.as_view(url_name="api:schema", template_name="portal/swagger_ui.html"),
        name="docs",
    ),
]

portal_patterns = [
    path("tokens/", system.token_list, name="token_list"),
    path("tokens/<int:pk>/revoke/", system.token_revoke, name="token_revoke"),
]

urlpatterns = [
    path("", home, name="home"),
    path("healthz", system.healthz, name="healthz"),
    path("readyz", system.readyz, name="readyz"),
    path("login/", system.RateLimitedLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("admin/", admin.site.urls),
    path("api/", include((api_patterns, "api"))),
    path("account/", include((portal_patterns, "portal"))),
    path("inventory/", include("inventory.urls")),
    path("jobs/", include("jobs.urls")),
    path("monitoring/", include("monitoring.urls")),
    path("metrics", monitoring_views.metrics, name="metrics"),
    path("audit/", AuditListView.as_view(), name="audit_list"),
]

handler404 = "portal.views.errors.not_found"
handler500 = "portal.views.errors.server_error"
