"""The fabric drawing scales to its members and names the port at both ends of every cable."""

from __future__ import annotations

import re

from inventory.topology.check import CableInfo, FabricData, MemberInfo, PortInfo, check
from inventory.topology.svg import COLOURS, LABEL_LIMIT, render


def _star(hosts: int, rails: int) -> FabricData:
    """A leaf switch with ``rails`` cables to each of ``hosts`` hosts (ib0.. on the hosts, p1.. on the switch)."""
    ids = iter(range(1, 100_000))
    switch = MemberInfo(
        "sw",
        "switch",
        tuple(PortInfo(next(ids), "sw", f"p{i + 1}", "osfp", 400) for i in range(hosts * rails)),
    )
    members = [switch]
    cables = []
    for h in range(hosts):
        label = f"gpu{h + 1:02d}"
        ports = tuple(PortInfo(next(ids), label, f"ib{i}", "osfp", 400) for i in range(rails))
        members.append(MemberInfo(label, "host", ports))
        for i, port in enumerate(ports):
            cables.append(CableInfo(len(cables) + 1, port.id, switch.ports[h * rails + i].id))
    return FabricData("star", {"host_links": rails}, tuple(members), tuple(cables))


def _boxes(svg: str) -> list[tuple[float, float, float, float]]:
    return [
        tuple(map(float, m))
        for m in re.findall(r'<rect x="([-\d.]+)" y="([-\d.]+)" width="([\d.]+)" height="([\d.]+)"', svg)
    ]  # type: ignore[misc]


def _size(svg: str) -> tuple[float, float]:
    found = re.search(r'width="(\d+)" height="(\d+)" aria-label', svg)
    assert found
    return float(found[1]), float(found[2])


def test_both_ends_of_a_cable_are_named_by_their_ports() -> None:
    members = tuple(
        MemberInfo(x, "card", (PortInfo(i, x, name, "qsfp-dd", 800),), display=f"rig01/{x}")
        for i, x, name in ((1, "A", "QSFP1"), (2, "B", "QSFP2"))
    )
    data = FabricData("bh-1x2", {}, members, (CableInfo(9, 1, 2, "connected", label="rig-qsfp1"),))

    svg = render(data, check(data), {})

    assert re.findall(r'class="port-label"[^>]*>([^<]+)<', svg) == ["QSFP1", "QSFP2"]
    assert "<title>rig-qsfp1: A QSFP1 – B QSFP2, " in svg
    assert ">rig01/A</text>" in svg and "<title>A · rig01/A</title>" in svg


def test_parallel_rails_leave_their_own_ports_and_no_boxes_overlap() -> None:
    data = _star(hosts=4, rails=8)

    svg = render(data, check(data), {})

    starts = set(re.findall(r'<line x1="([-\d.]+)" y1="([-\d.]+)" x2="([-\d.]+)" y2="([-\d.]+)"', svg))
    assert len(starts) == 32  # 32 distinct lines, none drawn over another
    assert len({(x2, y2) for _x1, _y1, x2, y2 in starts}) == 32  # 32 distinct ports on the switch
    names = re.findall(r'class="port-label"[^>]*>([^<]+)<', svg)
    assert sorted(names) == sorted([f"p{i + 1}" for i in range(32)] + [f"ib{i}" for i in range(8)] * 4)
    boxes = _boxes(svg)
    for i, (x, y, w, h) in enumerate(boxes):
        for x2, y2, w2, h2 in boxes[i + 1 :]:
            assert x + w <= x2 or x2 + w2 <= x or y + h <= y2 or y2 + h2 <= y, "boxes overlap"


def test_the_drawing_grows_with_its_members_and_turns_to_dots_past_the_limit() -> None:
    small, large = _star(hosts=2, rails=1), _star(hosts=8, rails=4)
    w_small, _h = _size(render(small, check(small), {}))
    w_large, _h = _size(render(large, check(large), {}))
    assert w_small < 500 < w_large

    many = _star(hosts=LABEL_LIMIT + 4, rails=1)
    svg = render(many, check(many), {})
    assert "port-label" not in svg and svg.count("<circle") == LABEL_LIMIT + 5


def test_a_link_that_is_down_is_red_even_on_a_cable_the_template_does_not_have() -> None:
    members = tuple(
        MemberInfo(x, "card", tuple(PortInfo(i * 10 + p, x, f"QSFP{p}", "qsfp-dd", 800) for p in (1, 3)))
        for i, x in ((1, "A"), (2, "B"))
    )
    data = FabricData("bh-1x2", {}, members, (CableInfo(1, 11, 21), CableInfo(3, 13, 23)))
    result = check(data)
    assert result.link_state[3] == "extra"

    up, down = (render(data, result, {13: True, 23: v}) for v in (True, False))

    def colour(svg: str) -> str:
        found = re.search(
            r'stroke="(#\w+)" stroke-width="2" class="link link-\w+ cable-connected" data-cable="3"', svg
        )
        assert found, svg
        return found[1]

    assert (colour(up), colour(down)) == (COLOURS["extra"], COLOURS["down"])


def test_a_star_of_32_hosts_wraps_its_hosts_onto_lines_that_fit_the_page() -> None:
    from inventory.topology.svg import MAX_ROW_W

    data = _star(hosts=32, rails=1)

    svg = render(data, check(data), {})

    boxes = _boxes(svg)
    rows = {y for _x, y, _w, _h in boxes}
    assert len(rows) >= 4  # the switch and three or more lines of hosts
    assert max(x + w for x, _y, w, _h in boxes) - min(x for x, _y, _w, _h in boxes) <= MAX_ROW_W
    assert len(re.findall(r'class="port-label"', svg)) == 64  # p1..p32 on the switch, ib0 on each host
