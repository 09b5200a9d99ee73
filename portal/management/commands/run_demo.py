"""``manage.py run_demo``: migrate, seed, create the demo users, then serve the portal with the
simulation running in the same process (``scripts/demo`` calls this with portal.settings.demo)."""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


class Command(BaseCommand):
    help = "Run the one-command demo: migrate, seed, users, simulation and the ASGI server."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("DEMO_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("DEMO_PORT", "8000")))
        parser.add_argument("--no-simulation", action="store_true", help="serve the seeded data only")
        parser.add_argument("--tick", type=float, default=float(os.environ.get("DEMO_TICK", "2")))

    def handle(self, *args: Any, **opts: Any) -> None:
        import uvicorn

        demo_dir = getattr(settings, "DEMO_DIR", None)
        if demo_dir is None:
            raise CommandError(
                "run_demo needs DJANGO_SETTINGS_MODULE=portal.settings.demo (use scripts/demo)."
            )
        Path(demo_dir).mkdir(parents=True, exist_ok=True)
        Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
        self.stdout.write("Preparing the database (migrate, seed)...")
        call_command("migrate", interactive=False, verbosity=0)
        call_command("seed_demo", verbosity=0)
        from portal.demo.accounts import demo_users_ensure

        creds = demo_users_ensure(Path(demo_dir) / "credentials.json")
        os.environ["DEMO_SIMULATION"] = "0" if opts["no_simulation"] else "1"
        os.environ["DEMO_TICK"] = str(opts["tick"])
        url = f"http://{opts['host']}:{opts['port']}"
        self.stdout.write(
            self.style.SUCCESS(f"\nRackpilot demo: {url}\n")
            + f"  admin       login: admin       password: {creds['admin']}\n"
            + f"  researcher  login: researcher  password: {creds['researcher']}\n"
            + "  (demo passwords, kept in .demo/credentials.json; never use this mode in production)\n"
            + "  Ctrl-C stops it; the next run reuses the database.\n",
        )
        self.stdout.flush()
        from portal.asgi import application
        from portal.demo.asgi import SimulationLifespan

        app = SimulationLifespan(application, interval=opts["tick"])
        config = uvicorn.Config(app, host=opts["host"], port=opts["port"], lifespan="on", log_level="info",
                                ws_ping_interval=20, proxy_headers=False)  # fmt: skip
        # proxy_headers off: uvicorn would believe X-Forwarded-For from any local peer; the portal
        # reads it itself, only from PORTAL_TRUSTED_PROXIES (portal.clientip)
        server = uvicorn.Server(config)
        # uvicorn re-raises the signal it caught once it has shut down: both end here, cleanly
        signal.signal(signal.SIGTERM, _interrupt)
        faulthandler.register(signal.SIGUSR1)  # `kill -USR1 <pid>` prints every thread's stack
        with contextlib.suppress(KeyboardInterrupt):
            server.run()
        if not server.started:
            raise CommandError(f"The server did not start (is {opts['host']}:{opts['port']} in use?).")
        self.stdout.write("Rackpilot demo stopped.")
