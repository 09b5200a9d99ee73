from typing import Any

from django.core.management.base import BaseCommand

from inventory.seed import seed_demo


class Command(BaseCommand):
    help = "Create (idempotently) the three clusters of the field guides: rig-01, h100-pod, gb10-desk."

    def handle(self, *args: Any, **options: Any) -> None:
        clusters = seed_demo()
        from jobs.seed import jobs_seed_templates

        jobs_seed_templates()
        self.stdout.write(self.style.SUCCESS("Seeded: " + ", ".join(c.name for c in clusters)))
