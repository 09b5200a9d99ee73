"""Simulated compute nodes built from the inventory: their cards' physics and their tool output.

Shared by the in-process demo loop (portal.demo.simulation) and the compose feeder (run_feeder).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from inventory.choices import NodeRole
from inventory.models import CableTermination, Node
from jobs.models import NodeState
from portal.demo import render
from portal.demo.physics import CardSim, card_kind_for

#: chassis intake temperatures (°C): the converted mining frame has little airflow
AMBIENT_C = {"rig-01": 35.0, "h100-pod": 24.0, "gb10-desk": 26.0}
#: the one pod node that is scraped through dcgm-exporter instead of nvidia-smi
DCGM_NODE = "gpu04"
BUSY_LOAD = 0.93
#: reads per second of a node whose jobs load no data (the I/O-bound demo job saturates its NVMe)
DISK_IDLE_IOPS = 40.0


@dataclass(frozen=True)
class LoadHint:
    """What the jobs on a node do with its cards, where they do not keep all they hold busy."""

    busy_cards: int
    load: float = BUSY_LOAD
    disk_iops: float = DISK_IDLE_IOPS


@dataclass
class NodeSim:
    node_id: int
    hostname: str
    cluster: str
    fmt: str  # "nvidia-smi-csv" | "dcgm-exporter" | "tt-smi"
    cards: list[CardSim]
    #: the node's disk: reads per second now, and the counters node_exporter prints
    disk_iops: float = DISK_IDLE_IOPS
    disk_reads: float = 0.0
    disk_writes: float = 0.0

    def render(self, now: datetime) -> str:
        """What the node's collector prints right now, in the node's tool format."""
        if self.fmt == "tt-smi":
            return render.tt_smi_snapshot(self.hostname, self.cards, timezone.localtime(now))
        if self.fmt == "dcgm-exporter":
            return render.dcgm_exporter(self.hostname, self.cards)
        return render.nvidia_smi_csv(self.cards)

    def render_node_exporter(self) -> str:
        return render.node_exporter(self.disk_reads, self.disk_writes)


def node_sims(*, seed: int = 0) -> list[NodeSim]:
    """One :class:`NodeSim` per compute node with cards, one :class:`CardSim` per inventory card."""
    out: list[NodeSim] = []
    nodes = (
        Node.objects.filter(role=NodeRole.COMPUTE, cluster__isnull=False)
        .select_related("cluster")
        .prefetch_related("cards__card_model__port_templates", "cards__ports")
        .order_by("cluster__name", "hostname")
    )
    cabled = set(CableTermination.objects.filter(port__isnull=False).values_list("port_id", flat=True))
    for node in nodes:
        assert node.cluster is not None
        cards = []
        for i, card in enumerate(sorted(node.cards.all(), key=lambda c: (len(c.slot), c.slot))):
            wiring = {t.name: tuple(t.eth_channels or ()) for t in card.card_model.port_templates.all()}
            ports = {
                p.name: wiring[p.name] for p in card.ports.all() if p.pk in cabled and wiring.get(p.name)
            }
            cards.append(
                CardSim(
                    kind=card_kind_for(card.card_model.name),
                    index=i,
                    bus_id=card.pci_bus_id or f"0000:{i + 1:02x}:00.0",
                    uuid=card.gpu_uuid,
                    serial=card.serial,
                    ambient_c=AMBIENT_C.get(node.cluster.name, 25.0),
                    seed=seed * 1000 + card.pk,
                    link_ports=ports,
                )
            )
        if not cards:
            continue
        if cards[0].kind.key == "p150a":
            fmt = "tt-smi"
        elif node.hostname.split(".")[0] == DCGM_NODE:
            fmt = "dcgm-exporter"
        else:
            fmt = "nvidia-smi-csv"
        out.append(NodeSim(node.pk, node.hostname, node.cluster.name, fmt, cards))
    return out


def nodes_down(nodes: list[NodeSim]) -> set[int]:
    """Ids of the nodes Slurm reports down: they answer no collector."""
    return set(
        Node.objects.filter(pk__in=[n.node_id for n in nodes], slurm_state__startswith="down").values_list(
            "pk", flat=True
        )
    )


def physics_step(
    nodes: list[NodeSim],
    dt: float,
    *,
    fallback_load: float | None = None,
    hints: dict[int, LoadHint] | None = None,
) -> set[int]:
    """Load each node's first ``gpus_alloc`` cards (the synced Slurm state) and advance their physics.

    ``fallback_load`` is used for nodes Slurm never reported (the compose feeder's non-Slurm clusters);
    ``hints`` (node id -> :class:`LoadHint`) for nodes whose jobs leave cards idle or wait on the disk.
    Returns the ids of the nodes that are down.
    """
    allocated = dict(
        NodeState.objects.filter(node_id__in=[n.node_id for n in nodes]).values_list("node_id", "gpus_alloc")
    )
    down = nodes_down(nodes)
    for node in nodes:
        if node.node_id in down:
            busy = 0
        elif node.node_id in allocated:
            busy = int(allocated[node.node_id] or 0)
        else:
            busy = round(len(node.cards) * (fallback_load or 0.0))
        hint = (hints or {}).get(node.node_id)
        load = BUSY_LOAD
        if hint is not None and node.node_id not in down:
            busy, load = min(busy, hint.busy_cards), hint.load
        node.disk_iops = hint.disk_iops if hint is not None else DISK_IDLE_IOPS
        node.disk_reads += node.disk_iops * 0.95 * dt
        node.disk_writes += node.disk_iops * 0.05 * dt
        for card in node.cards:
            card.load = load if card.index < busy else 0.0
            card.step(dt)
    return down
