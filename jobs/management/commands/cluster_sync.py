from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from inventory.models import Cluster
from jobs.sync import cluster_sync


class Command(BaseCommand):
    help = "Read nodes, jobs and partitions from Slurm and reconcile them into the database (once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("clusters", nargs="*", help="cluster names (default: all)")

    def handle(self, *args: Any, **options: Any) -> None:
        names = options["clusters"]
        clusters = list(Cluster.objects.filter(name__in=names) if names else Cluster.objects.all())
        missing = sorted(set(names) - {c.name for c in clusters})
        if missing:
            raise CommandError(f"unknown clusters: {', '.join(missing)}")
        failed = 0
        for cluster in clusters:
            r = cluster_sync(cluster)
            if r.ok:
                self.stdout.write(
                    f"{cluster.name}: ok, {len(r.node_ids)} nodes and {len(r.job_ids)} jobs changed, "
                    f"{r.transitions} transitions"
                    + (f", not in inventory: {', '.join(r.unknown_nodes)}" if r.unknown_nodes else "")
                )
            else:
                failed += 1
                self.stderr.write(f"{cluster.name}: STALE: {r.error}")
        if failed:
            raise CommandError(f"{failed} cluster(s) could not be synced")
