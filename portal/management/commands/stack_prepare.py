"""``manage.py stack_prepare``: what the compose web service does before it serves, in one process.

migrate, seed the example clusters (idempotent), and, when ``--lab-env`` names an existing file,
point ``--cluster`` at that Slurm (``cluster_from_lab_env --map-nodes``). One Django start-up instead
of three: on a busy two-core machine each costs seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "migrate, seed_demo and cluster_from_lab_env --map-nodes (when the lab env file exists)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--lab-env", default="", help="a Slurm lab env file (scripts/slurm-lab/start.sh)")
        parser.add_argument(
            "--cluster", default="h100-pod", help="the cluster that gets the lab's connection"
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        call_command("migrate", interactive=False, stdout=self.stdout, stderr=self.stderr)
        call_command("seed_demo", stdout=self.stdout, stderr=self.stderr)
        lab_env = opts["lab_env"]
        if lab_env and Path(lab_env).is_file():
            call_command(
                "cluster_from_lab_env", lab_env, cluster=opts["cluster"], map_nodes=True, stdout=self.stdout
            )
        elif lab_env:
            self.stdout.write(f"{lab_env} does not exist: {opts['cluster']} keeps its connection")
