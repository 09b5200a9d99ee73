"""The compose stack's telemetry feeder: simulated node agents posting raw tool output over HTTP.

It plays the agents of ``docs``/README "node agents": one node token per node (monitoring's token
model), ``POST /api/monitoring/ingest/?format=<tool>&node=<hostname>`` with the tool's output as the
body. Card load follows the Slurm state the worker synced (NodeState.gpus_alloc); nodes no Slurm
reports get a slow deterministic day/night load so their charts move too.
"""

from __future__ import annotations

import logging
import math
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.utils import timezone

from inventory.models import Node
from monitoring.models import NodeToken
from monitoring.services import node_token_create
from portal.demo.nodes import NodeSim, node_sims, physics_step

logger = logging.getLogger(__name__)

TOKEN_NAME = "rackpilot-feeder"
#: (status, body) of one POST; raise OSError when the server cannot be reached
Sender = Callable[[str, bytes, dict[str, str]], tuple[int, str]]


def http_send(url: str, body: bytes, headers: dict[str, str], *, timeout: float = 15.0) -> tuple[int, str]:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"not an http(s) URL: {url}")
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310 - checked above
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def wait_ready(base_url: str, *, attempts: int = 60, delay: float = 2.0) -> bool:
    """Wait for ``/healthz`` to answer 200."""
    for _ in range(attempts):
        try:
            with urllib.request.urlopen(f"{base_url.rstrip('/')}/healthz", timeout=5) as resp:  # noqa: S310
                if resp.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(delay)
    return False


@dataclass
class Feeder:
    base_url: str
    send: Sender = http_send
    seed: int = 0
    nodes: list[NodeSim] = field(default_factory=list)
    tokens: dict[int, str] = field(default_factory=dict)  # node id -> clear key
    elapsed: float = 0.0

    def setup(self) -> None:
        """Build the simulated nodes and give each its own push token (older feeder tokens go)."""
        self.nodes = node_sims(seed=self.seed)
        NodeToken.objects.filter(name=TOKEN_NAME).delete()
        for node in self.nodes:
            _token, key = node_token_create(
                node=Node.objects.get(pk=node.node_id), user=None, name=TOKEN_NAME
            )
            self.tokens[node.node_id] = key

    def day_load(self) -> float:
        """A slow wave between 10% and 90% of the cards (a 20-minute 'day')."""
        return 0.5 + 0.4 * math.sin(2 * math.pi * self.elapsed / 1200.0)

    def round(self, dt: float) -> dict[str, int]:
        """Advance ``dt`` seconds and post every live node's output; returns {hostname: HTTP status}."""
        self.elapsed += dt
        down = physics_step(self.nodes, dt, fallback_load=self.day_load())
        now = timezone.now()
        statuses: dict[str, int] = {}
        for node in self.nodes:
            if node.node_id in down:
                continue
            query = urlencode({"format": node.fmt, "node": node.hostname})
            url = f"{self.base_url.rstrip('/')}/api/monitoring/ingest/?{query}"
            headers = {"Authorization": f"Token {self.tokens[node.node_id]}", "Content-Type": "text/plain"}
            try:
                status, text = self.send(url, node.render(now).encode(), headers)
            except OSError as exc:
                logger.warning("feeder: %s: %s", node.hostname, exc)
                statuses[node.hostname] = 0
                continue
            if status != 202:
                logger.warning("feeder: %s answered %s: %s", node.hostname, status, text[:500])
            statuses[node.hostname] = status
        return statuses
