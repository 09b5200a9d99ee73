"""Fabric layout templates: data plus one build function each. No Django here.

A template turns the ordered members of a fabric into a `Layout`: the links it expects (by member label
and port), where each member is drawn, and the hop count it promises. Adding a template is one function
and one `Template(...)` entry in `TEMPLATES`.

Port assignments. The 4-card full mesh is the first field guide's exact map (shared/seeds/000, §3.2).
Tenstorrent documents the validated Blackhole layouts by card count and cable count only (1×2: 1 cable,
ring of four / 2×2: 8 cables, 2×4: 10 cables); the exact port of each cable is not in /work/shared, so the
maps below are OUR ASSUMPTION, written down here and in each template's `assumption` so that a site can
see it and change it:
- 1×2: card 0 QSFP1 ↔ card 1 QSFP1.
- 2×2 ring: cards on a 2×2 grid joined in the ring 0-1-3-2-0, two cables per neighbour pair: the card
  earlier in the ring uses QSFP1/QSFP2 towards the next card, which takes them on QSFP3/QSFP4.
- R×C grid (2×4 validated): east neighbour QSFP1 → its QSFP2 (west); south neighbour QSFP3 → its QSFP4.
- N-card ring: card i's QSFP1 → card i+1's QSFP2 (and, with lanes=2, QSFP3 → QSFP4). Generic cards use
  their ports in natural name order (first, second, third, fourth port).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Member roles, mirrored from inventory.models.fabrics.MemberRole (kept as strings to stay Django-free).
CARD, HOST, SWITCH, SPINE = "card", "host", "switch", "spine"


class TemplateError(ValueError):
    """The members or parameters do not fit the template (wrong count, missing roles)."""


@dataclass(frozen=True)
class MemberSpec:
    label: str
    role: str = CARD
    port_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class PortRef:
    """A port of a member: a name ("QSFP1"), an index into the member's ports in natural order, or None
    for "any free port" (the star's hosts and switches)."""

    member: str
    port: str | int | None = None


@dataclass(frozen=True)
class ExpectedLink:
    a: PortRef
    b: PortRef

    @property
    def flexible(self) -> bool:
        return self.a.port is None or self.b.port is None


@dataclass(frozen=True)
class Layout:
    links: tuple[ExpectedLink, ...]
    promised_max_hops: int
    positions: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    oversubscription_limit: float | None = None


@dataclass(frozen=True)
class Template:
    key: str
    name: str
    build: Callable[[Sequence[MemberSpec], Mapping[str, Any]], Layout]
    members: str  # human description of the members it needs
    assumption: str = ""


def natural_key(name: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p.lower() for p in re.split(r"(\d+)", name))


def _need(members: Sequence[MemberSpec], count: int, what: str) -> None:
    if len(members) != count:
        raise TemplateError(f"{what} needs exactly {count} cards; this fabric has {len(members)}.")


def _link(a: str, ap: str | int, b: str, bp: str | int) -> ExpectedLink:
    return ExpectedLink(PortRef(a, ap), PortRef(b, bp))


# -- the templates --------------------------------------------------------------------------------------

# The first guide's map, by card letter: A1-B1, A2-C1, B2-D1, C2-D2, A3-D3 (diagonal), B3-C3.
GUIDE_MESH4 = (
    ("A", "QSFP1", "B", "QSFP1"),
    ("A", "QSFP2", "C", "QSFP1"),
    ("B", "QSFP2", "D", "QSFP1"),
    ("C", "QSFP2", "D", "QSFP2"),
    ("A", "QSFP3", "D", "QSFP3"),
    ("B", "QSFP3", "C", "QSFP3"),
)


def build_mesh4(members: Sequence[MemberSpec], params: Mapping[str, Any]) -> Layout:
    _need(members, 4, "The 4-card full mesh")
    letter = dict(zip("ABCD", (m.label for m in members), strict=True))
    links = tuple(_link(letter[a], ap, letter[b], bp) for a, ap, b, bp in GUIDE_MESH4)
    positions = {letter[k]: xy for k, xy in zip("ABCD", ((0, 0), (1, 0), (0, 1), (1, 1)), strict=True)}
    return Layout(links, promised_max_hops=1, positions=positions)


def build_bh_1x2(members: Sequence[MemberSpec], params: Mapping[str, Any]) -> Layout:
    _need(members, 2, "The Blackhole 1×2 mesh")
    a, b = (m.label for m in members)
    return Layout((_link(a, "QSFP1", b, "QSFP1"),), promised_max_hops=1, positions={a: (0, 0), b: (1, 0)})


def build_bh_2x2(members: Sequence[MemberSpec], params: Mapping[str, Any]) -> Layout:
    _need(members, 4, "The Blackhole ring of four")
    labels = [m.label for m in members]
    ring = [labels[0], labels[1], labels[3], labels[2]]  # around the 2×2 grid
    links: list[ExpectedLink] = []
    for i, here in enumerate(ring):
        nxt = ring[(i + 1) % 4]
        links += [_link(here, "QSFP1", nxt, "QSFP3"), _link(here, "QSFP2", nxt, "QSFP4")]
    positions = {lab: (i % 2, i // 2) for i, lab in enumerate(labels)}
    return Layout(tuple(links), promised_max_hops=2, positions=positions)


def build_grid(members: Sequence[MemberSpec], params: Mapping[str, Any]) -> Layout:
    rows, cols = int(params.get("rows", 2)), int(params.get("cols", 4))
    if len(members) != rows * cols:
        raise TemplateError(
            f"A {rows}×{cols} mesh needs {rows * cols} cards; this fabric has {len(members)}."
        )
    labels = [m.label for m in members]
    links: list[ExpectedLink] = []
    for r in range(rows):
        for c in range(cols):
            here = labels[r * cols + c]
            if c + 1 < cols:
                links.append(_link(here, "QSFP1", labels[r * cols + c + 1], "QSFP2"))
            if r + 1 < rows:
                links.append(_link(here, "QSFP3", labels[(r + 1) * cols + c], "QSFP4"))
    positions = {lab: (i % cols, i // cols) for i, lab in enumerate(labels)}
    return Layout(tuple(links), promised_max_hops=(rows - 1) + (cols - 1), positions=positions)


def build_ring(members: Sequence[MemberSpec], params: Mapping[str, Any]) -> Layout:
    n, lanes = len(members), int(params.get("lanes", 1))
    if n < 3:
        raise TemplateError(f"A ring needs at least 3 cards; this fabric has {n}.")
    if lanes not in (1, 2):
        raise TemplateError("A ring has 1 or 2 lanes between neighbours.")
    size = params.get("size")
    if size is not None and int(size) != n:
        raise TemplateError(f"The ring is sized for {size} cards; this fabric has {n}.")
    labels = [m.label for m in members]
    links: list[ExpectedLink] = []
    for i, here in enumerate(labels):
        nxt = labels[(i + 1) % n]
        links.append(_link(here, 0, nxt, 1))
        if lanes == 2:
            links.append(_link(here, 2, nxt, 3))
    positions = {
        lab: (math.cos(2 * math.pi * i / n), math.sin(2 * math.pi * i / n)) for i, lab in enumerate(labels)
    }
    return Layout(tuple(links), promised_max_hops=n // 2, positions=positions)


def build_star(members: Sequence[MemberSpec], params: Mapping[str, Any]) -> Layout:
    """Hosts on leaf switches (in blocks, in member order); every leaf to every spine `uplinks` times."""
    hosts = [m.label for m in members if m.role in (HOST, CARD)]
    leaves = [m.label for m in members if m.role == SWITCH]
    spines = [m.label for m in members if m.role == SPINE]
    if not leaves:
        raise TemplateError("A star needs at least one member with the switch role.")
    if len(leaves) > 1 and not spines:
        raise TemplateError("Several leaf switches need at least one spine to join them.")
    uplinks = int(params.get("uplinks", 1))
    links: list[ExpectedLink] = []
    for i, host in enumerate(hosts):
        leaf = leaves[i * len(leaves) // len(hosts)]
        links += [ExpectedLink(PortRef(host), PortRef(leaf))] * _host_links(params, host)
    for leaf in leaves:
        for spine in spines:
            links += [ExpectedLink(PortRef(leaf), PortRef(spine))] * uplinks
    positions: dict[str, tuple[float, float]] = {}
    width = max(len(hosts), len(leaves), len(spines), 1)
    for row, group in enumerate((spines, leaves, hosts)):
        for i, label in enumerate(group):
            positions[label] = ((i + 0.5) * width / max(len(group), 1), row)
    promised = _star_diameter(len(hosts), len(leaves), len(spines))
    limit = params.get("oversubscription")
    return Layout(
        tuple(links),
        promised_max_hops=promised,
        positions=positions,
        oversubscription_limit=float(limit) if limit is not None else 1.0,
    )


def _host_links(params: Mapping[str, Any], host: str) -> int:
    """Links from a host to its leaf: `host_links` is one count for every host, or a mapping of member
    label to count (a DGX H100 has eight compute rails, a login node one); one when unnamed."""
    spec = params.get("host_links", 1)
    count = spec.get(host, 1) if isinstance(spec, Mapping) else spec
    try:
        count = int(count)
    except (TypeError, ValueError):
        raise TemplateError("host_links must be a whole number or a mapping of member to whole number.")
    if count < 1:
        raise TemplateError("host_links must be at least 1.")
    return count


def _star_diameter(hosts: int, leaves: int, spines: int) -> int:
    """The largest hop count of the expected star / leaf-spine graph, in closed form (no graph walk)."""
    if not spines:
        return 2 if hosts >= 2 else hosts  # one leaf: host-leaf-host
    if hosts >= 2 and leaves >= 2:
        return 4  # host-leaf-spine-leaf-host (hosts are spread over the leaves)
    if hosts and leaves >= 2:
        return 3
    return 2 if hosts >= 2 or leaves >= 2 or spines >= 2 or hosts else 1


TEMPLATES: dict[str, Template] = {
    t.key: t
    for t in (
        Template(
            "mesh4",
            "4-card full mesh",
            build_mesh4,
            "4 cards labelled A-D in order",
            "The first field guide's exact port map: A1-B1, A2-C1, B2-D1, C2-D2, A3-D3, B3-C3.",
        ),
        Template(
            "bh-1x2",
            "Blackhole 1×2 mesh",
            build_bh_1x2,
            "2 p150a cards",
            "Assumed port: QSFP1 ↔ QSFP1 (Tenstorrent documents one cable, not which port).",
        ),
        Template(
            "bh-2x2",
            "Blackhole ring of four (2×2 mesh)",
            build_bh_2x2,
            "4 p150a or p150b cards",
            "Assumed ports: ring 0-1-3-2-0, two cables per neighbour pair, QSFP1/2 → next card's QSFP3/4.",
        ),
        Template(
            "bh-2x4",
            "Blackhole 2×4 mesh",
            build_grid,
            "rows × cols cards (2 × 4 = 8 p150b validated)",
            "Assumed ports: east QSFP1 → QSFP2, south QSFP3 → QSFP4 (params rows, cols).",
        ),
        Template(
            "ring",
            "N-card ring",
            build_ring,
            "3 or more cards",
            "Card i's first port → card i+1's second port; lanes=2 adds third → fourth.",
        ),
        Template(
            "star",
            "Star / leaf-spine",
            build_star,
            "hosts, one or more switches, optional spines",
            "Any free port on each end; hosts spread over the leaves in member order; `host_links` sets the links"
            " per host (one count, or per member: a DGX H100 has eight rails).",
        ),
    )
}


def template_get(key: str) -> Template:
    try:
        return TEMPLATES[key]
    except KeyError:
        raise TemplateError(f"Unknown template {key!r}.") from None
