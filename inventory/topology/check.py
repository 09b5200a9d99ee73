"""Compare a fabric's cables with its template. Plain data in, dataclasses out; no Django.

Cost: matching, mismatches and reachability are linear in members + cables. The full hop matrix is only
built for fabrics of up to HOP_MATRIX_LIMIT members (it has n² cells). For a larger fabric whose cabling
equals the template's, the largest hop count IS the template's promise (same graph), computed in closed
form; a larger broken fabric falls back to networkx's bounded diameter search on its largest component.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from inventory.topology.templates import (
    ExpectedLink,
    Layout,
    MemberSpec,
    PortRef,
    TemplateError,
    natural_key,
    template_get,
)

HOP_MATRIX_LIMIT = 64
FAIL, WARN, INFO = "fail", "warn", "info"
FAULTY = "faulty"


@dataclass(frozen=True)
class PortInfo:
    id: int
    member: str  # the member's label
    name: str
    kind: str
    speed_gbps: int

    @property
    def ref(self) -> str:
        return f"{self.member}.{self.name}"


@dataclass(frozen=True)
class MemberInfo:
    label: str
    role: str
    ports: tuple[PortInfo, ...]
    display: str = ""  # e.g. "rig01/A" or "gpu01"
    object_id: int | None = None  # the card's or node's id
    node_id: int | None = None

    def spec(self) -> MemberSpec:
        return MemberSpec(self.label, self.role, tuple(p.name for p in self.ports))

    def port(self, which: str | int) -> PortInfo | None:
        if isinstance(which, int):
            ordered = sorted(self.ports, key=lambda p: natural_key(p.name))
            return ordered[which] if 0 <= which < len(ordered) else None
        for p in self.ports:
            if p.name == which:
                return p
        return None


@dataclass(frozen=True)
class CableInfo:
    id: int | None
    a: int  # port ids
    b: int
    status: str = "connected"
    kind: str = ""
    label: str = ""


@dataclass(frozen=True)
class FabricData:
    template: str
    params: Mapping[str, Any]
    members: tuple[MemberInfo, ...]
    cables: tuple[CableInfo, ...]
    outside_ports: Mapping[int, str] = field(default_factory=dict)  # port id -> "node/card PORT"


@dataclass(frozen=True)
class Finding:
    kind: str
    severity: str
    message: str
    ports: tuple[str, ...] = ()
    suggestion: str = ""
    cables: tuple[int, ...] = ()
    members: tuple[str, ...] = ()


@dataclass
class CheckResult:
    template: str
    labels: list[str]
    findings: list[Finding]
    expected_links: int
    cables: int
    promised_max_hops: int | None
    max_hops: int | None
    max_hops_exact: bool
    hop_matrix: list[list[int | None]] | None
    oversubscription: dict[str, float] = field(default_factory=dict)
    layout: Layout | None = None
    link_state: dict[int, str] = field(
        default_factory=dict
    )  # cable id -> ok / wrong / extra / faulty / mismatch

    @property
    def ok(self) -> bool:
        return not any(f.severity in (FAIL, WARN) for f in self.findings)

    @property
    def worst(self) -> str:
        sev = {f.severity for f in self.findings}
        return FAIL if FAIL in sev else WARN if WARN in sev else "pass"

    def as_dict(self) -> dict[str, Any]:
        return {
            "template": self.template,
            "ok": self.ok,
            "status": self.worst,
            "members": self.labels,
            "expected_links": self.expected_links,
            "cables": self.cables,
            "promised_max_hops": self.promised_max_hops,
            "max_hops": self.max_hops,
            "max_hops_exact": self.max_hops_exact,
            "hop_matrix": self.hop_matrix,
            "oversubscription": self.oversubscription,
            "findings": [
                {
                    "kind": f.kind,
                    "severity": f.severity,
                    "message": f.message,
                    "ports": list(f.ports),
                    "suggestion": f.suggestion,
                    "cables": list(f.cables),
                    "members": list(f.members),
                }
                for f in self.findings
            ],
        }


def _cable_name(c: CableInfo) -> str:
    return f"cable #{c.id}" if c.id is not None else "a cable"


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


class _Index:
    def __init__(self, data: FabricData) -> None:
        self.members = {m.label: m for m in data.members}
        self.ports: dict[int, PortInfo] = {p.id: p for m in data.members for p in m.ports}
        self.outside = data.outside_ports
        self.by_port: dict[int, list[CableInfo]] = defaultdict(list)
        for c in data.cables:
            self.by_port[c.a].append(c)
            self.by_port[c.b].append(c)

    def ref(self, port_id: int) -> str:
        p = self.ports.get(port_id)
        return p.ref if p is not None else self.outside.get(port_id, f"port #{port_id}")

    def resolve(self, ref: PortRef) -> PortInfo | None:
        member = self.members.get(ref.member)
        return member.port(ref.port) if member is not None and ref.port is not None else None


def check(data: FabricData) -> CheckResult:
    idx = _Index(data)
    findings: list[Finding] = []
    labels = [m.label for m in data.members]
    layout = _layout(data, findings)
    internal = _classify_cables(data, idx, findings)
    link_state = {c.id: "ok" for c in internal if c.id is not None}
    if layout is not None:
        _match(layout, internal, idx, findings, link_state)
    _mismatches(internal, idx, findings, link_state)
    graph = nx.Graph()
    graph.add_nodes_from(labels)
    for c in internal:
        if c.status != FAULTY:
            graph.add_edge(idx.ports[c.a].member, idx.ports[c.b].member)
    _reachability(graph, labels, findings)
    matrix, max_hops, exact, pair = _hops(graph, labels, layout, findings)
    promised = layout.promised_max_hops if layout is not None else None
    if promised is not None and max_hops is not None and max_hops > promised:
        between = f" (between {pair[0]} and {pair[1]})" if pair else ""
        findings.append(
            Finding(
                "max_hops",
                FAIL,
                f"The largest hop count is {max_hops}{between}; the template promises at most {promised}.",
                members=tuple(pair or ()),
                suggestion="Fix the missing and misplaced links above.",
            )
        )
    over = _oversubscription(data, layout, internal, idx, findings)
    return CheckResult(
        template=data.template,
        labels=labels,
        findings=findings,
        expected_links=len(layout.links) if layout is not None else 0,
        cables=len(internal),
        promised_max_hops=promised,
        max_hops=max_hops,
        max_hops_exact=exact,
        hop_matrix=matrix,
        oversubscription=over,
        layout=layout,
        link_state=link_state,
    )


def _layout(data: FabricData, findings: list[Finding]) -> Layout | None:
    try:
        return template_get(data.template).build([m.spec() for m in data.members], data.params)
    except TemplateError as exc:
        findings.append(
            Finding("members", FAIL, str(exc), suggestion="Add or remove members to fit the template.")
        )
        return None


def _classify_cables(data: FabricData, idx: _Index, findings: list[Finding]) -> list[CableInfo]:
    """Cables with both ends in the fabric; reports reused ports, cables leaving it and faulty cables."""
    for port_id, cables in idx.by_port.items():
        if len(cables) > 1 and port_id in idx.ports:
            ref = idx.ref(port_id)
            names = ", ".join(_cable_name(c) for c in cables)
            findings.append(
                Finding(
                    "port_reused",
                    FAIL,
                    f"Port {ref} is used by {len(cables)} cables ({names}).",
                    ports=(ref,),
                    cables=tuple(c.id for c in cables if c.id is not None),
                    suggestion=f"Keep one cable on {ref} and move the others to free ports.",
                )
            )
    internal: list[CableInfo] = []
    for c in data.cables:
        inside = (c.a in idx.ports, c.b in idx.ports)
        if all(inside):
            internal.append(c)
            if c.status == FAULTY:
                findings.append(
                    Finding(
                        "faulty_link",
                        FAIL,
                        f"{_sentence(_cable_name(c))[:-1]} ({idx.ref(c.a)} – {idx.ref(c.b)}) is marked faulty.",
                        ports=(idx.ref(c.a), idx.ref(c.b)),
                        cables=_ids(c),
                        suggestion="Replace the cable.",
                    )
                )
        elif any(inside):
            mine, other = (c.a, c.b) if inside[0] else (c.b, c.a)
            findings.append(
                Finding(
                    "leaves_fabric",
                    WARN,
                    f"{_sentence(_cable_name(c))[:-1]} joins {idx.ref(mine)} to {idx.ref(other)}, outside this fabric.",
                    ports=(idx.ref(mine), idx.ref(other)),
                    cables=_ids(c),
                    suggestion="Remove it, or add the other end's card to this fabric.",
                )
            )
    return internal


def _ids(c: CableInfo) -> tuple[int, ...]:
    return (c.id,) if c.id is not None else ()


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def _match(
    layout: Layout,
    internal: Sequence[CableInfo],
    idx: _Index,
    findings: list[Finding],
    link_state: dict[int, str],
) -> None:
    exact: dict[frozenset[int], tuple[PortInfo, PortInfo]] = {}
    flexible: Counter[tuple[str, str]] = Counter()
    for link in layout.links:
        if link.flexible:
            flexible[_pair(link.a.member, link.b.member)] += 1
            continue
        pa, pb = idx.resolve(link.a), idx.resolve(link.b)
        if pa is None or pb is None:
            for missing in (ref for ref, got in ((link.a, pa), (link.b, pb)) if got is None):
                findings.append(
                    Finding(
                        "port_missing",
                        FAIL,
                        f"The template needs port {_ref_text(missing)}, which this card does not have.",
                        ports=(_ref_text(missing),),
                        members=(missing.member,),
                        suggestion="Use a card model with enough ports, or another template.",
                    )
                )
            continue
        exact[frozenset((pa.id, pb.id))] = (pa, pb)
    unmatched: list[CableInfo] = []
    for c in internal:
        key = frozenset((c.a, c.b))
        pair = _pair(idx.ports[c.a].member, idx.ports[c.b].member)
        if key in exact:
            del exact[key]
        elif flexible[pair] > 0:
            flexible[pair] -= 1
        else:
            unmatched.append(c)
    _report_differences(exact, flexible, unmatched, idx, findings, link_state)


def _ref_text(ref: PortRef) -> str:
    return f"{ref.member}.{ref.port}" if isinstance(ref.port, str) else f"{ref.member} port {ref.port}"


def _report_differences(
    exact: Mapping[frozenset[int], tuple[PortInfo, PortInfo]],
    flexible: Mapping[tuple[str, str], int],
    unmatched: Sequence[CableInfo],
    idx: _Index,
    findings: list[Finding],
    link_state: dict[int, str],
) -> None:
    missing_by_pair: dict[tuple[str, str], list[tuple[PortInfo, PortInfo]]] = defaultdict(list)
    for pa, pb in exact.values():
        missing_by_pair[_pair(pa.member, pb.member)].append((pa, pb))
    extra: list[CableInfo] = []
    for c in unmatched:
        pair = _pair(idx.ports[c.a].member, idx.ports[c.b].member)
        candidates = missing_by_pair.get(pair)
        if not candidates:
            extra.append(c)
            continue
        have = {c.a, c.b}
        best = max(candidates, key=lambda ab: len(have & {ab[0].id, ab[1].id}))
        candidates.remove(best)
        findings.append(_wrong_port(c, best, idx))
        if c.id is not None:
            link_state[c.id] = "wrong"
    for pairs in missing_by_pair.values():
        for pa, pb in pairs:
            findings.append(_missing(pa, pb, idx))
    for (a, b), count in flexible.items():
        for _ in range(count):
            findings.append(
                Finding(
                    "missing_link",
                    FAIL,
                    f"{a} has no link to {b}.",
                    members=(a, b),
                    suggestion=f"Connect a free port of {a} to a free port of {b}.",
                )
            )
    for c in extra:
        findings.append(
            Finding(
                "extra_link",
                WARN,
                f"{_sentence(_cable_name(c))[:-1]} joins {idx.ref(c.a)} – {idx.ref(c.b)}, which the template does not have.",
                ports=(idx.ref(c.a), idx.ref(c.b)),
                cables=_ids(c),
                suggestion="Remove it (or choose a template that has it).",
            )
        )
        if c.id is not None:
            link_state[c.id] = "extra"


def _wrong_port(c: CableInfo, want: tuple[PortInfo, PortInfo], idx: _Index) -> Finding:
    pa, pb = want
    ends = {idx.ports[c.a].member: idx.ports[c.a], idx.ports[c.b].member: idx.ports[c.b]}
    moves = [
        f"move the {p.member} end from {ends[p.member].name} to {p.name}"
        for p in (pa, pb)
        if ends[p.member].id != p.id
    ]
    return Finding(
        "wrong_port",
        FAIL,
        f"{_sentence(_cable_name(c))[:-1]} joins {idx.ref(c.a)} – {idx.ref(c.b)}; the template puts this link on "
        f"{pa.ref} – {pb.ref}.",
        ports=(idx.ref(c.a), idx.ref(c.b), pa.ref, pb.ref),
        cables=_ids(c),
        suggestion=_sentence("; ".join(moves) or "re-seat both ends"),
    )


def _missing(pa: PortInfo, pb: PortInfo, idx: _Index) -> Finding:
    busy = [f"{p.ref} carries {_cable_name(idx.by_port[p.id][0])}" for p in (pa, pb) if idx.by_port.get(p.id)]
    hint = f" (free it first: {'; '.join(busy)})" if busy else ""
    return Finding(
        "missing_link",
        FAIL,
        f"The link {pa.ref} – {pb.ref} is missing.",
        ports=(pa.ref, pb.ref),
        members=(pa.member, pb.member),
        suggestion=f"Connect {pa.ref} to {pb.ref}{hint}.",
    )


def _mismatches(
    internal: Iterable[CableInfo], idx: _Index, findings: list[Finding], link_state: dict[int, str]
) -> None:
    for c in internal:
        pa, pb = idx.ports[c.a], idx.ports[c.b]
        if pa.kind != pb.kind:
            findings.append(
                Finding(
                    "kind_mismatch",
                    FAIL,
                    f"{_sentence(_cable_name(c))[:-1]} joins a {pa.kind} port ({pa.ref}) to a {pb.kind} port ({pb.ref}).",
                    ports=(pa.ref, pb.ref),
                    cables=_ids(c),
                    suggestion="Join ports of the same kind.",
                )
            )
        elif pa.speed_gbps != pb.speed_gbps:
            low = min(pa.speed_gbps, pb.speed_gbps)
            findings.append(
                Finding(
                    "speed_mismatch",
                    WARN,
                    f"{_sentence(_cable_name(c))[:-1]} joins {pa.ref} ({pa.speed_gbps}G) to {pb.ref} ({pb.speed_gbps}G); "
                    f"it runs at {low}G.",
                    ports=(pa.ref, pb.ref),
                    cables=_ids(c),
                    suggestion="Join ports of the same speed.",
                )
            )
        else:
            continue
        if c.id is not None and link_state.get(c.id) == "ok":
            link_state[c.id] = "mismatch"


def _reachability(graph: nx.Graph, labels: Sequence[str], findings: list[Finding]) -> None:
    if len(labels) < 2:
        return
    components = sorted(nx.connected_components(graph), key=len, reverse=True)
    main = components[0]
    order = {label: i for i, label in enumerate(labels)}
    for comp in components[1:]:
        for label in sorted(comp, key=order.__getitem__):
            findings.append(
                Finding(
                    "unreachable",
                    FAIL,
                    f"{label} cannot reach {len(main)} of the fabric's members.",
                    members=(label,),
                    suggestion=f"Cable {label} as the template shows.",
                )
            )


def _hops(
    graph: nx.Graph, labels: Sequence[str], layout: Layout | None, findings: Sequence[Finding]
) -> tuple[list[list[int | None]] | None, int | None, bool, tuple[str, str] | None]:
    if len(labels) < 2:
        return ([[0]] if labels else None), (0 if labels else None), True, None
    if len(labels) <= HOP_MATRIX_LIMIT:
        dist = dict(nx.all_pairs_shortest_path_length(graph))
        matrix = [[dist[a].get(b) for b in labels] for a in labels]
        best, pair = -1, None
        for i, a in enumerate(labels):
            for j, b in enumerate(labels):
                d = matrix[i][j]
                if d is not None and d > best:
                    best, pair = d, (a, b)
        return matrix, best, True, pair
    structural = {
        "members",
        "port_missing",
        "missing_link",
        "extra_link",
        "wrong_port",
        "faulty_link",
        "port_reused",
        "unreachable",
    }
    if layout is not None and not any(f.kind in structural for f in findings):
        return None, layout.promised_max_hops, True, None  # the cabling is the template's graph
    largest = graph.subgraph(max(nx.connected_components(graph), key=len))
    return None, int(nx.diameter(largest, usebounds=True)), True, None


def _oversubscription(
    data: FabricData,
    layout: Layout | None,
    internal: Sequence[CableInfo],
    idx: _Index,
    findings: list[Finding],
) -> dict[str, float]:
    roles = {m.label: m.role for m in data.members}
    if not any(r == "spine" for r in roles.values()):
        return {}
    down: Counter[str] = Counter()
    up: Counter[str] = Counter()
    for c in internal:
        if c.status == FAULTY:
            continue
        pa, pb = idx.ports[c.a], idx.ports[c.b]
        speed = min(pa.speed_gbps, pb.speed_gbps)
        for here, there in ((pa, pb), (pb, pa)):
            if roles[here.member] == "switch":
                if roles[there.member] == "spine":
                    up[here.member] += speed
                elif roles[there.member] in ("host", "card"):
                    down[here.member] += speed
    limit = layout.oversubscription_limit if layout is not None else None
    ratios: dict[str, float] = {}
    for leaf in (label for label, role in roles.items() if role == "switch"):
        if not down[leaf]:
            continue
        if not up[leaf]:
            findings.append(
                Finding(
                    "oversubscribed",
                    FAIL,
                    f"Leaf {leaf} has hosts but no uplink to a spine.",
                    members=(leaf,),
                    suggestion=f"Connect {leaf} to the spines.",
                )
            )
            continue
        ratio = round(down[leaf] / up[leaf], 2)
        ratios[leaf] = ratio
        if limit is not None and ratio > limit:
            findings.append(
                Finding(
                    "oversubscribed",
                    WARN,
                    f"Leaf {leaf} is oversubscribed {ratio}:1 ({down[leaf]}G down, {up[leaf]}G up); the fabric allows "
                    f"{limit:g}:1.",
                    members=(leaf,),
                    suggestion=f"Add uplinks from {leaf} to the spines or move hosts off it.",
                )
            )
    return ratios


__all__ = [
    "CableInfo",
    "CheckResult",
    "ExpectedLink",
    "FabricData",
    "Finding",
    "MemberInfo",
    "PortInfo",
    "check",
]
