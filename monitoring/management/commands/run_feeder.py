"""``manage.py run_feeder``: the compose stack's simulated telemetry agents (portal.demo.feeder)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = (
        "Post simulated nvidia-smi / tt-smi / dcgm-exporter output to the ingest endpoint with node tokens."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default="http://127.0.0.1:8000", help="the portal's base URL")
        parser.add_argument("--interval", type=float, default=10.0, help="seconds between rounds")
        parser.add_argument("--once", action="store_true", help="post one round and exit")
        parser.add_argument(
            "--heartbeat",
            default="",
            help="touch this file after every round whose posts all succeeded (the container's health check)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        from portal.demo.feeder import Feeder, wait_ready

        if not wait_ready(opts["url"]):
            raise CommandError(f"{opts['url']}/healthz did not answer")
        feeder = Feeder(opts["url"])
        feeder.setup()
        self.stdout.write(f"feeding {len(feeder.nodes)} nodes to {opts['url']} every {opts['interval']:g} s")
        while True:
            started = time.monotonic()
            statuses = feeder.round(opts["interval"])
            failed = {h: s for h, s in statuses.items() if s != 202}
            self.stdout.write(
                f"posted {len(statuses) - len(failed)}/{len(statuses)}"
                + (f"; failed {failed}" if failed else "")
            )
            if not failed and opts["heartbeat"]:
                Path(opts["heartbeat"]).touch()
            if opts["once"]:
                if failed:
                    raise CommandError(f"some posts failed: {failed}")
                return
            time.sleep(max(0.0, opts["interval"] - (time.monotonic() - started)))
