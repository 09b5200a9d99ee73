"""Cluster rows for the Django-level suites: a simulator cluster, or the loopback Slurm lab."""

from __future__ import annotations

import itertools
from typing import Any

from inventory.choices import NodeRole
from inventory.models import Card, CardModel, Cluster, Node

_seq = itertools.count(1)


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_seq)}"


def make_nodes(cluster: Cluster, names: list[str], gpus: int = 4) -> list[Node]:
    """Compute nodes named like the Slurm nodes, each with `gpus` cards."""
    model = CardModel.objects.create(vendor="Fake", name=unique("fake"), tdp_w=100)
    nodes = []
    for name in names:
        node = Node.objects.create(
            hostname=f"{name}-{cluster.name}", slurm_name=name, cluster=cluster, role=NodeRole.COMPUTE
        )
        for slot in range(gpus):
            Card.objects.create(node=node, card_model=model, slot=str(slot))
        nodes.append(node)
    return nodes


def sim_cluster_create(**overrides: Any) -> Cluster:
    return Cluster.objects.create(
        **{"name": unique("sim"), "backend": Cluster.Backend.SIMULATOR, **overrides}
    )


def lab_cluster_create(lab: dict[str, str], **overrides: Any) -> Cluster:
    """A cluster row reaching the loopback lab (facts from the `slurm_lab` fixture) over SSH."""
    fields = {
        "name": unique("lab"),
        "backend": Cluster.Backend.SLURM_SSH,
        "ssh_host": lab["SLURM_LAB_SSH_HOST"],
        "ssh_port": int(lab["SLURM_LAB_SSH_PORT"]),
        "ssh_user": lab["SLURM_LAB_SSH_USER"],
        "ssh_host_key": lab["SLURM_LAB_SSH_HOST_KEY"],
        "ssh_key_path": lab["SLURM_LAB_SSH_KEY"],
        "slurm_conf": lab.get("SLURM_CONF", ""),
        **overrides,
    }
    return Cluster.objects.create(**fields)
