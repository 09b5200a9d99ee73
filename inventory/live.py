"""Inventory's live pages (rack thermal map, node page, fabric drawing) and where inventory rows'
changes go: registered with :mod:`portal.live.registry` by ``InventoryConfig.ready``.

Routing: a changed node (and anything attributed to a node: its cards, its alerts) is sent to the
node's own group, its cluster's and its rack's, and to the groups of the fabrics it is a member of.
Telemetry is read only through ``monitoring`` selectors, jobs and actions through ``jobs`` ones.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from portal.live import groups, registry
from portal.live.consumers import LiveConsumer

# -- routing ---------------------------------------------------------------------------------------


def route(batch: registry.Batch, routes: registry.Routes) -> None:
    """Nodes and cards go wherever their node is shown."""
    from inventory.models import Card

    for pk in batch.get("node", ()):
        routes.via("node", pk, "node", pk)
    cards = set(batch.get("card", ()))
    if cards:
        for pk, node_id in Card.objects.filter(pk__any=cards).values_list("pk", "node_id"):
            routes.via("node", node_id, "card", pk)


def resolve_nodes(attributed: dict[Any, set[tuple[str, Any]]], routes: registry.Routes) -> None:
    """The groups of the attributed nodes: node, cluster, rack (one query) and fabrics (one)."""
    from inventory.models import FabricMember, Node

    nodes = {
        pk: (cluster_id, rack_id)
        for pk, cluster_id, rack_id in Node.objects.filter(pk__any=set(attributed)).values_list(
            "pk", "cluster_id", "rack_id"
        )
    }
    for node_id, items in attributed.items():
        if node_id not in nodes:
            continue
        cluster_id, rack_id = nodes[node_id]
        node_groups = [groups.node(node_id)]
        if cluster_id is not None:
            node_groups.append(groups.cluster(cluster_id))
        if rack_id is not None:
            node_groups.append(groups.rack(rack_id))
        for kind, pk in items:
            routes.add_all(node_groups, kind, pk)
    members = FabricMember.objects.filter(Q(node_id__any=set(nodes)) | Q(card__node_id__any=set(nodes)))
    for fabric_id, node_id, card_node_id in members.values_list("fabric_id", "node_id", "card__node_id"):
        routes.add(groups.fabric(fabric_id), "node", node_id or card_node_id)


# -- fragments -------------------------------------------------------------------------------------


def fabric_links(data: Any) -> dict[int, bool]:
    """{port id: link up} of every cable end of a fabric (``FabricData``): link telemetry, and a
    firing link-down alert on the port marks it down (``monitoring.overview``)."""
    from monitoring.overview import port_link_alerts, port_link_up

    ports = {p for c in data.cables for p in (c.a, c.b)}
    links = port_link_up(ports)
    for port in port_link_alerts(ports):
        links[port] = False
    return links


def fabric_drawing(fabric_id: int, data: Any, result: Any, links: dict[int, bool]) -> str:
    """The fabric's drawing (links coloured by cable state and live link state), swapped by its id."""
    from inventory.topology import svg

    drawing = mark_safe(svg.render(data, result, links))  # noqa: S308 (escaped by svg.render)
    return render_to_string("live/fabric_drawing.html", {"fabric_id": fabric_id, "svg": drawing})


def node_activity_context(node_id: int, user: Any) -> dict[str, Any]:
    """The node's active and recent jobs and its recent actions, as ``user`` may see them."""
    from inventory.models import Node
    from jobs.selectors import action_list, job_list

    node = Node.objects.get(pk=node_id)
    name = node.slurm_name or node.hostname.split(".")[0]
    jobs = job_list(user=user).filter(cluster=node.cluster, node_names__contains=f",{name},")[:10]
    actions = action_list(user=user).filter(node_id=node_id)[:5]
    return {"node_id": node_id, "jobs": list(jobs), "actions": list(actions)}


# -- rack thermal map ------------------------------------------------------------------------------
class RackConsumer(LiveConsumer):
    view = "rack"
    permission = "inventory.view_rack"
    shared_snapshots = True

    def setup(self) -> bool:
        from inventory.models import Rack

        self.rack_id = int(self.scope["url_route"]["kwargs"]["pk"])
        if not Rack.objects.filter(pk=self.rack_id).exists():
            return False
        self.live_groups = [groups.rack(self.rack_id)]
        return True

    def render_key(self) -> tuple[Any, ...]:
        return (self.rack_id,)

    def snapshot(self) -> str:
        from monitoring.overview import node_thermal_list

        return render_to_string(
            "live/rack_thermal_nodes.html",
            {"rack_id": self.rack_id, "nodes": node_thermal_list(rack_id=self.rack_id)},
        )

    def update(self, ids: dict[str, list[Any]]) -> str:
        from inventory.models import Card
        from monitoring.overview import node_thermal_list

        node_ids = set(ids.get("node", ())) | set(
            Card.objects.filter(pk__in=ids.get("card", ())).values_list("node_id", flat=True)
        )
        if not node_ids:
            return ""
        nodes = node_thermal_list(node_ids=node_ids, rack_id=self.rack_id)
        return "".join(render_to_string("live/thermal_node.html", {"t": t}) for t in nodes)


# -- fabric drawing --------------------------------------------------------------------------------
#: {fabric pk: the link states this process last pushed}: telemetry that changes no link is not re-drawn
_fabric_links: dict[int, dict[int, bool]] = {}


class FabricConsumer(LiveConsumer):
    """The fabric page's drawing, re-drawn when a member's link state (telemetry, alerts) changes."""

    view = "fabric"
    permission = "inventory.view_fabric"
    shared_snapshots = True

    def setup(self) -> bool:
        from inventory.models import Fabric

        self.fabric_id = int(self.scope["url_route"]["kwargs"]["pk"])
        if not Fabric.objects.filter(pk=self.fabric_id).exists():
            return False
        self.live_groups = [groups.fabric(self.fabric_id)]
        return True

    def render_key(self) -> tuple[Any, ...]:
        return (self.fabric_id,)

    def snapshot(self) -> str:
        return self._draw(only_if_changed=False)

    def update(self, ids: dict[str, list[Any]]) -> str:
        return self._draw(only_if_changed=True)

    def _draw(self, *, only_if_changed: bool) -> str:
        from inventory.models import Fabric
        from inventory.topology.check import check
        from inventory.topology.data import fabric_data

        fabric = Fabric.objects.filter(pk=self.fabric_id).first()
        if fabric is None:
            return ""
        data = fabric_data(fabric)
        links = fabric_links(data)
        if only_if_changed:
            if _fabric_links.get(self.fabric_id) == links:
                return ""
            _fabric_links[self.fabric_id] = links
        return fabric_drawing(self.fabric_id, data, check(data), links)


# -- node page -------------------------------------------------------------------------------------
class NodeConsumer(LiveConsumer):
    """Latest points for the charts, the cards' thermal cells, the node's jobs and actions."""

    view = "node"
    permission = "inventory.view_node"

    def setup(self) -> bool:
        from inventory.models import Node
        from jobs.selectors import can_see_all_jobs

        self.node_id = int(self.scope["url_route"]["kwargs"]["pk"])
        if not Node.objects.filter(pk=self.node_id).exists():
            return False
        self.see_all = can_see_all_jobs(self.user) or self.user.has_perm("jobs.operate_nodes")
        self.live_groups = [groups.node(self.node_id)]
        return True

    def render_key(self) -> tuple[Any, ...]:
        # the node's telemetry is the same for everyone; jobs and actions are the user's own
        # unless they may see all of them
        return (self.node_id, "all" if self.see_all else self.user.pk)

    def snapshot(self) -> str:
        return self._render(telemetry=True, activity=True)

    def update(self, ids: dict[str, list[Any]]) -> str:
        telemetry = bool(ids.get("node") or ids.get("card") or ids.get("alert"))
        activity = bool(ids.get("job") or ids.get("action"))
        return self._render(telemetry=telemetry, activity=activity)

    def _render(self, *, telemetry: bool, activity: bool) -> str:
        from monitoring.overview import node_latest_points, node_thermal_list

        parts = []
        if telemetry:
            thermal = node_thermal_list(node_ids=[self.node_id])
            parts.append(
                render_to_string(
                    "live/node_latest.html",
                    {
                        "node_id": self.node_id,
                        "points": node_latest_points(self.node_id),
                        "t": thermal[0] if thermal else None,
                    },
                )  # fmt: skip
            )
        if activity:
            parts.append(
                render_to_string("live/node_activity.html", node_activity_context(self.node_id, self.user))
            )
        return "".join(parts)


def register() -> None:
    registry.register(
        kinds=("node", "card", "cluster"),
        router=route,
        resolvers={"node": resolve_nodes},
        websockets={
            "ws/live/rack/<int:pk>/": RackConsumer,
            "ws/live/node/<int:pk>/": NodeConsumer,
            "ws/live/fabric/<int:pk>/": FabricConsumer,
        },
    )
