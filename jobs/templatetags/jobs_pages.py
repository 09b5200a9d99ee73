"""Small display helpers of the job pages."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import template
from django.utils import timezone

from portal.templatetags.portal_format import slurm_duration

register = template.Library()


def format_duration(delta: timedelta | None) -> str:
    """Slurm's elapsed format (the shared implementation in portal_format)."""
    return slurm_duration(delta.total_seconds()) if delta is not None else "—"


@register.filter
def readiness(node: Any) -> str:
    """The readiness badge of a node annotated by inventory.readiness.with_readiness."""
    from inventory.readiness import node_readiness
    from inventory.views_topology import readiness_badge

    return readiness_badge(node_readiness(node))


@register.filter
def elapsed(job: Any) -> str:
    """Run time so far (running) or in all (finished), Slurm-style ``D-H:MM:SS``."""
    if job.start_time is None:
        return "—"
    end = job.end_time or (timezone.now() if job.is_active else None)
    return format_duration(end - job.start_time) if end else "—"


@register.filter
def minutes(value: int | None) -> str:
    return format_duration(timedelta(minutes=value)) if value else "—"
