"""Power budgets at, under and over the limit, three-phase feeds, leads, redundancy, measured draw, what-if."""

from __future__ import annotations

import math
from typing import Any

import pytest

from inventory import power
from inventory.choices import LeadKind
from tests.text import page_text

pytestmark = pytest.mark.django_db


def rig(
    build: Any,
    *,
    cards: int,
    tdp: int = 300,
    capacity: int = 1600,
    base: int = 60,
    leads_per_card: int = 2,
    feed: Any = None,
) -> tuple[Any, Any, list]:
    """A mining rig: `cards` cards, each on its own 8-pin leads, and an ATX lead to the host."""
    node = build.node(chassis=build.chassis(base_power_w=base, card_slots=4, pcie_lanes_per_slot=1))
    model = build.card_model(tdp_w=tdp, power_connector=LeadKind.HPWR_12V)
    psu = build.psu(node=node, capacity_w=capacity, efficiency_pct=90, feed=feed)
    made = []
    for i in range(cards):
        card = build.card(node=node, card_model=model, slot=str(i))
        for j in range(leads_per_card):
            build.lead(psu=psu, name=f"8pin-{i}-{j}", kind=LeadKind.PCIE_8PIN, card=card)
        made.append(card)
    build.lead(psu=psu, name="ATX", kind=LeadKind.ATX, node=node)
    return node, power.psu_queryset().get(pk=psu.pk), made


def test_under_the_headroom_passes(build: Any) -> None:
    _node, psu, _cards = rig(build, cards=3)
    b = power.psu_budget(psu)
    assert (b.load_w, b.usable_w, b.margin_w, b.status) == (960.0, 1280.0, 320.0, "pass")


def test_exactly_at_the_usable_limit_passes(build: Any) -> None:
    _node, psu, _cards = rig(build, cards=4, base=80)  # 4 × 300 + 80 = 1280 = 1600 × 80%
    b = power.psu_budget(psu)
    assert (b.load_w, b.margin_w, b.status) == (1280.0, 0.0, "pass")


def test_into_the_headroom_warns_and_over_capacity_fails(build: Any) -> None:
    _n, warm, _c = rig(build, cards=4, base=200)  # 1400 W: above 1280 usable, below 1600
    _n, hot, _c = rig(build, cards=4, tdp=450, leads_per_card=3)  # 1860 W > 1600 W
    assert power.psu_budget(warm).status == "warn"
    assert power.psu_budget(hot).status == "fail"
    assert power.psu_budget(warm, headroom_pct=10).status == "pass"  # 1440 W usable


def test_lead_over_its_rating_and_a_card_short_of_leads_fail(build: Any) -> None:
    _node, psu, _cards = rig(build, cards=1, leads_per_card=1)  # one 150 W 8-pin for a 300 W card
    b = power.psu_budget(psu)
    assert b.status == "fail"
    assert [ld.load_w for ld in b.leads if ld.kind == "pcie-8pin"] == [300.0]
    assert [m for _s, m in b.findings] == [
        "Lead 8pin-0-0 carries 300 W, over its 150 W rating.",
        f"{_cards[0]}: its 1 lead(s) are rated 150 W for a 300 W card.",
    ]


def test_redundant_pair_each_carries_the_whole_load(build: Any) -> None:
    node = build.node(chassis=build.chassis(base_power_w=900))
    psus = [build.psu(node=node, name=f"PSU{i}", capacity_w=1100, redundant=True) for i in (1, 2)]
    for p in psus:
        build.lead(psu=p, name="C13", kind=LeadKind.C13, node=node)
    budgets = power.psu_budgets(list(power.psu_queryset().filter(node=node)))
    assert [(b.load_w, b.status) for b in budgets] == [(900.0, "warn"), (900.0, "warn")]  # 880 W usable each


def test_three_phase_feed_budget(build: Any) -> None:
    feed = build.feed(voltage=400, amperage=16, phase="three", max_utilization_pct=80)
    _node, _psu, _cards = rig(build, cards=4, feed=feed)
    [b] = power.feed_budgets([feed])
    assert b.capacity_w == int(400 * 16 * 0.8 * math.sqrt(3)) == 8868
    assert b.load_w == 1400.0  # (4 × 300 + 60) / 90% efficiency at the wall
    assert b.status == "pass"


def test_single_phase_feed_over_its_limit(build: Any) -> None:
    feed = build.feed(voltage=230, amperage=10, phase="single", max_utilization_pct=80)  # 1840 W
    rig(build, cards=4, feed=feed)
    rig(build, cards=2, feed=feed)
    [b] = power.feed_budgets([feed])
    assert (b.load_w, b.status) == (2133.3, "fail")


def test_measured_draw_slots_in_beside_the_budget(build: Any) -> None:
    node, psu, cards = rig(build, cards=2)
    b = power.psu_budget(psu, measured_w={("card", cards[0].pk): 212.0, ("node", node.pk): 41.0})
    assert b.load_w == 660.0
    assert b.measured_w == 253.0
    assert power.psu_budget(psu).measured_w is None


def test_what_if_api(api: Any, build: Any) -> None:
    node, _psu, _cards = rig(build, cards=3)
    model = build.card_model(tdp_w=300)
    ok = api.get(f"/api/inventory/nodes/{node.pk}/what-if/", {"card_model": model.pk, "count": 1}).json()
    assert (ok["status"], ok["holds"], ok["psus"][0]["load_w"]) == (
        "pass",
        True,
        1260.0,
    )  # 3 × 300 + 60 + 300 new, within 1280 W
    too_many = api.get(
        f"/api/inventory/nodes/{node.pk}/what-if/", {"card_model": model.pk, "count": 2}
    ).json()
    assert too_many["holds"] is False
    assert (
        too_many["findings"][0]["message"]
        == "The chassis has 4 card slots and 3 are used: 2 more do not fit."
    )
    bad = api.get(f"/api/inventory/nodes/{node.pk}/what-if/", {"card_model": model.pk, "count": 0})
    assert bad.status_code == 400 and "count" in bad.json()


def test_budget_endpoints_and_pages(api: Any, client: Any, admin_user: Any, build: Any) -> None:
    feed = build.feed()
    node, psu, _cards = rig(build, cards=2, feed=feed)
    body = api.get(f"/api/inventory/psus/{psu.pk}/budget/").json()
    assert (body["load_w"], body["usable_w"], body["status"], body["measured_w"]) == (
        660.0,
        1280.0,
        "pass",
        None,
    )
    assert api.get(f"/api/inventory/psus/{psu.pk}/budget/", {"headroom": "150"}).status_code == 400
    assert api.get(f"/api/inventory/power-feeds/{feed.pk}/budget/").json()["scope"] == "feed"
    assert len(api.get(f"/api/inventory/nodes/{node.pk}/power/").json()["psus"]) == 1
    client.force_login(admin_user)
    pages = []
    for url in (
        f"/inventory/psus/{psu.pk}/budget/",
        f"/inventory/power-feeds/{feed.pk}/budget/",
        f"/inventory/nodes/{node.pk}/power/?card_model={_cards[0].card_model_id}&count=1",
    ):
        page = client.get(url)
        assert page.status_code == 200, url
        pages.append(page_text(page))
    budget, feed_page, what_if = pages
    psu_text = (
        f"PSU {node.hostname} {psu.name} Pass Capacity 1.6 kW · 20% headroom Usable 1.28 kW "
        "Nameplate load 660 W (41.2% of capacity; margin 620 W) Wall draw 733 W"
    )
    feed_text = f"Feed {feed.name} Pass Capacity 2.94 kW Usable 2.94 kW Nameplate load 733 W (24.9% of capacity; margin 2.21 kW)"
    assert budget.startswith(f"Power budget: {psu.name} {psu_text}") and feed_text in budget
    assert feed_page.startswith(f"Power budget: {feed.name} {psu_text}") and feed_text in feed_page
    # the what-if adds one more 300 W card: 960 W on the PSU, still within its 1280 W
    assert what_if.startswith(f"Power: {node.hostname}")
    assert (
        "Check The PSUs and feeds still hold. "
        f"PSU {node.hostname} {psu.name} Pass Capacity 1.6 kW · 20% headroom Usable 1.28 kW "
        "Nameplate load 960 W (60.0% of capacity; margin 320 W)"
    ) in what_if


def test_budget_needs_the_view_permission(api_as: Any, make_user: Any, build: Any) -> None:
    _node, psu, _cards = rig(build, cards=1)
    nobody = make_user("nobody")
    assert api_as(nobody).get(f"/api/inventory/psus/{psu.pk}/budget/").status_code == 403
