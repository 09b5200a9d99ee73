"""Channel-layer group names: "<entity>.<pk>" (cluster.3, node.17, user.5, rack.2, fabric.4) and
"overview"."""

from __future__ import annotations

#: the cluster summaries of the overview (counts only: every signed-in role may join it)
OVERVIEW = "overview"
#: every job and action (joined only by users who may see every user's jobs)
ALL_JOBS = "jobs"


def overview_variant(variant: str) -> str:
    """The presence group of the overview's sockets of one variant ("alerts:zh-hans" ->
    "overview-variant.alerts.zh-hans"): never sent to, listened to so that a flush knows which
    variants to render."""
    return "overview-variant." + variant.replace(":", ".")


def cluster(pk: int) -> str:
    return f"cluster.{pk}"


def rack(pk: int) -> str:
    return f"rack.{pk}"


def node(pk: int) -> str:
    return f"node.{pk}"


def fabric(pk: int) -> str:
    return f"fabric.{pk}"


def user(pk: int) -> str:
    return f"user.{pk}"
