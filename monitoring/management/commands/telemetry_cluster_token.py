from typing import Any

from django.core.management.base import BaseCommand, CommandError

from inventory.models import Cluster
from monitoring.services import cluster_token_create


class Command(BaseCommand):
    help = "Create a push token for a cluster's Prometheus (remote write, any node of the cluster); prints the key once."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("cluster")
        parser.add_argument("--name", default="prometheus")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cluster = Cluster.objects.get(name=options["cluster"])
        except Cluster.DoesNotExist:
            raise CommandError(f"no cluster {options['cluster']!r} in the inventory") from None
        _token, key = cluster_token_create(cluster=cluster, user=None, name=options["name"])
        self.stdout.write(key)
