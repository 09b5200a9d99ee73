"""Filters the live fragments of every app use."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def to_json(value: Any) -> str:
    """JSON text for a data- attribute (auto-escaping makes it attribute-safe)."""
    return json.dumps(value, separators=(",", ":"))
