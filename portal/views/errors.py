"""Error pages: the API answers in JSON (`{"detail": ...}`, as DRF does), the pages in HTML."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.translation import gettext as _
from django.views import defaults

READABLE = {"ensure_ascii": False}  # UTF-8 text, as DRF answers


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404 for a URL no route matches (a route's own 404s come from its view)."""
    if _is_api(request):
        return JsonResponse({"detail": _("Not found.")}, status=404, json_dumps_params=READABLE)
    return defaults.page_not_found(request, exception)  # type: ignore[arg-type]


def server_error(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    if _is_api(request):
        return JsonResponse(
            {"detail": _("Server error: the administrators can find it in the log.")}, status=500
        )
    return defaults.server_error(request)
