"""Fragments shared by the pushing process and the consumers: the "live" marker and the overview.

The overview is the same for every socket of a role ("with alerts" or without), so the process
that committed a change renders it ONCE per flush, in both variants, and ships the finished
frames in the group event (:func:`overview_frames`); consumers only forward them. The fabric
drawing is shared by the fabric page and its socket.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.template.loader import render_to_string
from django.utils import translation
from django.utils.safestring import mark_safe
from django.utils.translation import gettext

#: the variants of the overview a socket may receive (researchers see no alert details)
WITH_ALERTS, PLAIN = "alerts", "plain"


def status_html(seq: str = "", ts: float | None = None) -> str:
    """The page's "live" marker: the last pushed event (the benchmark reads data-ts/data-seq)."""
    ts = ts or time.time()
    clock = time.strftime("%H:%M:%S", time.localtime(ts))
    return (
        f'<span id="live-status" class="live-status on" data-seq="{html.escape(seq)}" data-ts="{ts:.6f}"'
        f' title="{html.escape(gettext("Last update %(time)s") % {"time": clock})}">{html.escape(gettext("live"))}</span>'
    )


def overview_variant(with_alerts: bool, language: str) -> str:
    """The frame key of a socket: its role's variant in its user's language."""
    return f"{WITH_ALERTS if with_alerts else PLAIN}:{language}"


def languages() -> list[str]:
    return [code for code, _name in settings.LANGUAGES]


def _cards(items: Iterable[Any], *, with_alerts: bool) -> str:
    return "".join(
        render_to_string("live/overview_cluster.html", {"o": o, "with_alerts": with_alerts}) for o in items
    )


def overview_html(cluster_ids: Iterable[int] | None) -> dict[str, str]:
    """{variant: the overview cards of ``cluster_ids`` (all when None)}: read once, rendered for
    both roles in every language of the UI (the frame a socket forwards is in its user's language)."""
    from monitoring.overview import cluster_overview_list

    items = cluster_overview_list(cluster_ids=cluster_ids, with_alerts=True)
    out: dict[str, str] = {}
    for language in languages():
        with translation.override(language):
            for with_alerts in (True, False):
                out[overview_variant(with_alerts, language)] = _cards(items, with_alerts=with_alerts)
    return out


def render_overview(cluster_ids: Iterable[int] | None, *, with_alerts: bool) -> str:
    """The overview cards of one variant (a socket's snapshot, or an event without frames)."""
    from monitoring.overview import cluster_overview_list

    return _cards(
        cluster_overview_list(cluster_ids=cluster_ids, with_alerts=with_alerts), with_alerts=with_alerts
    )


def overview_frames(cluster_ids: Iterable[int], *, seq: str, ts: float) -> dict[str, str]:
    """{variant: the websocket frame (marker + cards)} of one overview event."""
    status = status_html(seq, ts)
    return {variant: status + body for variant, body in overview_html(cluster_ids).items()}


def fabric_links(data: Any) -> dict[int, bool]:
    """{port id: link up} of every cable end of a fabric (``FabricData``) with link telemetry."""
    from monitoring.overview import port_link_up

    return port_link_up({p for c in data.cables for p in (c.a, c.b)})


def fabric_drawing(fabric_id: int, data: Any, result: Any, links: dict[int, bool]) -> str:
    """The fabric's drawing (links coloured by cable state and telemetry), swapped by its id."""
    from inventory.topology import svg

    drawing = mark_safe(svg.render(data, result, links))  # noqa: S308 (escaped by svg.render)
    return render_to_string("live/fabric_drawing.html", {"fabric_id": fabric_id, "svg": drawing})
