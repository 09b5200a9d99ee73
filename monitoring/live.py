"""Monitoring's live parts: the cluster overview (a summary: rendered once per flush in every
variant, forwarded by its sockets), where alerts go, and the telemetry signal that feeds the
coalescer. Registered with :mod:`portal.live.registry` by ``MonitoringConfig.ready``.

The overview is the same for every socket of a role ("with alerts" or without), so the process
that committed a change renders it ONCE per flush, in every variant, and ships the finished frames
in the group event (:func:`overview_frames`); consumers only forward them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.template.loader import render_to_string
from django.utils import translation

from portal.live import groups, push, registry
from portal.live.consumers import LiveConsumer
from portal.live.fragments import languages, status_html

#: the variants of the overview a socket may receive (researchers see no alert details)
WITH_ALERTS, PLAIN = "alerts", "plain"


# -- routing ---------------------------------------------------------------------------------------
def route(batch: registry.Batch, routes: registry.Routes) -> None:
    """Alerts go wherever their node is shown."""
    from monitoring.models import Alert

    alerts = set(batch.get("alert", ()))
    if alerts:
        for pk, node_id in Alert.objects.filter(pk__any=alerts).values_list("pk", "node_id"):
            routes.via("node", node_id, "alert", pk)


def overview_route(batch: registry.Batch) -> dict[str, list[Any]]:
    """The overview event: the clusters the batch touches (one small query per kind)."""
    from inventory.models import Card, Node
    from jobs.models import Action, Job
    from monitoring.models import Alert

    def distinct(qs: Any, field: str) -> set[Any]:
        # no model ordering: it would join the DISTINCT (one row per node instead of per cluster)
        return set(qs.order_by().values_list(field, flat=True).distinct())

    clusters = set(batch.get("cluster", ()))
    node_ids = set(batch.get("node", ()))
    if node_ids:
        clusters |= distinct(Node.objects.filter(pk__any=node_ids), "cluster_id")
    else:  # a batch with node ids names the nodes of its cards and alerts too (telemetry)
        cards, alerts = set(batch.get("card", ())), set(batch.get("alert", ()))
        if cards:
            clusters |= distinct(Card.objects.filter(pk__any=cards), "node__cluster_id")
        if alerts:
            clusters |= distinct(Alert.objects.filter(pk__any=alerts), "node__cluster_id")
    if batch.get("job"):
        clusters |= distinct(Job.objects.filter(pk__any=set(batch["job"])), "cluster_id")
    if batch.get("action"):
        clusters |= distinct(Action.objects.filter(pk__any=set(batch["action"])), "cluster_id")
    clusters.discard(None)
    return {"cluster": sorted(clusters)} if clusters else {}


# -- fragments -------------------------------------------------------------------------------------
def overview_variant(with_alerts: bool, language: str) -> str:
    """The frame key of a socket: its role's variant in its user's language."""
    return f"{WITH_ALERTS if with_alerts else PLAIN}:{language}"


def _cards(items: Iterable[Any], *, with_alerts: bool) -> str:
    return "".join(
        render_to_string("live/overview_cluster.html", {"o": o, "with_alerts": with_alerts}) for o in items
    )


def all_variants() -> dict[str, str]:
    """{presence group: variant} of every overview variant: both roles in every UI language."""
    return {
        groups.overview_variant(v): v
        for v in (overview_variant(w, language) for language in languages() for w in (True, False))
    }


def overview_html(cluster_ids: Iterable[int] | None, variants: set[str] | None = None) -> dict[str, str]:
    """{variant: the overview cards of ``cluster_ids`` (all when None)}: read once, rendered for
    ``variants`` (None: both roles in every language of the UI; the frame a socket forwards is in
    its user's language)."""
    from monitoring.overview import cluster_overview_list

    wanted = set(all_variants().values()) if variants is None else variants
    if not wanted:
        return {}
    items = cluster_overview_list(cluster_ids=cluster_ids, with_alerts=True)
    out: dict[str, str] = {}
    for language in languages():
        with translation.override(language):
            for with_alerts in (True, False):
                variant = overview_variant(with_alerts, language)
                if variant in wanted:
                    out[variant] = _cards(items, with_alerts=with_alerts)
    return out


def render_overview(cluster_ids: Iterable[int] | None, *, with_alerts: bool) -> str:
    """The overview cards of one variant (a socket's snapshot, or an event without frames)."""
    from monitoring.overview import cluster_overview_list

    return _cards(
        cluster_overview_list(cluster_ids=cluster_ids, with_alerts=with_alerts), with_alerts=with_alerts
    )


def overview_frames(
    ids: dict[str, list[Any]], *, seq: str, ts: float, variants: set[str] | None = None
) -> dict[str, str]:
    """{variant: the websocket frame (marker + cards)} of one overview event (``variants`` only)."""
    status: dict[str, str] = {}
    out = {}
    for variant, body in overview_html(ids["cluster"], variants).items():
        language = variant.split(":", 1)[1]
        if language not in status:
            with translation.override(language):
                status[language] = status_html(seq, ts)
        out[variant] = status[language] + body
    return out


# -- the overview's sockets ------------------------------------------------------------------------
class OverviewConsumer(LiveConsumer):
    view = "overview"
    shared_snapshots = True
    periodic_snapshot = True  # its "stale" warnings depend on the clock

    def setup(self) -> bool:
        self.with_alerts = self.user.has_perm("monitoring.view_alert")
        # the presence group of its variant: the flush renders only the variants someone watches
        self.live_groups = [
            groups.OVERVIEW,
            groups.overview_variant(overview_variant(self.with_alerts, self.language)),
        ]
        return True

    def render_key(self) -> tuple[Any, ...]:
        return (self.with_alerts,)

    async def live_changed(self, event: dict[str, Any]) -> None:
        frame = event.get("frames", {}).get(overview_variant(self.with_alerts, self.language))
        if frame is None:  # an event without rendered frames: render here (once per process)
            await super().live_changed(event)
        else:
            await self.send(text_data=frame)

    def snapshot(self) -> str:
        return render_overview(None, with_alerts=self.with_alerts)

    def update(self, ids: dict[str, list[Any]]) -> str:
        cluster_ids = ids.get("cluster")
        return render_overview(cluster_ids, with_alerts=self.with_alerts) if cluster_ids else ""


# -- signals ---------------------------------------------------------------------------------------
def on_telemetry_ingested(*, node_ids: Any = (), card_ids: Any = (), alert_ids: Any = (), **_: Any) -> None:
    push.mark_many({"node": node_ids, "card": card_ids, "alert": alert_ids})


def register() -> None:
    from monitoring.signals import telemetry_ingested

    registry.register(
        kinds=("alert",),
        router=route,
        summary=registry.Summary(
            group=groups.OVERVIEW, route=overview_route, frames=overview_frames, variants=all_variants
        ),
        websockets={"ws/live/overview/": OverviewConsumer},
    )
    telemetry_ingested.connect(on_telemetry_ingested, dispatch_uid="live.telemetry_ingested")
