"""The jobs app's live parts: where jobs and actions go, the job and action lists' sockets, the
node operations table's socket, and the signals (sync, action changes) that feed the coalescer.
Registered with :mod:`portal.live.registry` by ``JobsConfig.ready``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.template.loader import render_to_string

from portal.live import groups, push, registry
from portal.live.consumers import LiveConsumer


# -- routing ---------------------------------------------------------------------------------------
def route(batch: registry.Batch, routes: registry.Routes) -> None:
    """Jobs: every-job listeners, the cluster, the owner, the nodes the job runs on. Actions: the
    same, and the node acted on (its page and the node operations table)."""
    from jobs.models import Action, Job

    actions = list(
        Action.objects.filter(pk__any=set(batch.get("action", ()))).values_list(
            "pk", "cluster_id", "node_id", "requested_by_id", "job_id"
        )
    )
    job_ids = set(batch.get("job", ())) | {a[4] for a in actions if a[4] is not None}
    jobs = list(Job.objects.filter(pk__any=job_ids).values_list("pk", "cluster_id", "owner_id", "node_names"))
    job_nodes = _job_nodes(jobs)
    for pk, cluster_id, owner_id, _names in jobs:
        routes.add(groups.ALL_JOBS, "job", pk)
        routes.add(groups.cluster(cluster_id), "job", pk)
        if owner_id is not None:
            routes.add(groups.user(owner_id), "job", pk)
        for node_id in job_nodes.get(pk, ()):
            routes.add(groups.node(node_id), "job", pk)
    for action_id, cluster_id, node_id, user_id, _job in actions:
        routes.add(groups.ALL_JOBS, "action", action_id)
        routes.add(groups.cluster(cluster_id), "action", action_id)
        if user_id is not None:
            routes.add(groups.user(user_id), "action", action_id)
        if node_id is not None:
            routes.add(groups.node(node_id), "action", action_id)


def _job_nodes(jobs: Sequence[tuple[int, int, int | None, str]]) -> dict[int, list[int]]:
    """Inventory node pks each job runs on (``node_names`` is ",a,b," of Slurm names)."""
    from inventory.models import Node

    wanted = {(c, name) for _pk, c, _o, names in jobs for name in names.strip(",").split(",") if name}
    if not wanted:
        return {}
    by_name: dict[tuple[int, str], int] = {}
    for pk, cluster_id, slurm_name, hostname in Node.objects.filter(
        cluster_id__in={c for c, _ in wanted}
    ).values_list("pk", "cluster_id", "slurm_name", "hostname"):
        by_name[(cluster_id, slurm_name or hostname.split(".")[0])] = pk
    out: dict[int, list[int]] = {}
    for pk, cluster_id, _o, names in jobs:
        out[pk] = [
            by_name[(cluster_id, n)] for n in names.strip(",").split(",") if n and (cluster_id, n) in by_name
        ]
    return out


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


# -- node operations -------------------------------------------------------------------------------
class NodeOpsConsumer(LiveConsumer):
    """The node operations table: a node's row is re-sent when the node (a sync, telemetry), its
    actions or its alerts change, and only when the row as rendered changed (per socket). The
    socket's query is the page's filters: rows the page does not show are never sent."""

    view = "nodeops"
    permission = "jobs.operate_nodes"

    def setup(self) -> bool:
        from inventory.models import Cluster

        self.live_groups = [groups.cluster(pk) for pk in Cluster.objects.values_list("pk", flat=True)]
        self.sent: dict[int, str] = {}  # node pk -> the row this socket has now
        return True

    def render_key(self) -> tuple[Any, ...]:
        return (self.query.urlencode(),)

    def _nodes(self) -> Any:
        from jobs import page_selectors as ps

        return ps.NodeOpsFilterSet(self.query or None, queryset=ps.node_ops_list()).qs

    def snapshot(self) -> dict[int, str]:
        from jobs.views import node_row_html

        rows = {node.pk: node_row_html(node).strip() for node in self._nodes()}
        return rows or {0: render_to_string("jobs/node_ops.html#node-rows-empty").strip()}

    def update(self, ids: dict[str, list[Any]]) -> dict[int, str]:
        from jobs.models import Action
        from jobs.views import node_row_html
        from monitoring.models import Alert

        node_ids = set(ids.get("node", ()))
        if ids.get("action"):
            node_ids |= set(
                Action.objects.filter(pk__in=ids["action"], node__isnull=False).values_list(
                    "node_id", flat=True
                )
            )
        if ids.get("alert"):
            node_ids |= set(Alert.objects.filter(pk__in=ids["alert"]).values_list("node_id", flat=True))
        if not node_ids:
            return {}
        return {node.pk: node_row_html(node).strip() for node in self._nodes().filter(pk__in=node_ids)}

    def frames(self, rendered: Any, status: str, *, snapshot: bool = False) -> list[str]:
        # table rows never share a frame with other elements: the HTML parser would drop them
        rows: dict[int, str] = rendered or {}
        if snapshot:
            self.sent = dict(rows)
            return [status, f'<tbody id="node-rows">{"".join(rows.values())}</tbody>']
        changed = [row for pk, row in rows.items() if self.sent.get(pk) != row]
        self.sent.update(rows)
        return [status, "".join(changed)] if changed else []


# -- signals ---------------------------------------------------------------------------------------
def on_cluster_synced(*, cluster: Any = None, node_ids: Any = (), job_ids: Any = (), **_: Any) -> None:
    push.mark_many({"node": node_ids, "job": job_ids, "cluster": [cluster.pk] if cluster is not None else []})


def on_action_changed(*, action_ids: Any = (), **_: Any) -> None:
    push.mark_changed("action", action_ids)


def register() -> None:
    from jobs.services import action_changed
    from jobs.sync import cluster_synced

    registry.register(
        kinds=("job", "action"),
        router=route,
        websockets={"ws/live/jobs/": JobsConsumer, "ws/live/nodeops/": NodeOpsConsumer},
    )
    cluster_synced.connect(on_cluster_synced, dispatch_uid="live.cluster_synced")
    action_changed.connect(on_action_changed, dispatch_uid="live.action_changed")
