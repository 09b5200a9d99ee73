"""Health, readiness, login (rate-limited), home, API tokens."""

from __future__ import annotations

import hashlib
from typing import Any

import redis
from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UsernameField
from django.core.cache import cache
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from portal.clientip import client_ip
from portal.models import APIToken
from portal.services import api_token_create, api_token_revoke


def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> HttpResponse:
    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # noqa: BLE001 - report whatever broke
        checks["database"] = f"error: {exc}"
    if (
        str(settings.CHANNEL_LAYERS["default"]["BACKEND"]).startswith("channels_redis")
        or not settings.CELERY_TASK_ALWAYS_EAGER
    ):
        try:
            redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2).ping()
            checks["redis"] = "ok"
        except Exception as exc:  # noqa: BLE001
            checks["redis"] = f"error: {exc}"
    ok = all(v == "ok" for v in checks.values())
    return JsonResponse(
        {"status": "ok" if ok else "unavailable", "checks": checks}, status=200 if ok else 503
    )


def login_username_key(raw: str) -> str:
    """The login name as AuthenticationForm cleans it before authenticating (UsernameField: strip,
    then NFKC), case-folded (backends such as LDAP match names case-insensitively), hashed to keep
    the cache key short and printable whatever was posted."""
    name = str(UsernameField().to_python(raw)).casefold()
    return hashlib.sha256(name.encode()).hexdigest()


class RateLimitedLoginView(auth_views.LoginView):
    """Django's login, refusing more than PORTAL_LOGIN_ATTEMPTS failures per IP and user per window.

    The user key is the name as Django's login form normalises it (whitespace stripped, NFKC), so
    " bob", "bob\t" and full-width "ｂｏｂ" count against the one account they would log into; the IP
    is the peer's, or X-Forwarded-For's only behind PORTAL_TRUSTED_PROXIES (portal.clientip).
    """

    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def _keys(self) -> list[str]:
        user = login_username_key(self.request.POST.get("username") or "")
        return [f"login-fail:ip:{client_ip(self.request)}", f"login-fail:user:{user}"]

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        limit = settings.PORTAL_LOGIN_ATTEMPTS
        if any((cache.get(k) or 0) >= limit for k in self._keys()):
            form = self.get_form()
            form.add_error(None, _("Too many failed logins. Wait a few minutes and try again."))
            return self.render_to_response(self.get_context_data(form=form), status=429)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: Any) -> HttpResponse:
        window = settings.PORTAL_LOGIN_WINDOW_S
        for key in self._keys():
            cache.add(key, 0, window)
            try:
                cache.incr(key)
            except ValueError:
                cache.set(key, 1, window)
        return super().form_invalid(form)


class TokenForm(forms.Form):
    name = forms.CharField(label=gettext_lazy("Name"), max_length=100)
    write_enabled = forms.BooleanField(label=gettext_lazy("Allow writes"), required=False, initial=True)


@login_required
def token_list(request: Any) -> HttpResponse:
    new_key = None
    form = TokenForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        _token, new_key = api_token_create(
            user=request.user,
            name=form.cleaned_data["name"],
            write_enabled=form.cleaned_data["write_enabled"],
        )
        form = TokenForm()
    tokens = APIToken.objects.filter(user=request.user)
    return render(request, "portal/token_list.html", {"tokens": tokens, "form": form, "new_key": new_key})


@login_required
@require_POST
def token_revoke(request: Any, pk: int) -> HttpResponse:
    token = get_object_or_404(APIToken, pk=pk, user=request.user)
    api_token_revoke(token=token, user=request.user)
    messages.success(request, _("Token revoked."))
    return redirect("portal:token_list")
