"""The API's routes, collected from the URL resolver (never a hand list), and concrete paths to them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from django.db import models
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.views import APIView

from inventory.models import PSU, Fabric, Node, PowerFeed

SAFE = {"GET", "HEAD", "OPTIONS", "TRACE"}


def walk(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from walk(p.url_patterns, prefix + str(p.pattern.regex.pattern).lstrip("^"))
        else:
            yield prefix + str(p.pattern.regex.pattern).lstrip("^"), p


def unsafe_routes() -> list[tuple[str, str, type[APIView]]]:
    """(regex, method, view class) for every DRF route of the URLconf that takes an unsafe method."""
    out = []
    for regex, pattern in walk(get_resolver().url_patterns):
        cls = getattr(pattern.callback, "cls", None)
        if cls is None or not issubclass(cls, APIView):
            continue
        if "format" in pattern.pattern.regex.groupindex:
            continue  # the router's `.json` duplicates of the same routes
        actions = getattr(pattern.callback, "actions", None)
        if actions:
            methods = {m.upper() for m in actions}
        else:
            methods = {m.upper() for m in cls.http_method_names if hasattr(cls, m)}
        out += [(regex, m, cls) for m in sorted(methods - SAFE)]
    return out


def model_of(cls: type[APIView], regex: str) -> type[models.Model]:
    """The view's model, or (a plain APIView under a collection) the model of that collection."""
    queryset = getattr(cls, "queryset", None)
    if queryset is not None:
        return queryset.model
    segment = re.search(r"([\w-]+)/\(\?P<pk>", regex.replace("\\-", "-"))
    by_segment = {"nodes": Node, "psus": PSU, "power-feeds": PowerFeed, "fabrics": Fabric}
    if segment and segment.group(1) in by_segment:
        return by_segment[segment.group(1)]
    raise AssertionError(f"no model known for the pk of {regex} ({cls.__name__})")


def route_path(regex: str, cls: type[APIView], *, missing_ok: bool = False) -> str:
    """A concrete path: every `pk` is an existing row of the view's model (so that a write would act);
    with `missing_ok`, a pk that exists nowhere where the world has no such row."""

    def pk(match: re.Match[str]) -> str:
        assert match.group(1) == "pk", regex
        row = model_of(cls, regex)._default_manager.order_by("pk").first()
        if row is None and missing_ok:
            return "987654"
        assert row is not None, f"no {cls.__name__} row to aim {regex} at"
        return str(row.pk)

    path = re.sub(r"\(\?P<(\w+)>[^)]*\)", pk, regex)
    path = re.sub(r"(\\Z|\$)$", "", path)
    return "/" + path.replace("\\", "")


def safe_routes() -> list[tuple[str, type[APIView]]]:
    """(regex, view class) for every DRF route of the URLconf that answers GET."""
    out = []
    for regex, pattern in walk(get_resolver().url_patterns):
        cls = getattr(pattern.callback, "cls", None)
        if cls is None or not issubclass(cls, APIView) or "format" in pattern.pattern.regex.groupindex:
            continue
        actions = getattr(pattern.callback, "actions", None)
        methods = (
            {m.upper() for m in actions}
            if actions
            else {m.upper() for m in cls.http_method_names if hasattr(cls, m)}
        )
        if "GET" in methods:
            out.append((regex, cls))
    return out
