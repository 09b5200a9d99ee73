from typing import Any

from django.core.management.base import BaseCommand, CommandError

from inventory.models import Node
from monitoring.services import node_token_create


class Command(BaseCommand):
    help = "Create a push token for a node's telemetry agent; prints the key once."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("hostname")
        parser.add_argument("--name", default="agent")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            node = Node.objects.get(hostname=options["hostname"])
        except Node.DoesNotExist:
            raise CommandError(f"no node {options['hostname']!r} in the inventory") from None
        _token, key = node_token_create(node=node, user=None, name=options["name"])
        self.stdout.write(key)
