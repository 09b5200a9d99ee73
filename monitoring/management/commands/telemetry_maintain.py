import datetime as dt
from typing import Any

from django.core.management.base import BaseCommand

from monitoring.services import telemetry_maintain, telemetry_rollup


class Command(BaseCommand):
    help = "Create partitions ahead, apply retention, relink cards; --rollup-hours N recomputes rollups."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--rollup-hours", type=int, default=0, help="recompute rollups of the last N hours"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(str(telemetry_maintain()))
        if options["rollup_hours"]:
            end = dt.datetime.now(dt.UTC)
            self.stdout.write(
                str(telemetry_rollup(start=end - dt.timedelta(hours=options["rollup_hours"]), end=end))
            )
