"""Reads for the live dashboards: the cluster overview, the rack thermal map, a node's latest values.

Flat ``values_list`` queries over the latest-value table, a fixed number per call whatever the
number of clusters or nodes (the overview is re-read for every push to the overview group).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.models import Case, Count, F, FloatField, Max, Q, QuerySet, Sum, When, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from inventory.models import Card, Cluster, Node
from inventory.power import cluster_power_limits
from jobs.models import Job, NodeState
from monitoring import storage
from monitoring.models import Alert, LatestValue, Series
from monitoring.selectors import node_failing_checks

TEMPERATURE = "temperature_c"
CARD_POWER = "power_w"
NODE_POWER = "node_power_w"
UTILISATION = "utilization_pct"
CHART_METRICS = (TEMPERATURE, CARD_POWER, UTILISATION)


def chart_metrics(*, node_id: int, card_id: int | None = None) -> list[str]:
    """The chart metrics the node's (or the card's) cards report: a p150a has no utilisation to
    chart, so its page shows no empty utilisation panel (in CHART_METRICS order)."""
    qs = Series.objects.filter(node_id=node_id, metric__in=CHART_METRICS, card__isnull=False)
    if card_id is not None:
        qs = qs.filter(card_id=card_id)
    have = set(qs.values_list("metric", flat=True).distinct())
    return [m for m in CHART_METRICS if m in have]


HOTTEST = 5
ALERTS_SHOWN = 5


def fresh_after(now: dt.datetime | None = None) -> dt.datetime:
    """Values older than this are not "measured now" (three pull intervals)."""
    interval = getattr(settings, "PORTAL_TELEMETRY_PULL_INTERVAL_S", 30)
    return (now or timezone.now()) - dt.timedelta(seconds=3 * interval)


def temperature_level(value: float | None) -> str:
    """Colour class of a card temperature: unknown / ok / warm / hot / critical."""
    if value is None:
        return "unknown"
    warm, hot, critical = getattr(settings, "PORTAL_LIVE_TEMPERATURE_LEVELS", (70, 83, 90))
    if value >= critical:
        return "critical"
    if value >= hot:
        return "hot"
    if value >= warm:
        return "warm"
    return "ok"


@dataclass
class HotCard:
    card_id: int | None
    node_id: int
    hostname: str
    label: str
    value: float
    level: str


@dataclass
class ClusterOverview:
    cluster: Cluster
    # (Slurm's state, nodes); "" for nodes Slurm never reported (the template names them: one
    # summary is rendered in every language)
    node_states: list[tuple[str, int]] = field(default_factory=list)
    node_total: int = 0
    gpus_total: int = 0
    gpus_alloc: int = 0
    power_w: float = 0.0
    power_budget_w: float = 0.0  # the limit that binds: feeds (with headroom and A/B redundancy), then PSUs
    power_bound_by: str = ""  # "feed" or "psu"
    hottest: list[HotCard] = field(default_factory=list)
    alerts_firing: int = 0
    alerts: list[Alert] = field(default_factory=list)
    jobs_running: int = 0
    jobs_pending: int = 0
    stale_error: str = ""  # the last sync's error, for operators
    stale_since: dt.datetime | None = None  # no successful sync since then
    telemetry_at: dt.datetime | None = None

    @property
    def is_stale(self) -> bool:
        return bool(self.stale_error or self.stale_since)

    @property
    def power_pct(self) -> int | None:
        if not self.power_budget_w:
            return None
        return round(100 * self.power_w / self.power_budget_w)


def cluster_overview_list(
    *, cluster_ids: Iterable[int] | None = None, with_alerts: bool = True
) -> list[ClusterOverview]:
    """One :class:`ClusterOverview` per cluster (all, or ``cluster_ids``), in name order."""
    clusters = Cluster.objects.order_by("name")
    if cluster_ids is not None:
        clusters = clusters.filter(pk__in=list(cluster_ids))
    out = {c.pk: ClusterOverview(cluster=c) for c in clusters}
    if not out:
        return []
    ids = list(out)
    now = timezone.now()
    after = fresh_after(now)
    # the costliest read (a window over every card temperature) runs in a second server process
    # while the others run here (outside a transaction; inside one, in turn)
    with storage.reads_aside([_hottest_query(ids, after)]) as hottest:
        _counts(out, ids)
        for cid, limit in cluster_power_limits(ids).items():
            out[cid].power_budget_w = limit.limit_w or 0.0
            out[cid].power_bound_by = limit.bound_by
        for cid, watts, newest in storage.latest_power_by_cluster(ids, NODE_POWER, CARD_POWER, after):
            # whole-node power where the BMC reports it, else the sum of the node's card powers
            out[cid].power_w = watts
            out[cid].telemetry_at = newest
        if with_alerts:
            _alerts(out, ids)
        _hottest(out, hottest()[0], after)
    for o in out.values():
        o.stale_error, o.stale_since = cluster_staleness(o.cluster, now=now)
    return list(out.values())


def _counts(out: dict[int, ClusterOverview], ids: list[int]) -> None:
    """Node states, cards in use, running and pending jobs of each cluster."""
    for cid, state, n in (
        Node.objects.filter(cluster_id__in=ids)
        .values_list("cluster_id", "slurm_state")
        .annotate(n=Count("pk"))
        .order_by("cluster_id", "slurm_state")
    ):
        # never reported by Slurm: login, storage, switch and head nodes outside its partitions
        out[cid].node_states.append((state, n))
        out[cid].node_total += n
    for cid, total, alloc in (
        NodeState.objects.filter(node__cluster_id__in=ids)
        .values_list("node__cluster_id")
        .annotate(Sum("gpus_total"), Sum("gpus_alloc"))
    ):
        out[cid].gpus_total, out[cid].gpus_alloc = total or 0, alloc or 0
    for cid, state, n in (
        Job.objects.filter(cluster_id__in=ids, state__in=("RUNNING", "PENDING"))
        .values_list("cluster_id", "state")
        .annotate(n=Count("pk"))
        .order_by()
    ):
        if state == "RUNNING":
            out[cid].jobs_running = n
        else:
            out[cid].jobs_pending = n


def cluster_staleness(cluster: Cluster, *, now: dt.datetime) -> tuple[str, dt.datetime | None]:
    """Why the cluster's Slurm data is stale: the last sync's error, or since when no sync has
    succeeded (after three sync intervals, at least a minute); ("", None) when it is fresh."""
    if cluster.last_sync_error:
        return cluster.last_sync_error, None
    if cluster.last_sync_ok_at is None:
        return "", None
    limit = 3 * getattr(settings, "PORTAL_SYNC_INTERVAL", 15)
    if now - cluster.last_sync_ok_at > dt.timedelta(seconds=max(limit, 60)):
        return "", cluster.last_sync_ok_at
    return "", None


# The freshness test sits in the aggregates' FILTER and in the window's ordering, never in the
# WHERE clause: right after an ingest every ``ts`` lies past the column's histogram, the planner
# estimates one fresh row and picks a nested loop over every latest value (2-3x slower).


def _hottest_query(ids: list[int], after: dt.datetime) -> QuerySet[LatestValue, tuple[Any, ...]]:
    """The ``HOTTEST`` hottest fresh cards of each cluster, ranked per cluster in the database (one
    query for all clusters); a node Slurm marks down or not responding shows none (its last readings
    are not its cards' state now). The ranking joins no more than it filters on."""
    fresh_value = Case(When(ts__gte=after, then=F("value")), default=None, output_field=FloatField())
    return (
        LatestValue.objects.filter(series__node__cluster_id__in=ids, series__metric=TEMPERATURE)
        .exclude(series__card_ref="")
        .exclude(series__node__slurm_state__iregex=UNREACHABLE_SLURM_RE)  # its readings say nothing now
        .annotate(
            rank=Window(
                RowNumber(),
                partition_by=[F("series__node__cluster_id")],
                order_by=[fresh_value.desc(nulls_last=True), F("series_id").asc()],
            )
        )
        .filter(rank__lte=HOTTEST)
        .order_by("series__node__cluster_id", "rank")
        .values_list(
            "series__node__cluster_id",
            "series__card_id",
            "series__node_id",
            "series__node__hostname",
            "series__card_ref",
            "value",
            "ts",
        )  # fmt: skip
    )


def _hottest(out: dict[int, ClusterOverview], rows: list[tuple[Any, ...]], after: dt.datetime) -> None:
    """The ranked rows of :func:`_hottest_query` as each cluster's hot cards (the winners' slots
    read after)."""
    slots = dict(Card.objects.filter(pk__in={r[1] for r in rows} - {None}).values_list("pk", "slot"))
    for cid, card_id, node_id, hostname, ref, value, ts in rows:
        if ts < after:  # a cluster with fewer fresh cards than HOTTEST: the rest are stale
            continue
        slot = slots.get(card_id)
        label = f"{hostname}/{slot}" if slot else f"{hostname} {ref[:12]}"
        out[cid].hottest.append(HotCard(card_id, node_id, hostname, label, value, temperature_level(value)))


def _alerts(out: dict[int, ClusterOverview], ids: list[int]) -> None:
    firing = Alert.objects.filter(status=Alert.Status.FIRING, node__cluster_id__in=ids)
    for cid, n in firing.values_list("node__cluster_id").annotate(n=Count("pk")).order_by():
        out[cid].alerts_firing = n
    if not any(o.alerts_firing for o in out.values()):
        return  # the quiet case: no list to read
    for alert in firing.select_related("rule", "node").order_by("-started_at")[: ALERTS_SHOWN * len(ids)]:
        shown = out[alert.node.cluster_id or 0].alerts
        if len(shown) < ALERTS_SHOWN:
            shown.append(alert)


# -- rack thermal map and node charts -------------------------------------------------------------
#: Slurm states (sinfo's, lower case, flags stripped) in which a node's readings say nothing about
#: how its cards are now: they are shown stale, never green
UNREACHABLE_SLURM_STATES = frozenset(
    {"down", "unknown", "fail", "failing", "power_down", "powered_down", "powering_down", "not_responding"}
)


#: the same test in the database (``slurm_unreachable``): a state of the set, flags or "+" after it, or "*"
UNREACHABLE_SLURM_RE = r"\*\s*$|^\s*(" + "|".join(sorted(UNREACHABLE_SLURM_STATES)) + r")([~#!%$@^+-].*)?\s*$"


def slurm_unreachable(state: str | None) -> bool:
    """True for a node Slurm marks down (``down``, ``fail``...) or not responding (``idle*``)."""
    text = (state or "").strip().lower()
    if not text:
        return False
    if text.endswith("*"):  # sinfo: the node is not responding
        return True
    return text.rstrip("~#!%$@^-").split("+")[0] in UNREACHABLE_SLURM_STATES


@dataclass
class ThermalCard:
    card: Card
    temperature: float | None
    power: float | None
    utilisation: float | None
    #: the node is down or not responding in Slurm: the last reading is shown, greyed, not judged
    stale: bool = False

    @property
    def level(self) -> str:
        return "unknown" if self.stale else temperature_level(self.temperature)


@dataclass
class ThermalNode:
    node: Node
    cards: list[ThermalCard]
    node_temperature: float | None = None
    #: names of the health checks failing on the node (any: it is shown unhealthy)
    unhealthy: list[str] = field(default_factory=list)

    @property
    def stale(self) -> bool:
        return slurm_unreachable(self.node.slurm_state)

    @property
    def level(self) -> str:
        if self.stale:
            return "unknown"
        temps = [c.temperature for c in self.cards if c.temperature is not None]
        return temperature_level(max(temps) if temps else self.node_temperature)


def node_thermal_list(
    *, node_ids: Iterable[int] | None = None, rack_id: int | None = None
) -> list[ThermalNode]:
    """Nodes (of a rack, or by id) with their cards' latest temperature, power and utilisation."""
    nodes = Node.objects.select_related("cluster").order_by("-position", "hostname")
    if rack_id is not None:
        nodes = nodes.filter(rack_id=rack_id)
    if node_ids is not None:
        nodes = nodes.filter(pk__in=list(node_ids))
    node_list = list(nodes)
    if not node_list:
        return []
    pks = [n.pk for n in node_list]
    cards: dict[int, list[Card]] = {}
    for card in Card.objects.filter(node_id__in=pks).select_related("card_model").order_by("slot"):
        cards.setdefault(card.node_id, []).append(card)
    latest = latest_values(pks)
    failing = node_failing_checks(pks)
    result = []
    for n in node_list:
        stale = slurm_unreachable(n.slurm_state)
        tcards = [
            ThermalCard(
                c,
                latest.get((n.pk, c.pk, TEMPERATURE)),
                latest.get((n.pk, c.pk, CARD_POWER)),
                latest.get((n.pk, c.pk, UTILISATION)),
                stale=stale,
            )
            for c in cards.get(n.pk, [])
        ]
        result.append(ThermalNode(n, tcards, latest.get((n.pk, None, TEMPERATURE)), failing.get(n.pk, [])))
    return result


def latest_values(node_ids: Iterable[int]) -> dict[tuple[int, int | None, str], float]:
    """{(node id, card id or None, metric): value} of the chart metrics, fresh values only.

    Node-level sensors (sensor labels) of one metric keep their maximum.
    """
    out: dict[tuple[int, int | None, str], float] = {}
    rows = LatestValue.objects.filter(
        series__node_id__in=list(node_ids), series__metric__in=CHART_METRICS, ts__gte=fresh_after()
    ).values_list("series__node_id", "series__card_id", "series__metric", "value")
    for node_id, card_id, metric, value in rows:
        key = (node_id, card_id, metric)
        out[key] = max(value, out.get(key, value))
    return out


def node_latest_points(node_id: int) -> dict[str, Any]:
    """The newest point of each chart metric per card, for appending to the node page's charts:
    ``{"ts": epoch seconds, "cards": {card id: {metric: value}}}``."""
    cards: dict[str, dict[str, float]] = {}
    newest: dt.datetime | None = None
    rows = LatestValue.objects.filter(
        series__node_id=node_id,
        series__metric__in=CHART_METRICS,
        series__card__isnull=False,
        ts__gte=fresh_after(),
    ).values_list("series__card_id", "series__metric", "value", "ts")
    for card_id, metric, value, ts in rows:
        cards.setdefault(str(card_id), {})[metric] = value
        newest = ts if newest is None or ts > newest else newest
    return {"ts": newest.timestamp() if newest else None, "cards": cards}


# -- fabric links ----------------------------------------------------------------------------------
LINK_UP = "link_up"


def port_link_up(port_ids: Iterable[int]) -> dict[int, bool]:
    """{port id: the port's latest ``link_up``} for the ports with such telemetry: the series of the
    port's card (or of its node, for node ports) whose ``port`` label names the port or one of its
    Ethernet channels (inventory.links). A port reported by several series (channels, chips, lanes)
    is up only when all of them are."""
    from inventory.links import port_keys

    ports = port_keys(port_ids)
    if not ports:
        return {}
    out: dict[int, bool] = {}
    rows = LatestValue.objects.filter(
        series__metric=LINK_UP, series__node_id__in={node_id for node_id, _c, _n in ports}
    ).values_list("series__node_id", "series__card_id", "series__labels", "value")
    for node_id, card_id, labels, value in rows:
        name = dict(kv.partition("=")[::2] for kv in labels.split(",") if kv).get("port", "")
        port = ports.get((node_id, card_id, name.lower()))
        if port is not None:
            out[port] = out.get(port, True) and value >= 1
    return out


#: event rules whose firing alerts mean "this link is down" (the fabric drawing colours it red)
LINK_DOWN_EVENTS = frozenset({"link_down"})


def port_link_alerts(port_ids: Iterable[int]) -> set[int]:
    """The ports (of ``port_ids``) with a firing link-down alert: the alert's node and card are the
    port's and its ``port`` label names it or one of its channels (``n<node>/<card ref>/<labels>``
    targets)."""
    from inventory.links import port_keys

    ports = port_keys(port_ids)
    if not ports:
        return set()
    out: set[int] = set()
    rows = Alert.objects.filter(
        status=Alert.Status.FIRING,
        rule__event_kind__in=LINK_DOWN_EVENTS,
        node_id__in={node_id for node_id, _c, _n in ports},
    ).values_list("node_id", "card_id", "target")
    for node_id, card_id, target in rows:
        labels = target.split("/", 2)[2] if target.count("/") >= 2 else ""
        name = dict(kv.partition("=")[::2] for kv in labels.split(",") if kv).get("port", "")
        port = ports.get((node_id, card_id, name.lower()))
        if port is not None:
            out.add(port)
    return out


def measured_power(card_ids: Iterable[int], node_ids: Iterable[int]) -> dict[tuple[str, int], float]:
    """Fresh measured watts for the power budgets (inventory.power's `measured_w`):

    ("card", id) from the card's `power_w`; ("node", id) from the BMC's `node_power_w`, else the
    sum of the powers of its cards that have no power lead of their own (SXM modules fed through the
    board, which the node's nameplate line includes): a lower bound, the host itself unmeasured.
    """
    card_ids, node_ids = list(card_ids), list(node_ids)
    fresh = Q(ts__gte=fresh_after())
    out: dict[tuple[str, int], float] = {}
    for card_id, watts in (
        LatestValue.objects.filter(series__card_id__in=card_ids, series__metric=CARD_POWER)
        .values_list("series__card_id")
        .annotate(w=Max("value", filter=fresh))
        .order_by()
    ):
        if watts is not None:
            out[("card", card_id)] = watts
    for node_id, node_w, card_w in (
        LatestValue.objects.filter(series__node_id__in=node_ids, series__metric__in=(NODE_POWER, CARD_POWER))
        .values_list("series__node_id")
        .annotate(
            node_w=Sum("value", filter=fresh & Q(series__metric=NODE_POWER)),
            card_w=Sum(
                "value",
                filter=fresh & Q(series__metric=CARD_POWER, series__card__power_leads__isnull=True),
            ),
        )
        .order_by()
    ):
        watts = node_w if node_w is not None else card_w
        if watts is not None:
            out[("node", node_id)] = watts
    return out
