"""Every page and API route refuses an anonymous visitor, except the few meant to be public."""

from __future__ import annotations

import re
from typing import Any

from django.urls import URLPattern, URLResolver, get_resolver

PUBLIC = {"/healthz", "/readyz", "/login/", "/i18n/setlang/"}


def _routes(patterns: list[Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for p in patterns:
        route = prefix + str(p.pattern)
        if isinstance(p, URLResolver):
            out += _routes(p.url_patterns, route)
        elif isinstance(p, URLPattern):
            out.append(route)
    return out


def _concrete(route: str) -> str | None:
    if route.startswith(("admin/", "^static", "static/")) or "(?P<format>" in route or "\\.(?P" in route:
        return None
    path = re.sub(r"<(?:int:)?pk>|<int:[a-z_]+>", "1", route)
    path = re.sub(r"<(?:str:|slug:|uuid:)?[a-z_]+>", "00000000-0000-0000-0000-000000000001", path)
    path = path.replace("^", "").replace("$", "")
    if any(ch in path for ch in "()[]?*+\\"):
        return None
    return "/" + path


def test_no_route_serves_an_anonymous_visitor(client: Any, db: Any) -> None:
    served = []
    for route in _routes(get_resolver().url_patterns):
        path = _concrete(route)
        if path is None or path in PUBLIC:
            continue
        status = client.get(path).status_code
        if status < 300 or status >= 500:
            served.append((path, status))
    assert served == []
