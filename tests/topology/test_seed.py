"""The seed_demo clusters: the rig's mesh and the pod's InfiniBand star check clean; budgets and readiness."""

from __future__ import annotations

from typing import Any

import pytest

from inventory import power
from inventory.models import PSU, Fabric, Node, ReadinessCheck
from inventory.readiness import node_readiness, with_readiness
from inventory.seed import seed_demo
from inventory.topology.data import fabric_check

pytestmark = pytest.mark.django_db


@pytest.fixture
def seeded() -> Any:
    seed_demo()


def test_rig_mesh_checks_clean(seeded: Any) -> None:
    # given the seeded rig-01 mesh / when checked
    data, result = fabric_check(Fabric.objects.get(name="rig-01-mesh"))
    # then nothing is wrong and every pair is one hop apart
    assert result.findings == []
    assert result.cables == 6 and result.expected_links == 6
    assert result.max_hops == 1 and result.promised_max_hops == 1
    assert result.hop_matrix == [[0, 1, 1, 1], [1, 0, 1, 1], [1, 1, 0, 1], [1, 1, 1, 0]]
    assert [m.display for m in data.members] == ["rig01/A", "rig01/B", "rig01/C", "rig01/D"]


def test_pod_infiniband_star_checks_clean(seeded: Any) -> None:
    _data, result = fabric_check(Fabric.objects.get(name="h100-pod-ib"))
    assert result.findings == []
    # eight compute rails per DGX H100, one link each for the login and storage nodes
    assert result.cables == 4 * 8 + 2 and result.expected_links == 34
    assert result.max_hops == 2 and result.promised_max_hops == 2


def test_pod_star_finds_a_missing_rail(seeded: Any) -> None:
    # given one of gpu03's eight compute cables removed
    from inventory.models import Cable

    Cable.objects.get(label="gpu03-ib5").delete()
    # when checked / then the star misses exactly one link of gpu03
    _data, result = fabric_check(Fabric.objects.get(name="h100-pod-ib"))
    assert [(f.kind, f.severity) for f in result.findings] == [("missing_link", "fail")]
    assert "gpu03" in result.findings[0].message


def test_dgx_h100_ports_are_as_shipped(seeded: Any) -> None:
    from inventory.models import Port

    names = sorted(Port.objects.filter(node__hostname="gpu02", card=None).values_list("name", "speed_gbps"))
    assert names == sorted(
        [(f"ib{k}", 400) for k in range(8)]
        + [(f"storage{k}", 400) for k in range(4)]
        + [("bmc", 1), ("mgmt0", 10)]
    )
    cabled = Port.objects.filter(node__hostname="gpu02", card=None, termination__isnull=False)
    assert sorted(cabled.values_list("name", flat=True)) == [f"ib{k}" for k in range(8)]


def test_gb10_is_modelled_with_unified_lpddr5x(seeded: Any) -> None:
    from inventory.models import CardModel

    gb10 = CardModel.objects.get(vendor="NVIDIA", name="GB10")
    assert (gb10.memory_gb, gb10.memory_type) == (128, "LPDDR5X")


def test_cluster_power_limit_is_the_one_that_binds(seeded: Any) -> None:
    from inventory.models import Cluster

    ids = dict(Cluster.objects.values_list("name", "pk"))
    limits = power.cluster_power_limits(ids.values())
    pod = limits[ids["h100-pod"]]
    # two 400 V / 63 A three-phase feeds at 80 %: 34,918 W each, A/B redundant, so one must carry it all;
    # the PSUs (N+1 per node, 20 % headroom) could give 56,640 W: the feed binds
    assert (pod.feed_w, pod.psu_w, pod.limit_w, pod.bound_by) == (34918.0, 56640.0, 34918.0, "feed")
    rig = limits[ids["rig-01"]]
    # the rig's 1600 W supply (1,280 W usable) and the head's redundant pair bind before the 16 A feed
    assert (rig.feed_w, rig.limit_w, rig.bound_by) == (2944.0, 1880.0, "psu")


def test_seed_is_idempotent_for_fabrics_and_readiness(seeded: Any) -> None:
    seed_demo()
    assert Fabric.objects.count() == 2
    assert ReadinessCheck.objects.filter(node__hostname="rig01").count() == 9  # 5 manual + 4 derived


def test_rig_power_budget_holds_four_cards_but_not_a_fifth(seeded: Any) -> None:
    rig = Node.objects.select_related("chassis").get(hostname="rig01")
    psu = power.psu_queryset().get(node=rig)
    budget = power.psu_budget(psu)
    # 4 × 300 W cards + 60 W host on a 1600 W supply with 20% headroom (1280 W usable)
    assert (budget.load_w, budget.usable_w, budget.status) == (1260.0, 1280.0, "pass")
    assert {ld.load_w for ld in budget.leads if ld.kind == "pcie-8pin"} == {150.0}
    from inventory.models import CardModel

    what_if = power.power_what_if(rig, CardModel.objects.get(name="Blackhole p150a"), 1)
    assert what_if.status == "fail"  # the S9 chassis has 4 slots, all used
    assert what_if.psus[0].load_w == 1560.0 and what_if.psus[0].status == "warn"


def test_pod_budgets_pass(seeded: Any) -> None:
    psus = list(power.psu_queryset().filter(node__hostname="gpu01"))
    budgets = power.psu_budgets(psus)
    # 4600 W host + 8 × 700 W over 6 redundant PSUs, N+1: each carries 1/5
    assert {b.load_w for b in budgets} == {2040.0}
    assert {b.status for b in budgets} == {"pass"}
    feeds = power.feed_budgets(list({p.feed for p in PSU.objects.filter(node__cluster__name="h100-pod")}))
    assert {b.status for b in feeds} == {"pass"}


def test_rig_readiness_is_a_warning_for_the_x1_risers(seeded: Any) -> None:
    rig = with_readiness(Node.objects.filter(hostname="rig01")).get()
    assert node_readiness(rig) == "warn"
    width = ReadinessCheck.objects.get(node=rig, key="pcie_link_width")
    assert width.status == "warn" and width.source == "auto"
    assert "x1 of x16" in width.detail
    assert ReadinessCheck.objects.get(node=rig, key="cooling").status == "pass"


@pytest.mark.parametrize("links", [0, "8", {"gpu01": 0}, {"gpu01": True}])
def test_fabric_refuses_host_links_that_are_not_positive_counts(links: Any) -> None:
    from django.core.exceptions import ValidationError

    fabric = Fabric(name="f", template="star", params={"host_links": links})
    with pytest.raises(ValidationError) as err:
        fabric.clean()
    assert "host_links" in str(err.value.message_dict["params"])
