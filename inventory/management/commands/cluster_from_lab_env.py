"""Point a cluster at a Slurm lab (scripts/slurm-lab/start.sh writes its connection facts to an env file)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from inventory.choices import NodeRole
from inventory.models import Cluster, Node
from jobs.sync import expand_hostlist
from portal.services import instance_save


def read_env_file(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("export "):
            line = line[len("export ") :]
        if "=" not in line or line.startswith("#"):
            continue
        key, _sep, raw = line.partition("=")
        parts = shlex.split(raw)
        values[key.strip()] = parts[0] if parts else ""
    return values


def nodes_map_to_lab(cluster: Cluster, slurm_names: list[str]) -> list[tuple[str, str]]:
    """Set the Slurm name of the cluster's first compute nodes (by host name) to the lab's node names.

    Idempotent; a node that held one of those names before and is not among the first gives it up, so
    the (cluster, slurm_name) uniqueness holds. Returns (hostname, slurm name) pairs.
    """
    nodes = list(Node.objects.filter(cluster=cluster, role=NodeRole.COMPUTE).order_by("hostname"))
    targets = dict(zip((n.pk for n in nodes), slurm_names, strict=False))
    if not targets:
        return []
    for node in nodes:
        if node.pk not in targets and node.slurm_name in slurm_names:
            node.slurm_name = ""
            instance_save(node, user=None)
    # two passes so swapping names between nodes never collides on the unique constraint
    for node in nodes:
        if node.pk in targets and node.slurm_name != targets[node.pk] and node.slurm_name in slurm_names:
            node.slurm_name = ""
            instance_save(node, user=None)
    pairs = []
    for node in nodes:
        if node.pk in targets:
            if node.slurm_name != targets[node.pk]:
                node.slurm_name = targets[node.pk]
                instance_save(node, user=None)
            pairs.append((node.hostname, node.slurm_name))
    return pairs


class Command(BaseCommand):
    help = (
        "Set a cluster's SSH connection (host, port, account, pinned host key, key path) from a lab env file."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("env_file")
        parser.add_argument("--cluster", required=True, help="Cluster name (created if missing).")
        parser.add_argument("--host", help="Override the login host (e.g. the compose service name).")
        parser.add_argument(
            "--map-nodes",
            action="store_true",
            help=(
                "Give the lab's Slurm node names (SLURM_LAB_NODES, e.g. node[1-2]) to the cluster's first "
                "compute nodes by host name, so the lab stands in for them (the compose stack)."
            ),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["env_file"])
        if not path.is_file():
            raise CommandError(f"{path} does not exist: start the lab first (scripts/slurm-lab/start.sh).")
        env = read_env_file(path)
        missing = [
            k
            for k in (
                "SLURM_LAB_SSH_PORT",
                "SLURM_LAB_SSH_USER",
                "SLURM_LAB_SSH_KEY",
                "SLURM_LAB_SSH_HOST_KEY",
            )
            if not env.get(k)
        ]
        if missing:
            raise CommandError(f"{path} lacks {', '.join(missing)}.")
        cluster = Cluster.objects.filter(name=options["cluster"]).first() or Cluster(name=options["cluster"])
        cluster.backend = Cluster.Backend.SLURM_SSH
        cluster.ssh_host = options["host"] or env.get("SLURM_LAB_SSH_HOST", "127.0.0.1")
        cluster.ssh_port = int(env["SLURM_LAB_SSH_PORT"])
        cluster.ssh_user = env["SLURM_LAB_SSH_USER"]
        cluster.ssh_key_path = env["SLURM_LAB_SSH_KEY"]
        cluster.ssh_host_key = env["SLURM_LAB_SSH_HOST_KEY"]
        cluster.slurm_conf = env.get("SLURM_CONF", "")
        with transaction.atomic():
            instance_save(cluster, user=None)
            mapped = (
                nodes_map_to_lab(cluster, expand_hostlist(env.get("SLURM_LAB_NODES")))
                if options["map_nodes"]
                else []
            )
        for hostname, slurm_name in mapped:
            self.stdout.write(f"{cluster.name}: {hostname} is Slurm node {slurm_name}")
        self.stdout.write(
            self.style.SUCCESS(
                f"{cluster.name}: slurm-ssh via {cluster.ssh_user}@{cluster.ssh_host}:{cluster.ssh_port}"
            )
        )
