"""The base of every live page's websocket consumer (thin: permissions, groups, snapshot,
re-render on events). The consumers themselves live with the app that owns their page
(``<app>/live.py``) and are routed through :mod:`portal.live.registry`.

Every consumer rejects anonymous users, joins only the groups its user may hear, sends a full
snapshot of what the page shows on connect (delivery is at-most-once), and on each ``live.changed``
group event re-reads the changed rows through the selectors with the socket user's scope and sends
the page's own fragments, swapped by element id by htmx's websocket extension. Consumers never write.

Rendering is shared: sockets of one process that receive the same event and render the same
"view" await one render (:func:`shared_render`). A summary (the overview) is not rendered by its
consumers at all when the event carries its finished ``frames`` (rendered once by the pushing
process): they forward the frame of their variant.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from http.cookies import SimpleCookie
from typing import Any

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.http import QueryDict
from django.utils import translation
from django.utils.translation import get_supported_language_variant
from django.utils.translation.trans_real import parse_accept_lang_header

from portal.live import push, watchdog
from portal.live.fragments import status_html

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403

_renders: OrderedDict[tuple[Any, ...], asyncio.Future[Any]] = OrderedDict()
_RENDERS_KEPT = 512


async def shared_render(key: tuple[Any, ...], render: Callable[[], Any]) -> Any:
    """Run ``render`` (sync, may read the database) once per key in this process; concurrent
    and later callers with the same key get the same result."""
    fut = _renders.get(key)
    if fut is None:
        fut = asyncio.get_running_loop().create_future()
        _renders[key] = fut
        while len(_renders) > _RENDERS_KEPT:
            _renders.popitem(last=False)
        try:
            fut.set_result(await database_sync_to_async(render)())
        except BaseException as exc:
            _renders.pop(key, None)
            fut.set_exception(exc)
            raise
    return await asyncio.shield(fut)


_snapshots: dict[tuple[Any, ...], tuple[float, asyncio.Future[Any]]] = {}
SNAPSHOT_REUSE_S = 2.0


async def shared_snapshot(key: tuple[Any, ...], since: float, render: Callable[[], Any]) -> Any:
    """A snapshot render shared by the sockets of one key: reuse one that STARTED at or after
    ``since`` (the sockets were already in their groups then, so they miss no later event),
    within ``SNAPSHOT_REUSE_S``; otherwise start one. The watchdog's periodic refresh of every
    overview socket costs one render per variant per process instead of one per socket."""
    now = time.monotonic()
    for k in [k for k, (started, _f) in _snapshots.items() if now - started > SNAPSHOT_REUSE_S]:
        _snapshots.pop(k, None)
    entry = _snapshots.get(key)
    if entry is None or entry[0] < since:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        entry = (now, fut)
        _snapshots[key] = entry
        try:
            fut.set_result(await database_sync_to_async(render)())
        except BaseException as exc:
            if _snapshots.get(key) is entry:
                _snapshots.pop(key, None)
            fut.set_exception(exc)
            raise
    return await asyncio.shield(entry[1])


def scope_language(scope: dict[str, Any]) -> str:
    """The language of the page that opened the socket: the language cookie (the switch), else the
    browser's Accept-Language, else the default, as LocaleMiddleware chose it for the page."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
    cookies = SimpleCookie(headers.get("cookie", ""))
    candidates = []
    if settings.LANGUAGE_COOKIE_NAME in cookies:
        candidates.append(cookies[settings.LANGUAGE_COOKIE_NAME].value)
    candidates += [lang for lang, _q in parse_accept_lang_header(headers.get("accept-language", ""))]
    for candidate in candidates:
        try:
            return get_supported_language_variant(candidate)
        except LookupError:
            continue
    return settings.LANGUAGE_CODE


class LiveConsumer(AsyncWebsocketConsumer):
    """Base: subclasses set ``view`` and implement setup/snapshot/update (sync, in a thread)."""

    view = ""
    permission = ""
    #: snapshots depend only on ``view`` + :meth:`render_key` (no per-socket state): share them
    shared_snapshots = False
    #: the watchdog re-sends this socket a snapshot every PORTAL_LIVE_OVERVIEW_REFRESH_S (pages
    #: whose staleness warnings depend on the clock)
    periodic_snapshot = False

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.user = user
        self.language = scope_language(self.scope)
        self.query = QueryDict(self.scope.get("query_string", b"").decode("latin-1"))
        self.live_groups: list[str] = []
        allowed = await database_sync_to_async(self._setup)()
        if not allowed:
            await self.close(code=CLOSE_FORBIDDEN)
            return
        push.coalescer.server_loop = asyncio.get_running_loop()
        for group in self.live_groups:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        watchdog.register(self)
        await self.send_snapshot()

    def _setup(self) -> bool:
        if self.permission and not self.user.has_perm(self.permission):
            return False
        return self.setup()

    async def disconnect(self, code: int) -> None:
        watchdog.unregister(self)
        for group in getattr(self, "live_groups", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Consumers make no writes: anything the browser sends is ignored."""

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch without its hop to the sync thread before every message
        (``aclose_old_connections``): the hops of all the sockets of a process queue for that one
        thread, so one overview event to 200 sockets waited for 200 of them. These consumers reach
        the database only through ``database_sync_to_async``, which closes stale connections itself
        before and after each call."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def send_snapshot(self, since: float | None = None) -> None:
        """Send a full snapshot; ``since`` (monotonic time the socket was in its groups by)
        lets sockets of a shareable view reuse a render started after it."""
        snapshot = partial(self.in_language, self.snapshot)
        if since is not None and self.shared_snapshots:
            body = await shared_snapshot((self.view, self.language, *self.render_key()), since, snapshot)
        else:
            body = await database_sync_to_async(snapshot)()
        status = self.in_language(status_html, "snapshot")  # "live" in the page's language
        for frame in self.frames(body, status, snapshot=True):
            await self.send(text_data=frame)

    async def live_resync(self, event: dict[str, Any]) -> None:
        """A push to one of this socket's groups was lost (push.py): send a fresh snapshot."""
        await self.send_snapshot(since=time.monotonic())

    async def live_changed(self, event: dict[str, Any]) -> None:
        ids = event.get("ids", {})
        key = (event.get("seq"), self.view, self.language, *self.render_key())
        rendered = await shared_render(key, lambda: self.in_language(self.update, ids))
        status = self.in_language(status_html, event.get("seq", ""), event.get("ts"))
        for frame in self.frames(rendered, status):
            await self.send(text_data=frame)

    def in_language(self, render: Callable[..., Any], *args: Any) -> Any:
        """Render as the socket's page was rendered: in its user's language."""
        with translation.override(self.language):
            return render(*args)

    # -- for subclasses (sync ones run in a worker thread) -----------------------------------------
    def setup(self) -> bool:
        """Check object permissions, set ``live_groups``; False rejects the socket."""
        raise NotImplementedError

    def snapshot(self) -> Any:
        """What :meth:`frames` turns into the snapshot's frames (a fragment, or rows by id)."""
        raise NotImplementedError

    def render_key(self) -> tuple[Any, ...]:
        """What the rendered update depends on besides the event (sockets sharing it share renders)."""
        return ()

    def update(self, ids: dict[str, list[Any]]) -> Any:
        raise NotImplementedError

    def frames(self, rendered: Any, status: str, *, snapshot: bool = False) -> list[str]:
        """The websocket frames for one snapshot or update (none when nothing shown changed)."""
        body = str(rendered or "")
        return [status + body] if body or snapshot else []


# -- benchmark baseline ------------------------------------------------------------------------------
class BareFanoutConsumer(AsyncWebsocketConsumer):
    """A plain group member that forwards each event's timestamp (benchmarks/live_push.py only:
    routed when PORTAL_LIVE_BENCH is set)."""

    async def connect(self) -> None:
        await self.channel_layer.group_add("bench.bare", self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard("bench.bare", self.channel_name)

    async def bench_ping(self, event: dict[str, Any]) -> None:
        await self.send(text_data=f'<span id="bench" data-ts="{event["ts"]:.6f}"></span>')
