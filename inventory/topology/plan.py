"""Cable plans: which port to which port realises a fabric's template. Plain data in and out; no Django.

The plan covers only the links the fabric still lacks (links already cabled as the template wants are
kept), and refuses when a port it needs is already taken by another cable, or a card lacks the port.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from inventory.topology.check import CableInfo, FabricData, MemberInfo, PortInfo
from inventory.topology.templates import ExpectedLink, TemplateError, natural_key, template_get

# The cable kind a planned link gets, from its port kind.
CABLE_KIND_FOR_PORT = {
    "qsfp-dd": "dac",
    "osfp": "dac",
    "qsfp28": "dac",
    "qsfp56": "dac",
    "infiniband": "infiniband",
    "ethernet": "cat6",
    "sfp28": "dac",
    "usb-c": "dac",
}


@dataclass(frozen=True)
class PlannedLink:
    a: PortInfo
    b: PortInfo
    kind: str

    @property
    def label(self) -> str:
        return f"{self.a.ref}-{self.b.ref}"[:64]


@dataclass
class Plan:
    links: list[PlannedLink] = field(default_factory=list)
    kept: int = 0  # template links already cabled correctly
    errors: list[tuple[str, str]] = field(default_factory=list)  # (port or member, message)

    @property
    def ok(self) -> bool:
        return not self.errors


def plan(data: FabricData) -> Plan:
    result = Plan()
    members = {m.label: m for m in data.members}
    try:
        layout = template_get(data.template).build([m.spec() for m in data.members], data.params)
    except TemplateError as exc:
        result.errors.append(("", str(exc)))
        return result
    used = _used_ports(data.cables)
    existing = {frozenset((c.a, c.b)) for c in data.cables}
    pair_count: Counter[tuple[str, str]] = Counter()
    port_member = {p.id: m.label for m in data.members for p in m.ports}
    for c in data.cables:
        if c.a in port_member and c.b in port_member:
            pair_count[_pair(port_member[c.a], port_member[c.b])] += 1
    for link in layout.links:
        if link.flexible:
            pair = _pair(link.a.member, link.b.member)
            if pair_count[pair] > 0:
                pair_count[pair] -= 1
                result.kept += 1
                continue
            _plan_flexible(link, members, used, result)
        else:
            _plan_exact(link, members, used, existing, result)
    if result.errors:
        result.links = []
    return result


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def _used_ports(cables: list[CableInfo] | tuple[CableInfo, ...]) -> set[int]:
    used: set[int] = set()
    for c in cables:
        used.update((c.a, c.b))
    return used


def _plan_exact(
    link: ExpectedLink,
    members: dict[str, MemberInfo],
    used: set[int],
    existing: set[frozenset[int]],
    result: Plan,
) -> None:
    ends: list[PortInfo] = []
    for ref in (link.a, link.b):
        member = members[ref.member]
        assert ref.port is not None
        port = member.port(ref.port)
        if port is None:
            result.errors.append(
                (f"{ref.member}.{ref.port}", f"{member.display or ref.member} has no port {ref.port}.")
            )
            return
        ends.append(port)
    a, b = ends
    if frozenset((a.id, b.id)) in existing:
        result.kept += 1
        return
    for p in (a, b):
        if p.id in used:
            result.errors.append((p.ref, f"{p.ref} is already cabled."))
    if a.id not in used and b.id not in used:
        used.update((a.id, b.id))
        result.links.append(PlannedLink(a, b, CABLE_KIND_FOR_PORT.get(a.kind, "dac")))


def _plan_flexible(link: ExpectedLink, members: dict[str, MemberInfo], used: set[int], result: Plan) -> None:
    ma, mb = members[link.a.member], members[link.b.member]
    for a in _free(ma, used):
        b = next((p for p in _free(mb, used) if p.kind == a.kind), None)
        if b is not None:
            used.update((a.id, b.id))
            result.links.append(PlannedLink(a, b, CABLE_KIND_FOR_PORT.get(a.kind, "dac")))
            return
    result.errors.append(
        (f"{ma.label}–{mb.label}", f"No free pair of ports of one kind between {ma.label} and {mb.label}.")
    )


def _free(member: MemberInfo, used: set[int]) -> list[PortInfo]:
    return [p for p in sorted(member.ports, key=lambda p: natural_key(p.name)) if p.id not in used]


def plan_as_cables(result: Plan, *, first_id: int = -1) -> list[CableInfo]:
    """The planned links as (negative-id) cables, to check a plan before it is created."""
    return [
        CableInfo(first_id - i, link.a.id, link.b.id, "planned", link.kind, link.label)
        for i, link in enumerate(result.links)
    ]


__all__ = ["CABLE_KIND_FOR_PORT", "Plan", "PlannedLink", "plan", "plan_as_cables"]
