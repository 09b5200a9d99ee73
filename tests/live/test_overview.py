"""The overview's aggregates: power per cluster (node sensor else card sum), hottest cards per cluster."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def _cluster_with_cards(name: str, temperatures: list[float]) -> tuple[Any, list[Any]]:
    from inventory.models import Card, CardModel, Cluster, Node

    cluster = Cluster.objects.create(name=name)
    model, _ = CardModel.objects.get_or_create(vendor="NVIDIA", name="H100", defaults={"tdp_w": 700})
    node = Node.objects.create(hostname=f"{name}-n1", cluster=cluster)
    cards = [
        Card.objects.create(node=node, card_model=model, slot=str(i), gpu_uuid=f"GPU-{name}-{i:04d}")
        for i in range(len(temperatures))
    ]
    return cluster, cards


def _ingest(samples: list[dict[str, Any]]) -> None:
    from monitoring.services import telemetry_ingest_samples

    telemetry_ingest_samples(samples)


def test_each_cluster_gets_its_own_hottest_cards_even_when_another_is_hotter() -> None:
    from monitoring.overview import HOTTEST, cluster_overview_list

    hot, hot_cards = _cluster_with_cards("hot", [90.0 - i for i in range(HOTTEST * 5)])
    cool, cool_cards = _cluster_with_cards("cool", [40.0, 45.0])
    _ingest(
        [
            {"node": c.node.hostname, "card": c.gpu_uuid, "metric": "temperature_c", "value": 90.0 - i}
            for i, c in enumerate(hot_cards)
        ]
        + [
            {"node": c.node.hostname, "card": c.gpu_uuid, "metric": "temperature_c", "value": v}
            for c, v in zip(cool_cards, (40.0, 45.0), strict=True)
        ]
    )

    by_name = {o.cluster.name: o for o in cluster_overview_list()}

    assert [h.value for h in by_name["hot"].hottest] == [90.0, 89.0, 88.0, 87.0, 86.0]
    assert [h.label for h in by_name["cool"].hottest] == ["cool-n1/1", "cool-n1/0"]
    assert [h.level for h in by_name["hot"].hottest][:1] == ["critical"]


def test_power_is_the_node_sensor_where_reported_else_the_sum_of_its_cards() -> None:
    from inventory.models import Node
    from monitoring.overview import cluster_overview_list

    cluster, cards = _cluster_with_cards("pw", [50.0, 50.0])
    Node.objects.create(hostname="pw-n2", cluster=cluster)
    _ingest(
        [{"node": "pw-n1", "card": c.gpu_uuid, "metric": "power_w", "value": 300.0} for c in cards]
        + [
            {"node": "pw-n2", "metric": "node_power_w", "value": 800.0},
            {"node": "pw-n2", "card": "GPU-unknown-0", "metric": "power_w", "value": 999.0},
        ]
    )

    (overview,) = cluster_overview_list(cluster_ids=[cluster.pk])

    assert overview.power_w == 600.0 + 800.0
    assert overview.telemetry_at is not None


def test_stale_values_count_neither_as_hottest_nor_as_power() -> None:
    import datetime as dt

    from django.utils import timezone

    from monitoring.overview import cluster_overview_list

    cluster, (fresh, stale) = _cluster_with_cards("st", [60.0, 99.0])
    old = (timezone.now() - dt.timedelta(hours=1)).isoformat()
    _ingest(
        [
            {"node": "st-n1", "card": fresh.gpu_uuid, "metric": "temperature_c", "value": 60.0},
            {"node": "st-n1", "card": fresh.gpu_uuid, "metric": "power_w", "value": 200.0},
            {"node": "st-n1", "card": stale.gpu_uuid, "metric": "temperature_c", "value": 99.0, "ts": old},
            {"node": "st-n1", "card": stale.gpu_uuid, "metric": "power_w", "value": 700.0, "ts": old},
        ]
    )

    (overview,) = cluster_overview_list(cluster_ids=[cluster.pk])

    assert [(h.label, h.value) for h in overview.hottest] == [("st-n1/0", 60.0)]
    assert overview.power_w == 200.0


def test_power_is_compared_with_the_feed_when_the_feed_binds() -> None:
    # given the demo pod: 88,800 W of PSUs on two redundant 34,918 W feeds
    from inventory.seed import seed_demo
    from monitoring.overview import cluster_overview_list

    seed_demo()
    by_name = {o.cluster.name: o for o in cluster_overview_list(with_alerts=False)}
    pod, rig = by_name["h100-pod"], by_name["rig-01"]
    # then the overview's budget is one feed's capacity, labelled as the feed limit
    assert (pod.power_budget_w, pod.power_bound_by) == (34918.0, "feed")
    assert (rig.power_budget_w, rig.power_bound_by) == (1880.0, "psu")


def test_overview_card_names_the_limit_that_binds(client: Any, admin_user: Any) -> None:
    from inventory.seed import seed_demo

    seed_demo()
    client.force_login(admin_user)
    html = client.get("/").content.decode()
    assert "34.9 kW" in html and "of the feed limit" in html
    assert "88800" not in html


@pytest.mark.parametrize("state", ["down", "down+drain", "idle*", "fail", "not_responding"])
def test_a_node_slurm_marks_down_has_no_hottest_cards(state: str) -> None:
    from monitoring.overview import cluster_overview_list, slurm_unreachable

    cluster, cards = _cluster_with_cards("pod", [57.0, 56.0])
    _ingest(
        [
            {"node": "pod-n1", "card": c.gpu_uuid, "metric": "temperature_c", "value": v}
            for c, v in zip(cards, (57.0, 56.0), strict=True)
        ]
    )
    assert [h.label for h in cluster_overview_list()[0].hottest] == ["pod-n1/0", "pod-n1/1"]

    cards[0].node.__class__.objects.filter(pk=cards[0].node_id).update(slurm_state=state)

    assert slurm_unreachable(state)
    assert cluster_overview_list()[0].hottest == []
    for shown in (
        "drained",
        "mixed",
        "alloc",
        "downloading",
    ):  # ("downloading": not a state; the regex is anchored)
        cards[0].node.__class__.objects.filter(pk=cards[0].node_id).update(slurm_state=shown)
        assert len(cluster_overview_list()[0].hottest) == 2 and not slurm_unreachable(shown)


def test_the_overview_speaks_each_language_of_its_variants() -> None:
    """One summary is read for every variant: what it says about nodes outside Slurm and a stale
    sync is worded by the template, in the variant's language (it was English in every one)."""
    import datetime as dt

    from django.utils import timezone

    from inventory.models import Cluster, Node
    from monitoring.live import overview_html, overview_variant

    cluster = Cluster.objects.create(name="quiet", last_sync_ok_at=timezone.now() - dt.timedelta(hours=2))
    Node.objects.create(hostname="login01", cluster=cluster, slurm_state="")
    Node.objects.create(hostname="gpu01", cluster=cluster, slurm_state="idle")

    html = overview_html([cluster.pk])

    for with_alerts in (True, False):
        en, zh = html[overview_variant(with_alerts, "en")], html[overview_variant(with_alerts, "zh-hans")]
        assert "outside Slurm" in en and "no successful sync since" in en
        assert "不在 Slurm 中" in zh and "以来没有成功同步" in zh
        assert "outside Slurm" not in zh and "no successful sync" not in zh
        for frame in (en, zh):
            assert 'class="nstate nstate-outside-slurm"' in frame and 'class="nstate nstate-idle"' in frame
            assert "is-stale" in frame
