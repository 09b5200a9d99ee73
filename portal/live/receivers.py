"""Signal receivers: the apps' on-commit signals feed the coalescer (never render or send here)."""

from __future__ import annotations

from typing import Any

from portal.live.push import mark_changed, mark_many


def on_cluster_synced(*, cluster: Any = None, node_ids: Any = (), job_ids: Any = (), **_: Any) -> None:
    mark_many({"node": node_ids, "job": job_ids, "cluster": [cluster.pk] if cluster is not None else []})


def on_telemetry_ingested(*, node_ids: Any = (), card_ids: Any = (), alert_ids: Any = (), **_: Any) -> None:
    mark_many({"node": node_ids, "card": card_ids, "alert": alert_ids})


def on_action_changed(*, action_ids: Any = (), **_: Any) -> None:
    mark_changed("action", action_ids)


def connect() -> None:
    from jobs.services import action_changed
    from jobs.sync import cluster_synced
    from monitoring.signals import telemetry_ingested

    cluster_synced.connect(on_cluster_synced, dispatch_uid="live.cluster_synced")
    telemetry_ingested.connect(on_telemetry_ingested, dispatch_uid="live.telemetry_ingested")
    action_changed.connect(on_action_changed, dispatch_uid="live.action_changed")
