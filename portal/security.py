"""Content-Security-Policy and Permissions-Policy on every response.

A small middleware rather than django-csp: the portal has one fixed policy for every page (vendored
assets only, no inline script, no nonces, no per-view exceptions), which is two header lines;
Django 6.0 brings the same built in (SECURE_CSP), to which this maps one to one when the project
moves. The policy strings are settings (PORTAL_CSP, PORTAL_PERMISSIONS_POLICY) so that a deployment
can add a report-uri or loosen one directive without a code change; an empty value sends no header.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


class SecurityHeadersMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        csp = settings.PORTAL_CSP
        if csp and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = csp
        policy = settings.PORTAL_PERMISSIONS_POLICY
        if policy and "Permissions-Policy" not in response:
            response["Permissions-Policy"] = policy
        return response
