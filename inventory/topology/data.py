"""Reads for fabrics: gather one fabric as plain data for the pure check, in a constant number of queries."""

from __future__ import annotations

from collections import defaultdict

from django.db.models import Count, Q, QuerySet

from inventory.models import CableTermination, Fabric, FabricMember, Port
from inventory.topology.check import CableInfo, CheckResult, FabricData, MemberInfo, PortInfo, check


def fabric_list() -> QuerySet[Fabric]:
    return Fabric.objects.select_related("cluster").annotate(member_count=Count("members")).order_by("name")


def fabric_members(fabric: Fabric) -> QuerySet[FabricMember]:
    return FabricMember.objects.filter(fabric=fabric).select_related("card__node", "card__card_model", "node")


def fabric_data(fabric: Fabric) -> FabricData:
    """Members, their ports and every cable touching those ports: three queries whatever the size."""
    members = list(fabric_members(fabric))
    card_label = {m.card_id: m.label for m in members if m.card_id is not None}
    node_label = {m.node_id: m.label for m in members if m.node_id is not None}
    member_ports = Port.objects.filter(
        Q(card__fabric_memberships__fabric=fabric)
        | Q(card__isnull=True, node__fabric_memberships__fabric=fabric)
    )
    ports: dict[str, list[PortInfo]] = defaultdict(list)
    inside: set[int] = set()
    for pid, card_id, node_id, name, kind, speed in member_ports.values_list(
        "id", "card_id", "node_id", "name", "kind", "speed_gbps"
    ):
        label = card_label.get(card_id) if card_id is not None else node_label.get(node_id)
        if label is None:
            continue
        ports[label].append(PortInfo(pid, label, name, kind, speed))
        inside.add(pid)
    cable_ids = CableTermination.objects.filter(port__in=member_ports).values("cable_id")
    ends: dict[int, dict[str, int]] = defaultdict(dict)
    meta: dict[int, tuple[str, str, str]] = {}
    outside: dict[int, str] = {}
    rows = CableTermination.objects.filter(cable_id__in=cable_ids).values_list(
        "cable_id",
        "end",
        "port_id",
        "cable__status",
        "cable__kind",
        "cable__label",
        "port__name",
        "port__node__hostname",
        "port__card__slot",
    )
    for cable_id, end, port_id, status, kind, label, pname, host, slot in rows:
        ends[cable_id][end] = port_id
        meta[cable_id] = (status, kind, label)
        if port_id not in inside:
            outside[port_id] = f"{host}/{slot} {pname}" if slot else f"{host} {pname}"
    cables = tuple(
        CableInfo(cid, e["a"], e["b"], *meta[cid]) for cid, e in sorted(ends.items()) if "a" in e and "b" in e
    )
    infos = tuple(
        MemberInfo(
            m.label,
            m.role,
            tuple(ports.get(m.label, ())),
            display=_display(m),
            object_id=m.card_id or m.node_id,
            node_id=m.card.node_id if m.card is not None else m.node_id,
        )
        for m in members
    )
    return FabricData(fabric.template, dict(fabric.params or {}), infos, cables, outside)


def _display(m: FabricMember) -> str:
    if m.card is not None:
        return f"{m.card.node.hostname}/{m.card.slot}"
    return m.node.hostname if m.node is not None else m.label


def fabric_check(fabric: Fabric) -> tuple[FabricData, CheckResult]:
    data = fabric_data(fabric)
    return data, check(data)
