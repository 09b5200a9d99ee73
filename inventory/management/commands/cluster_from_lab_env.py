"""Point a cluster at a Slurm lab (scripts/slurm-lab/start.sh writes its connection facts to an env file)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from inventory.models import Cluster
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


class Command(BaseCommand):
    help = (
        "Set a cluster's SSH connection (host, port, account, pinned host key, key path) from a lab env file."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("env_file")
        parser.add_argument("--cluster", required=True, help="Cluster name (created if missing).")
        parser.add_argument("--host", help="Override the login host (e.g. the compose service name).")

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
        instance_save(cluster, user=None)
        self.stdout.write(
            self.style.SUCCESS(
                f"{cluster.name}: slurm-ssh via {cluster.ssh_user}@{cluster.ssh_host}:{cluster.ssh_port}"
            )
        )
