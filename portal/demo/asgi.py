"""The demo's ASGI application: the production one, plus an ASGI lifespan hook that runs the
simulation loop in the server's process, so the in-memory channel layer and the eager Celery tasks
reach the websocket consumers.

``uvicorn portal.demo.asgi:application --lifespan on`` (``manage.py run_demo`` does this).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.demo")

from asgiref.sync import SyncToAsync  # noqa: E402
from django.conf import settings  # noqa: E402
from django.db import close_old_connections, connections  # noqa: E402

from portal.asgi import application as portal_application  # noqa: E402

logger = logging.getLogger(__name__)


async def simulation_run(stop: asyncio.Event, *, interval: float) -> None:
    """Tick the simulation every ``interval`` seconds until ``stop`` is set.

    The blocking work runs in one dedicated thread (one database connection); the channel-layer
    sends it makes on commit are scheduled back onto this event loop by asgiref.
    """
    from portal.demo.simulation import DemoSimulation

    executor = ThreadPoolExecutor(1, thread_name_prefix="demo-sim")

    def in_thread(fn: Any, *args: Any) -> Any:
        return SyncToAsync(fn, thread_sensitive=False, executor=executor)(*args)

    sim = DemoSimulation(**getattr(settings, "PORTAL_DEMO_SIMULATION", {}))
    loop = asyncio.get_running_loop()
    try:
        await in_thread(sim.setup)
        last = loop.time()
        while not stop.is_set():
            now = loop.time()
            await in_thread(sim.tick, now - last)
            await in_thread(close_old_connections)
            last = now
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval)
    finally:
        await in_thread(connections.close_all)
        executor.shutdown(wait=True)


class SimulationLifespan:
    """Wraps an ASGI app; on lifespan startup starts the simulation, on shutdown stops it."""

    def __init__(self, app: Any, *, interval: float = 2.0) -> None:
        self.app = app
        self.interval = interval
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if os.environ.get("DEMO_SIMULATION", "1") != "0":
                    self._stop = asyncio.Event()
                    self._task = asyncio.create_task(simulation_run(self._stop, interval=self.interval))
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._stop is not None and self._task is not None:
                    self._stop.set()
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(self._task, timeout=30)
                await send({"type": "lifespan.shutdown.complete"})
                return


application = SimulationLifespan(portal_application, interval=float(os.environ.get("DEMO_TICK", "2")))
