"""The pure check: every template clean when cabled right, and each way of breaking a fabric reported."""

from __future__ import annotations

import itertools
from dataclasses import replace

import networkx as nx
import pytest

from inventory.topology.check import CableInfo, FabricData, MemberInfo, PortInfo, check
from inventory.topology.plan import plan, plan_as_cables
from inventory.topology.templates import GUIDE_MESH4

_ids = itertools.count(1)


def cards(
    n: int, ports: int = 4, labels: str | list[str] | None = None, speed: int = 800
) -> tuple[MemberInfo, ...]:
    names = list(labels) if labels else [f"C{i}" for i in range(n)]
    return tuple(
        MemberInfo(
            lab,
            "card",
            tuple(PortInfo(next(_ids), lab, f"QSFP{k}", "qsfp-dd", speed) for k in range(1, ports + 1)),
        )
        for lab in names[:n]
    )


def port(members: tuple[MemberInfo, ...], ref: str) -> PortInfo:
    label, name = ref.split(".")
    found = next(m for m in members if m.label == label).port(name)
    assert found is not None
    return found


def cable(members: tuple[MemberInfo, ...], a: str, b: str, cid: int, status: str = "connected") -> CableInfo:
    return CableInfo(cid, port(members, a).id, port(members, b).id, status)


def guide_mesh() -> tuple[tuple[MemberInfo, ...], list[CableInfo]]:
    ms = cards(4, labels="ABCD")
    return ms, [cable(ms, f"{a}.{ap}", f"{b}.{bp}", i + 1) for i, (a, ap, b, bp) in enumerate(GUIDE_MESH4)]


def kinds(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [f.kind for f in result.findings]


TEMPLATE_CASES = [
    ("mesh4", 4, {}),
    ("bh-1x2", 2, {}),
    ("bh-2x2", 4, {}),
    ("bh-2x4", 8, {}),
    ("bh-2x4", 12, {"rows": 3, "cols": 4}),
    ("ring", 5, {}),
    ("ring", 6, {"lanes": 2}),
]


@pytest.mark.parametrize(("template", "n", "params"), TEMPLATE_CASES)
def test_every_template_planned_then_checked_is_clean(template: str, n: int, params: dict) -> None:
    # given a fabric of bare cards / when planned and the plan is cabled
    ms = cards(n)
    result_plan = plan(FabricData(template, params, ms, ()))
    assert result_plan.ok
    result = check(FabricData(template, params, ms, tuple(plan_as_cables(result_plan))))
    # then the check finds nothing and the promise holds
    assert result.findings == []
    assert result.max_hops == result.promised_max_hops


def test_template_cable_counts_match_tenstorrent_and_the_guide() -> None:
    counts = {t: len(plan(FabricData(t, {}, cards(n), ())).links) for t, n, _p in TEMPLATE_CASES[:4]}
    assert counts == {"mesh4": 6, "bh-1x2": 1, "bh-2x2": 8, "bh-2x4": 10}


def test_mesh4_plan_is_the_guides_exact_port_map() -> None:
    ms = cards(4, labels="ABCD")
    links = plan(FabricData("mesh4", {}, ms, ())).links
    assert [(ln.a.ref, ln.b.ref) for ln in links] == [
        ("A.QSFP1", "B.QSFP1"),
        ("A.QSFP2", "C.QSFP1"),
        ("B.QSFP2", "D.QSFP1"),
        ("C.QSFP2", "D.QSFP2"),
        ("A.QSFP3", "D.QSFP3"),
        ("B.QSFP3", "C.QSFP3"),
    ]


def test_guide_mesh_checks_clean_with_all_pairs_one_hop() -> None:
    ms, cables = guide_mesh()
    result = check(FabricData("mesh4", {}, ms, tuple(cables)))
    assert result.findings == []
    assert result.hop_matrix == [[0, 1, 1, 1], [1, 0, 1, 1], [1, 1, 0, 1], [1, 1, 1, 0]]


def test_missing_link_names_the_ports_and_the_fix() -> None:
    ms, cables = guide_mesh()
    result = check(FabricData("mesh4", {}, ms, tuple(cables[:-1])))  # B3-C3 absent
    assert kinds(result) == ["missing_link", "max_hops"]
    missing = result.findings[0]
    assert missing.ports == ("B.QSFP3", "C.QSFP3")
    assert missing.suggestion == "Connect B.QSFP3 to C.QSFP3."
    assert result.max_hops == 2 and result.hop_matrix[1][2] == 2


def test_extra_link_is_a_warning() -> None:
    ms, cables = guide_mesh()
    result = check(FabricData("mesh4", {}, ms, (*cables, cable(ms, "A.QSFP4", "B.QSFP4", 99))))
    assert kinds(result) == ["extra_link"]
    assert result.findings[0].severity == "warn"
    assert result.findings[0].ports == ("A.QSFP4", "B.QSFP4")
    assert result.findings[0].cables == (99,)


def test_cable_on_the_wrong_port_says_which_end_to_move() -> None:
    ms, cables = guide_mesh()
    cables[0] = cable(ms, "A.QSFP4", "B.QSFP1", 1)  # should be A.QSFP1
    result = check(FabricData("mesh4", {}, ms, tuple(cables)))
    assert kinds(result) == ["wrong_port"]
    assert result.findings[0].suggestion == "Move the A end from QSFP4 to QSFP1."
    assert result.link_state[1] == "wrong"


def test_port_used_twice() -> None:
    ms, cables = guide_mesh()
    result = check(FabricData("mesh4", {}, ms, (*cables, cable(ms, "A.QSFP1", "C.QSFP4", 42))))
    assert kinds(result)[0] == "port_reused"
    assert result.findings[0].ports == ("A.QSFP1",)
    assert set(result.findings[0].cables) == {1, 42}


def test_speed_and_kind_mismatch_between_ends() -> None:
    ms, cables = guide_mesh()
    b = ms[1]
    slow = replace(b, ports=tuple(replace(p, speed_gbps=400) if p.name == "QSFP1" else p for p in b.ports))
    c = ms[2]
    odd = replace(c, ports=tuple(replace(p, kind="osfp") if p.name == "QSFP3" else p for p in c.ports))
    result = check(FabricData("mesh4", {}, (ms[0], slow, odd, ms[3]), tuple(cables)))
    assert kinds(result) == ["speed_mismatch", "kind_mismatch"]
    assert result.findings[0].message.endswith("it runs at 400G.")
    assert result.findings[0].severity == "warn" and result.findings[1].severity == "fail"


def test_unreachable_card_and_broken_hop_promise() -> None:
    ms = cards(5)
    links = plan(FabricData("ring", {}, ms, ())).links
    cut = [
        c
        for c in plan_as_cables(plan(FabricData("ring", {}, ms, ())))
        if ms[2].label not in (port_label(ms, c.a), port_label(ms, c.b))
    ]
    result = check(FabricData("ring", {}, ms, tuple(cut)))
    assert len(links) == 5
    assert kinds(result).count("missing_link") == 2
    assert [f.members for f in result.findings if f.kind == "unreachable"] == [("C2",)]
    assert result.max_hops == 3 and "max_hops" in kinds(result)  # C3..C1 the long way round


def port_label(ms: tuple[MemberInfo, ...], pid: int) -> str:
    return next(m.label for m in ms for p in m.ports if p.id == pid)


def test_faulty_cable_is_reported_and_not_counted_as_a_link() -> None:
    ms, cables = guide_mesh()
    cables[0] = replace(cables[0], status="faulty")
    result = check(FabricData("mesh4", {}, ms, tuple(cables)))
    assert kinds(result) == ["faulty_link", "max_hops"]
    assert result.hop_matrix[0][1] == 2


def test_cable_leaving_the_fabric() -> None:
    ms, cables = guide_mesh()
    outside = CableInfo(77, port(ms, "D.QSFP4").id, 10_000)
    result = check(FabricData("mesh4", {}, ms, (*cables, outside), {10_000: "rig02/A QSFP1"}))
    assert kinds(result) == ["leaves_fabric"]
    assert result.findings[0].ports == ("D.QSFP4", "rig02/A QSFP1")


def test_wrong_member_count_and_missing_ports() -> None:
    result = check(FabricData("mesh4", {}, cards(3), ()))
    assert kinds(result)[0] == "members"
    two_port = cards(4, ports=2, labels="ABCD")
    result = check(FabricData("mesh4", {}, two_port, ()))
    assert sorted({f.ports for f in result.findings if f.kind == "port_missing"}) == [
        ("A.QSFP3",),
        ("B.QSFP3",),
        ("C.QSFP3",),
        ("D.QSFP3",),
    ]
    assert plan(FabricData("mesh4", {}, two_port, ())).ok is False


def star(
    hosts: int,
    leaves: int = 1,
    spines: int = 0,
    host_ports: int = 1,
    switch_ports: int = 16,
    speed: int = 400,
) -> tuple[MemberInfo, ...]:
    out = []
    for role, prefix, count, nports in (
        ("switch", "leaf", leaves, switch_ports),
        ("spine", "spine", spines, switch_ports),
        ("host", "h", hosts, host_ports),
    ):
        for i in range(count):
            lab = f"{prefix}{i}"
            out.append(
                MemberInfo(
                    lab,
                    role,
                    tuple(
                        PortInfo(next(_ids), lab, f"p{k}", "infiniband", speed) for k in range(1, nports + 1)
                    ),
                )
            )
    return tuple(out)


def test_star_planned_is_clean_and_a_missing_host_link_is_reported() -> None:
    ms = star(4)
    cables = plan_as_cables(plan(FabricData("star", {}, ms, ())))
    assert check(FabricData("star", {}, ms, tuple(cables))).findings == []
    result = check(FabricData("star", {}, ms, tuple(cables[1:])))
    assert kinds(result) == ["missing_link", "unreachable"]
    assert result.findings[0].members == ("h0", "leaf0")


def test_leaf_spine_oversubscription_ratio() -> None:
    ms = star(hosts=8, leaves=2, spines=1)
    cables = plan_as_cables(plan(FabricData("star", {"oversubscription": 2}, ms, ())))
    result = check(FabricData("star", {"oversubscription": 2}, ms, tuple(cables)))
    # 4 hosts × 400G down, 1 × 400G up per leaf: 4:1, above the allowed 2:1
    assert result.oversubscription == {"leaf0": 4.0, "leaf1": 4.0}
    assert kinds(result) == ["oversubscribed", "oversubscribed"]
    assert result.max_hops == 4 == result.promised_max_hops
    wider = plan_as_cables(plan(FabricData("star", {"oversubscription": 2, "uplinks": 2}, ms, ())))
    assert check(FabricData("star", {"oversubscription": 2, "uplinks": 2}, ms, tuple(wider))).findings == []


@pytest.mark.parametrize(
    ("template", "n", "params"),
    [("ring", n, {}) for n in (3, 4, 7, 10)]
    + [("bh-2x4", 6, {"rows": 2, "cols": 3}), ("bh-2x4", 20, {"rows": 4, "cols": 5})],
)
def test_promised_hops_equal_the_graph_diameter(template: str, n: int, params: dict) -> None:
    ms = cards(n)
    result = check(
        FabricData(template, params, ms, tuple(plan_as_cables(plan(FabricData(template, params, ms, ())))))
    )
    graph = nx.Graph(
        [
            (port_label(ms, c.a), port_label(ms, c.b))
            for c in plan_as_cables(plan(FabricData(template, params, ms, ())))
        ]
    )
    assert result.promised_max_hops == nx.diameter(graph) == result.max_hops


def test_large_fabric_skips_the_matrix_but_keeps_an_exact_largest_hop_count() -> None:
    ms = cards(512)
    cables = plan_as_cables(plan(FabricData("ring", {}, ms, ())))
    clean = check(FabricData("ring", {}, ms, tuple(cables)))
    assert (clean.hop_matrix, clean.max_hops, clean.findings) == (None, 256, [])
    broken = check(FabricData("ring", {}, ms, tuple(cables[1:])))
    assert broken.max_hops == 511 and kinds(broken) == ["missing_link", "max_hops"]
