"""Websocket consumers of the live pages (thin: permissions, groups, snapshot, re-render on events).

Every consumer rejects anonymous users, joins only the groups its user may hear, sends a full
snapshot of what the page shows on connect (delivery is at-most-once), and on each ``live.changed``
group event re-reads the changed rows through the selectors with the socket user's scope and sends
the page's own fragments, swapped by element id by htmx's websocket extension. Consumers never write.

Rendering is shared: sockets of one process that receive the same event and render the same
"view" await one render (:func:`shared_render`). The overview is not rendered here at all when
the event carries its finished ``frames`` (rendered once by the pushing process): consumers
forward the frame of their variant.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from functools import partial
from http.cookies import SimpleCookie
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.http import QueryDict
from django.template.loader import render_to_string
from django.utils import translation
from django.utils.translation import get_supported_language_variant
from django.utils.translation.trans_real import parse_accept_lang_header

from portal.live import groups, push, watchdog
from portal.live.fragments import overview_variant, render_overview, status_html

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

    def snapshot(self) -> str:
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


# -- cluster overview ----------------------------------------------------------------------------------
class OverviewConsumer(LiveConsumer):
    view = "overview"
    shared_snapshots = True

    def setup(self) -> bool:
        self.with_alerts = self.user.has_perm("monitoring.view_alert")
        self.live_groups = [groups.OVERVIEW]
        return True

    def render_key(self) -> tuple[Any, ...]:
        return (self.with_alerts,)

    async def live_changed(self, event: dict[str, Any]) -> None:
        frame = event.get("frames", {}).get(overview_variant(self.with_alerts, self.language))
        if frame is None:  # an event without rendered frames: render here (once per process)
            await super().live_changed(event)
        else:
            await self.send(text_data=frame)

    def snapshot(self) -> str:
        return render_overview(None, with_alerts=self.with_alerts)

    def update(self, ids: dict[str, list[Any]]) -> str:
        cluster_ids = ids.get("cluster")
        return render_overview(cluster_ids, with_alerts=self.with_alerts) if cluster_ids else ""


# -- rack thermal map -------------------------------------------------------------------------------------
class RackConsumer(LiveConsumer):
    view = "rack"
    permission = "inventory.view_rack"
    shared_snapshots = True

    def setup(self) -> bool:
        from inventory.models import Rack

        self.rack_id = int(self.scope["url_route"]["kwargs"]["pk"])
        if not Rack.objects.filter(pk=self.rack_id).exists():
            return False
        self.live_groups = [groups.rack(self.rack_id)]
        return True

    def render_key(self) -> tuple[Any, ...]:
        return (self.rack_id,)

    def snapshot(self) -> str:
        from monitoring.overview import node_thermal_list

        return render_to_string(
            "live/rack_thermal_nodes.html",
            {"rack_id": self.rack_id, "nodes": node_thermal_list(rack_id=self.rack_id)},
        )

    def update(self, ids: dict[str, list[Any]]) -> str:
        from inventory.models import Card
        from monitoring.overview import node_thermal_list

        node_ids = set(ids.get("node", ())) | set(
            Card.objects.filter(pk__in=ids.get("card", ())).values_list("node_id", flat=True)
        )
        if not node_ids:
            return ""
        nodes = node_thermal_list(node_ids=node_ids, rack_id=self.rack_id)
        return "".join(render_to_string("live/thermal_node.html", {"t": t}) for t in nodes)


# -- fabric drawing ----------------------------------------------------------------------------------------
#: {fabric pk: the link states this process last pushed}: telemetry that changes no link is not re-drawn
_fabric_links: dict[int, dict[int, bool]] = {}


class FabricConsumer(LiveConsumer):
    """The fabric page's drawing, re-drawn when a member's link telemetry (``link_up``) changes."""

    view = "fabric"
    permission = "inventory.view_fabric"
    shared_snapshots = True

    def setup(self) -> bool:
        from inventory.models import Fabric

        self.fabric_id = int(self.scope["url_route"]["kwargs"]["pk"])
        if not Fabric.objects.filter(pk=self.fabric_id).exists():
            return False
        self.live_groups = [groups.fabric(self.fabric_id)]
        return True

    def render_key(self) -> tuple[Any, ...]:
        return (self.fabric_id,)

    def snapshot(self) -> str:
        return self._draw(only_if_changed=False)

    def update(self, ids: dict[str, list[Any]]) -> str:
        return self._draw(only_if_changed=True)

    def _draw(self, *, only_if_changed: bool) -> str:
        from inventory.models import Fabric
        from inventory.topology.check import check
        from inventory.topology.data import fabric_data
        from portal.live.fragments import fabric_drawing, fabric_links

        fabric = Fabric.objects.filter(pk=self.fabric_id).first()
        if fabric is None:
            return ""
        data = fabric_data(fabric)
        links = fabric_links(data)
        if only_if_changed:
            if _fabric_links.get(self.fabric_id) == links:
                return ""
            _fabric_links[self.fabric_id] = links
        return fabric_drawing(self.fabric_id, data, check(data), links)


# -- node page -------------------------------------------------------------------------------------------
class NodeConsumer(LiveConsumer):
    """Latest points for the charts, the cards' thermal cells, the node's jobs and actions."""

    view = "node"
    permission = "inventory.view_node"

    def setup(self) -> bool:
        from inventory.models import Node
        from jobs.selectors import can_see_all_jobs

        self.node_id = int(self.scope["url_route"]["kwargs"]["pk"])
        if not Node.objects.filter(pk=self.node_id).exists():
            return False
        self.see_all = can_see_all_jobs(self.user) or self.user.has_perm("jobs.operate_nodes")
        self.live_groups = [groups.node(self.node_id)]
        return True

    def render_key(self) -> tuple[Any, ...]:
        # the node's telemetry is the same for everyone; jobs and actions are the user's own
        # unless they may see all of them
        return (self.node_id, "all" if self.see_all else self.user.pk)

    def snapshot(self) -> str:
        return self._render(telemetry=True, activity=True)

    def update(self, ids: dict[str, list[Any]]) -> str:
        telemetry = bool(ids.get("node") or ids.get("card") or ids.get("alert"))
        activity = bool(ids.get("job") or ids.get("action"))
        return self._render(telemetry=telemetry, activity=activity)

    def _render(self, *, telemetry: bool, activity: bool) -> str:
        from monitoring.overview import node_latest_points, node_thermal_list

        parts = []
        if telemetry:
            thermal = node_thermal_list(node_ids=[self.node_id])
            parts.append(
                render_to_string(
                    "live/node_latest.html",
                    {
                        "node_id": self.node_id,
                        "points": node_latest_points(self.node_id),
                        "t": thermal[0] if thermal else None,
                    },
                )  # fmt: skip
            )
        if activity:
            parts.append(
                render_to_string("live/node_activity.html", node_activity_context(self.node_id, self.user))
            )
        return "".join(parts)


def node_activity_context(node_id: int, user: Any) -> dict[str, Any]:
    """The node's active and recent jobs and its recent actions, as ``user`` may see them."""
    from inventory.models import Node
    from jobs.selectors import action_list, job_list

    node = Node.objects.get(pk=node_id)
    name = node.slurm_name or node.hostname.split(".")[0]
    jobs = job_list(user=user).filter(cluster=node.cluster, node_names__contains=f",{name},")[:10]
    actions = action_list(user=user).filter(node_id=node_id)[:5]
    return {"node_id": node_id, "jobs": list(jobs), "actions": list(actions)}


# -- job queue, my jobs, actions -------------------------------------------------------------------------
class JobsConsumer(LiveConsumer):
    """``?view=jobs`` (job list rows, with the page's own filters), ``view=actions`` (action list
    rows), ``view=action&id=<uuid>`` (one action card). Users who may see every job join the
    "jobs" group; others only their own user group, and every row is re-read in their scope."""

    view = "jobs"
    permission = "jobs.view_job"

    def setup(self) -> bool:
        from jobs.selectors import can_see_all_jobs

        self.page = self.query.get("view", "jobs")
        if self.page not in ("jobs", "actions", "action"):
            return False
        self.see_all = can_see_all_jobs(self.user)
        self.scope_all = self.page != "jobs" or (self.query.get("scope") == "all" and self.see_all)
        self.action_id = self.query.get("id", "")
        self.known: set[Any] = set()
        if self.page == "action" and not self._visible_actions([self.action_id]):
            return False
        self.live_groups = [groups.ALL_JOBS if self.see_all else groups.user(self.user.pk)]
        return True

    def render_key(self) -> tuple[Any, ...]:
        # rows depend on the filters and on the user (cancel buttons, scope)
        return (self.page, self.query.urlencode(), self.user.pk)

    # -- reads
    def _job_queryset(self) -> Any:
        from jobs import page_selectors as ps

        scope = "all" if self.scope_all else "mine"
        return ps.JobPageFilterSet(
            self.query or None, queryset=ps.job_page_list(user=self.user, scope=scope)
        ).qs

    def _visible_actions(self, ids: Iterable[Any]) -> list[Any]:
        from jobs.selectors import action_list

        try:
            return list(action_list(user=self.user).filter(pk__in=[i for i in ids if i]))
        except Exception:  # a malformed uuid
            return []

    def _page_number(self) -> int:
        try:
            return max(1, int(self.query.get("page", "1")))
        except ValueError:
            return 1

    # -- renders
    def snapshot(self) -> str:
        from django.core.paginator import Paginator

        from jobs.views import action_card_html, job_row_html

        if self.page == "action":
            return "".join(action_card_html(a) for a in self._visible_actions([self.action_id]))
        if self.page == "actions":
            from jobs.selectors import action_list

            actions = Paginator(action_list(user=self.user), 50).get_page(self._page_number()).object_list
            self.known = {str(a.pk) for a in actions}
            rows = "".join(
                render_to_string("jobs/action_list.html#action-row", {"action": a}) for a in actions
            )
            return f'<tbody id="action-rows">{rows}</tbody>' if rows else ""
        page = Paginator(self._job_queryset(), 50).get_page(self._page_number())
        self.known = {j.pk for j in page.object_list}
        rows = "".join(job_row_html(j, self.user, show_user=self.scope_all) for j in page.object_list)
        return f'<tbody id="job-rows">{rows}</tbody>' if rows else ""

    def update(self, ids: dict[str, list[Any]]) -> dict[Any, str | None]:
        """{row id: its html, or None when no longer shown}; turned into frames per socket."""
        from jobs.views import action_card_html, job_row_html

        if self.page == "jobs":
            changed = ids.get("job", [])
            if not changed:
                return {}
            shown = {j.pk: j for j in self._job_queryset().filter(pk__in=changed)}
            return {pk: job_row_html(shown[pk], self.user, show_user=self.scope_all).strip() if pk in shown else None
                    for pk in changed}  # fmt: skip
        action_ids = ids.get("action", [])
        if self.page == "action":
            action_ids = [a for a in action_ids if str(a) == self.action_id]
        visible = self._visible_actions(action_ids)
        if self.page == "action":
            return {str(a.pk): action_card_html(a) for a in visible}
        return {
            str(a.pk): render_to_string("jobs/action_list.html#action-row", {"action": a}).strip()
            for a in visible
        }

    def frames(self, rendered: Any, status: str, *, snapshot: bool = False) -> list[str]:
        # table rows never share a frame with other elements: the HTML parser would drop them
        if snapshot or self.page == "action":
            body = rendered if isinstance(rendered, str) else "".join((rendered or {}).values())
            return [status, body] if body else ([status] if snapshot else [])
        if not rendered:
            return []
        container = "#job-rows" if self.page == "jobs" else "#action-rows"
        prefix, suffix = ("job-", "") if self.page == "jobs" else ("action-", "-row")
        rows, new = [], []
        for pk, row in rendered.items():
            if row is None:
                if pk in self.known:
                    rows.append(f'<tr id="{prefix}{pk}{suffix}" hx-swap-oob="delete"></tr>')
                    self.known.discard(pk)
            elif pk in self.known:
                rows.append(row)
            elif self._page_number() == 1:
                new.append(row)
                self.known.add(pk)
        out = [status] if rows or new else []
        if rows:
            out.append("".join(rows))
        if new:
            out.append(f'<tbody hx-swap-oob="afterbegin:{container}">{"".join(new)}</tbody>')
        return out


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
