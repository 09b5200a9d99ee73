"""Power budgets per PSU, per feed and per lead, and the what-if planner. Reads only; no writes.

Model (nameplate, the worst case a job can reach):
- A load is a card (its model's TDP) or a node (the host base load, plus the TDP of its cards that have no
  power lead of their own, e.g. SXM modules fed through the board).
- A load is carried by the PSUs whose leads reach it; a node without leads by the PSUs sitting in it.
  Shared by k PSUs it puts 1/k on each; when all k are redundant (N+1) each must carry 1/(k-1), so that the
  load survives one PSU failing (a redundant pair: each carries all of it).
- A PSU's usable power is its capacity derated by the headroom (PORTAL_POWER_HEADROOM_PCT, default 20%,
  as the second field guide advises). Up to usable: pass; into the headroom: warn; over capacity: fail.
- A feed's usable power is NetBox's: volts × amps × max utilisation (× √3 for three-phase); its max
  utilisation is its headroom. Its load is the wall draw of its PSUs: DC load / efficiency.
- Leads: a load's share on a PSU is split over that PSU's leads to it; a lead above its rating fails, and
  so does a card whose leads together are rated below its TDP.
- `measured_w` maps ("card", id) or ("node", id) to watts. When not given, the provider named by
  PORTAL_MEASURED_POWER (the telemetry app's fresh latest values) fills it. Measured figures are shown
  beside the budget, never instead of it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.models import Count, Q
from django.utils.module_loading import import_string

from inventory.models import PSU, Card, CardModel, Node, PowerFeed, PowerLead

PASS, WARN, FAIL = "pass", "warn", "fail"
Key = tuple[str, int]  # ("card", id) or ("node", id)
Measured = Mapping[Key, float]


def default_headroom_pct() -> int:
    return int(getattr(settings, "PORTAL_POWER_HEADROOM_PCT", 20))


@dataclass
class LoadLine:
    kind: str  # card, node, psu (in a feed budget), what-if
    id: int | None
    name: str
    nameplate_w: float  # the whole load
    share: float  # fraction of it this budget carries
    measured_w: float | None = None

    @property
    def carried_w(self) -> float:
        return self.nameplate_w * self.share


@dataclass
class LeadLine:
    id: int
    name: str
    kind: str
    rating_w: int
    load_w: float
    target: str

    @property
    def status(self) -> str:
        return FAIL if self.load_w > self.rating_w else PASS


@dataclass
class Budget:
    scope: str  # psu or feed
    id: int
    name: str
    capacity_w: float
    headroom_pct: float
    loads: list[LoadLine] = field(default_factory=list)
    leads: list[LeadLine] = field(default_factory=list)
    findings: list[tuple[str, str]] = field(default_factory=list)  # (severity, message)
    efficiency_pct: int = 100
    feed_id: int | None = None

    @property
    def usable_w(self) -> float:
        return self.capacity_w * (100 - self.headroom_pct) / 100

    @property
    def load_w(self) -> float:
        return round(sum(line.carried_w for line in self.loads), 1)

    @property
    def wall_w(self) -> float:
        return round(self.load_w * 100 / self.efficiency_pct, 1)

    @property
    def measured_w(self) -> float | None:
        seen = [line.measured_w * line.share for line in self.loads if line.measured_w is not None]
        return round(sum(seen), 1) if seen else None

    @property
    def margin_w(self) -> float:
        return round(self.usable_w - self.load_w, 1)

    @property
    def utilisation_pct(self) -> float:
        return round(100 * self.load_w / self.capacity_w, 1) if self.capacity_w else 0.0

    @property
    def status(self) -> str:
        worst = PASS
        if self.load_w > self.capacity_w:
            worst = FAIL
        elif self.load_w > self.usable_w:
            worst = WARN
        for severity, _msg in self.findings:
            worst = _worse(worst, severity)
        return worst

    def as_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "id": self.id,
            "name": self.name,
            "status": self.status,
            "capacity_w": self.capacity_w,
            "headroom_pct": self.headroom_pct,
            "usable_w": round(self.usable_w, 1),
            "load_w": self.load_w,
            "wall_w": self.wall_w,
            "measured_w": self.measured_w,
            "margin_w": self.margin_w,
            "utilisation_pct": self.utilisation_pct,
            "loads": [
                {
                    "kind": ln.kind,
                    "id": ln.id,
                    "name": ln.name,
                    "nameplate_w": ln.nameplate_w,
                    "share": round(ln.share, 4),
                    "carried_w": round(ln.carried_w, 1),
                    "measured_w": ln.measured_w,
                }
                for ln in self.loads
            ],
            "leads": [
                {
                    "id": ld.id,
                    "name": ld.name,
                    "kind": ld.kind,
                    "rating_w": ld.rating_w,
                    "load_w": round(ld.load_w, 1),
                    "target": ld.target,
                    "status": ld.status,
                }
                for ld in self.leads
            ],
            "findings": [{"severity": s, "message": m} for s, m in self.findings],
        }


def _worse(a: str, b: str) -> str:
    order = {PASS: 0, WARN: 1, FAIL: 2}
    return a if order.get(a, 0) >= order.get(b, 0) else b


def _node_base(node: Node) -> int:
    if node.base_power_w is not None:
        return node.base_power_w
    return node.chassis.base_power_w if node.chassis is not None else 0


def _share(psu_ids: set[int], redundant: Mapping[int, bool]) -> float:
    k = len(psu_ids)
    if k >= 2 and all(redundant[p] for p in psu_ids):
        return 1 / (k - 1)
    return 1 / k if k else 0.0


def measured_power(card_ids: Iterable[int], node_ids: Iterable[int]) -> Measured:
    """What the telemetry measures now for these loads (PORTAL_MEASURED_POWER; empty if unset)."""
    path = getattr(settings, "PORTAL_MEASURED_POWER", "")
    return import_string(path)(card_ids, node_ids) if path else {}


def psu_budgets(
    psus: Sequence[PSU],
    *,
    measured_w: Measured | None = None,
    headroom_pct: float | None = None,
    extra: Mapping[int, Iterable[LoadLine]] | None = None,
) -> list[Budget]:
    """Budgets of the given PSUs (fetched with select_related("node__chassis", "feed")): six queries."""
    headroom = default_headroom_pct() if headroom_pct is None else headroom_pct
    psu_ids = [p.pk for p in psus]
    leads = list(
        PowerLead.objects.filter(psu_id__in=psu_ids).select_related("card__card_model", "card__node", "node")
    )
    card_ids = {ld.card_id for ld in leads if ld.card_id}
    node_ids = {ld.node_id for ld in leads if ld.node_id}
    node_ids |= {p.node_id for p in psus if p.node_id and not any(ld.psu_id == p.pk for ld in leads)}
    measured = measured_w if measured_w is not None else measured_power(card_ids, node_ids)
    # Every lead of these loads, from any PSU, to know who shares them.
    feeding: dict[Key, set[int]] = defaultdict(set)
    redundant: dict[int, bool] = {p.pk: p.redundant for p in psus}
    for psu_id, card_id, node_id, red in PowerLead.objects.filter(
        Q(card_id__in=card_ids) | Q(node_id__in=node_ids)
    ).values_list("psu_id", "card_id", "node_id", "psu__redundant"):
        feeding[("card", card_id) if card_id else ("node", node_id)].add(psu_id)
        redundant[psu_id] = red
    leadless_nodes = {n for n in node_ids if ("node", n) not in feeding}
    for psu_id, node_id, red in PSU.objects.filter(node_id__in=leadless_nodes).values_list(
        "id", "node_id", "redundant"
    ):
        feeding[("node", node_id)].add(psu_id)
        redundant[psu_id] = red
    nodes = {n.pk: n for n in Node.objects.filter(pk__in=node_ids).select_related("chassis")}
    node_load: dict[int, float] = {n: float(_node_base(nodes[n])) for n in node_ids}
    for leadless in (
        Card.objects.filter(node_id__in=node_ids)
        .annotate(n_leads=Count("power_leads"))
        .filter(n_leads=0)
        .select_related("card_model")
    ):
        node_load[leadless.node_id] += leadless.card_model.tdp_w
    cards = {ld.card_id: ld.card for ld in leads if ld.card is not None}
    card_rating: dict[int, int] = defaultdict(int)
    card_leads: dict[int, int] = defaultdict(int)
    for ld in leads:
        if ld.card_id:
            card_rating[ld.card_id] += ld.effective_rating_w
            card_leads[ld.card_id] += 1
    budgets: list[Budget] = []
    for psu in psus:
        b = Budget(
            "psu",
            psu.pk,
            _psu_name(psu),
            float(psu.capacity_w),
            headroom,
            efficiency_pct=psu.efficiency_pct,
            feed_id=psu.feed_id,
        )
        mine = [ld for ld in leads if ld.psu_id == psu.pk]
        keys: dict[Key, list[PowerLead]] = defaultdict(list)
        for ld in mine:
            keys[("card", ld.card_id) if ld.card_id else ("node", ld.node_id)].append(ld)  # type: ignore[index]
        if not mine and psu.node_id:
            keys[("node", psu.node_id)] = []
        for key, key_leads in keys.items():
            if key[1] is None:
                continue
            if key[0] == "card":
                card = cards[key[1]]
                full, name = float(card.card_model.tdp_w), str(card)
            else:
                full, name = node_load[key[1]], nodes[key[1]].hostname
            line = LoadLine(key[0], key[1], name, full, _share(feeding[key], redundant), measured.get(key))
            b.loads.append(line)
            for ld in key_leads:
                b.leads.append(
                    LeadLine(
                        ld.pk, ld.name, ld.kind, ld.effective_rating_w, line.carried_w / len(key_leads), name
                    )
                )
        for ld in mine:
            if not ld.card_id and not ld.node_id:
                b.leads.append(LeadLine(ld.pk, ld.name, ld.kind, ld.effective_rating_w, 0.0, "—"))
        b.loads.extend((extra or {}).get(psu.pk, ()))
        for ln in b.leads:
            if ln.status == FAIL:
                b.findings.append(
                    (FAIL, f"Lead {ln.name} carries {ln.load_w:.0f} W, over its {ln.rating_w} W rating.")
                )
        for card_id in {ld.card_id for ld in mine if ld.card_id}:
            card = cards[card_id]
            if card_rating[card_id] < card.card_model.tdp_w:
                b.findings.append(
                    (
                        FAIL,
                        f"{card}: its {card_leads[card_id]} lead(s) are rated {card_rating[card_id]} W "
                        f"for a {card.card_model.tdp_w} W card.",
                    )
                )
        budgets.append(b)
    return budgets


def _psu_name(psu: PSU) -> str:
    return f"{psu.node.hostname} {psu.name}" if psu.node_id and psu.node is not None else psu.name


def psu_queryset() -> Any:
    return PSU.objects.select_related("node__chassis", "feed")


def psu_budget(psu: PSU, **kw: Any) -> Budget:
    return psu_budgets([psu], **kw)[0]


def feed_budgets(
    feeds: Sequence[PowerFeed],
    *,
    measured_w: Measured | None = None,
    extra: Mapping[int, Iterable[LoadLine]] | None = None,
    headroom_pct: float | None = None,
) -> list[Budget]:
    """A feed carries the wall draw of its PSUs (their DC load / efficiency)."""
    psus = list(psu_queryset().filter(feed__in=feeds))
    by_feed: dict[int, list[Budget]] = defaultdict(list)
    for b in psu_budgets(psus, measured_w=measured_w, extra=extra, headroom_pct=headroom_pct):
        by_feed[b.feed_id or 0].append(b)
    out: list[Budget] = []
    for feed in feeds:
        fb = Budget("feed", feed.pk, feed.name, float(feed.available_power_w), 0)
        for pb in by_feed.get(feed.pk, []):
            measured = pb.measured_w * 100 / pb.efficiency_pct if pb.measured_w is not None else None
            fb.loads.append(LoadLine("psu", pb.id, pb.name, pb.wall_w, 1.0, measured))
        out.append(fb)
    return out


def node_power(
    node: Node, *, measured_w: Measured | None = None, extra: Mapping[int, Iterable[LoadLine]] | None = None
) -> dict[str, Any]:
    """The budgets of every PSU that powers the node (or sits in it) and of their feeds."""
    psus = list(
        psu_queryset()
        .filter(Q(node=node) | Q(leads__node=node) | Q(leads__card__node=node))
        .distinct()
        .order_by("name")
    )
    budgets = psu_budgets(psus, measured_w=measured_w, extra=extra)
    feeds = list(PowerFeed.objects.filter(pk__in={p.feed_id for p in psus if p.feed_id}))
    findings: list[tuple[str, str]] = []
    unpowered = (
        Card.objects.filter(node=node)
        .exclude(card_model__power_connector="")
        .annotate(n=Count("power_leads"))
        .filter(n=0)
        .select_related("card_model")
    )
    for card in unpowered:
        findings.append(
            (
                WARN,
                f"{card.slot}: a {card.card_model.get_power_connector_display()} card with no "
                f"power lead recorded.",
            )
        )
    if not psus:
        findings.append((FAIL, "No PSU is recorded for this node."))
    return {
        "psus": budgets,
        "feeds": feed_budgets(feeds, measured_w=measured_w, extra=extra),
        "findings": findings,
    }


@dataclass
class WhatIf:
    node: Node
    card_model: CardModel
    count: int
    psus: list[Budget]
    feeds: list[Budget]
    findings: list[tuple[str, str]]

    @property
    def status(self) -> str:
        worst = PASS
        for b in (*self.psus, *self.feeds):
            worst = _worse(worst, b.status)
        for severity, _m in self.findings:
            worst = _worse(worst, severity)
        return worst

    @property
    def holds(self) -> bool:
        return self.status != FAIL

    def as_dict(self) -> dict[str, Any]:
        return {
            "node": self.node.hostname,
            "card_model": str(self.card_model),
            "count": self.count,
            "status": self.status,
            "holds": self.holds,
            "findings": [{"severity": s, "message": m} for s, m in self.findings],
            "psus": [b.as_dict() for b in self.psus],
            "feeds": [b.as_dict() for b in self.feeds],
        }


def power_what_if(
    node: Node, card_model: CardModel, count: int, *, measured_w: Measured | None = None
) -> WhatIf:
    """Add `count` cards of `card_model` to `node`: do its PSUs and feeds still hold, is there room?

    The new cards go on the PSUs that already power the node's cards (else the ones powering the node),
    shared as any load is.
    """
    before = node_power(node, measured_w=measured_w)
    psus: list[Budget] = before["psus"]
    findings: list[tuple[str, str]] = []
    carriers = [b for b in psus if any(ln.kind == "card" for ln in b.loads)] or psus
    if not carriers:
        findings.append((FAIL, "No PSU is recorded for this node: nothing can carry the new cards."))
    slots = node.chassis.card_slots if node.chassis is not None else 0
    used = Card.objects.filter(node=node).count()
    if slots and used + count > slots:
        findings.append(
            (FAIL, f"The chassis has {slots} card slots and {used} are used: {count} more do not fit.")
        )
    extra: dict[int, list[LoadLine]] = {}
    if carriers and count:
        ids = {b.id for b in carriers}
        red = dict(PSU.objects.filter(pk__in=ids).values_list("id", "redundant"))
        share = _share(ids, red)
        for b in carriers:
            extra[b.id] = [
                LoadLine("what-if", None, f"+{count} × {card_model}", float(card_model.tdp_w * count), share)
            ]
    after = node_power(node, measured_w=measured_w, extra=extra)
    return WhatIf(node, card_model, count, after["psus"], after["feeds"], findings)


@dataclass(frozen=True)
class PowerLimit:
    """The draw a cluster may reach: the tighter of its feeds and its PSUs, each with its headroom and
    redundancy (an A/B feed pair or an N+1 PSU set must carry the load with one of them lost)."""

    feed_w: float | None
    psu_w: float | None

    @property
    def limit_w(self) -> float | None:
        known = [w for w in (self.feed_w, self.psu_w) if w is not None]
        return min(known) if known else None

    @property
    def bound_by(self) -> str:
        """ "feed" or "psu": which limit binds ("" when neither is known)."""
        if self.limit_w is None:
            return ""
        return "feed" if self.feed_w is not None and self.feed_w == self.limit_w else "psu"


def _redundant_total(capacities: list[float], all_redundant: bool) -> float:
    if len(capacities) >= 2 and all_redundant:
        return sum(capacities) - max(capacities)
    return sum(capacities)


def cluster_power_limits(
    cluster_ids: Iterable[int], *, headroom_pct: float | None = None
) -> dict[int, PowerLimit]:
    """Per cluster, the usable power of its PSUs (per node, N+1 sets counted without their largest
    member, derated by the headroom) and of the feeds those PSUs hang on (NetBox's available power, which
    already holds the feed's maximum utilisation; redundant A/B feeds counted without the largest)."""
    headroom = default_headroom_pct() if headroom_pct is None else headroom_pct
    per_node: dict[tuple[int, int], list[tuple[float, bool]]] = defaultdict(list)
    feeds: dict[int, dict[int, PowerFeed]] = defaultdict(dict)
    feed_redundant: dict[int, bool] = defaultdict(lambda: True)
    rows = PSU.objects.filter(node__cluster_id__in=list(cluster_ids)).select_related("feed", "node")
    for psu in rows:
        assert psu.node is not None
        cid = psu.node.cluster_id or 0
        per_node[(cid, psu.node_id or 0)].append((float(psu.capacity_w), psu.redundant))
        if psu.feed is not None:
            feeds[cid][psu.feed.pk] = psu.feed
            feed_redundant[cid] = feed_redundant[cid] and psu.redundant
    psu_w: dict[int, float] = defaultdict(float)
    for (cid, _node), items in per_node.items():
        total = _redundant_total([c for c, _r in items], all(r for _c, r in items))
        psu_w[cid] += total * (100 - headroom) / 100
    out: dict[int, PowerLimit] = {}
    for cid in {c for c, _n in per_node}:
        feed_caps = [float(f.available_power_w) for f in feeds[cid].values()]
        feed_w = _redundant_total(feed_caps, feed_redundant[cid]) if feed_caps else None
        out[cid] = PowerLimit(feed_w=feed_w, psu_w=psu_w[cid])
    return out
