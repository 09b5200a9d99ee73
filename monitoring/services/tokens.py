"""Push tokens: one per node agent or per cluster (a Prometheus remote-writing), hashed, shown once."""

from __future__ import annotations

from typing import Any, TypeVar

from django.db import transaction
from django.utils import timezone

from inventory.models import Cluster, Node
from monitoring.models import ClusterToken, NodeToken, PushToken, node_token_hash
from portal.models import AuditEntry
from portal.services import audit_record

T = TypeVar("T", bound=PushToken)


@transaction.atomic
def node_token_create(*, node: Node, user: Any, name: str = "") -> tuple[NodeToken, str]:
    """Create a push token for ``node``; returns the row and the clear key (never stored)."""
    key = NodeToken.generate_key()
    token = NodeToken.objects.create(
        node=node, name=name or "agent", prefix=key[:12], key_hash=node_token_hash(key)
    )
    audit_record(
        user=user, action=AuditEntry.Action.AUTH, instance=token, message=f"node token created for {node}"
    )
    return token, key


@transaction.atomic
def cluster_token_create(*, cluster: Cluster, user: Any, name: str = "") -> tuple[ClusterToken, str]:
    """Create a push token for every node of ``cluster``; returns the row and the clear key."""
    key = ClusterToken.generate_key()
    token = ClusterToken.objects.create(
        cluster=cluster, name=name or "prometheus", prefix=key[:12], key_hash=node_token_hash(key)
    )
    audit_record(
        user=user,
        action=AuditEntry.Action.AUTH,
        instance=token,
        message=f"cluster token created for {cluster}",
    )
    return token, key


@transaction.atomic
def node_token_revoke(*, token: PushToken, user: Any) -> None:
    audit_record(user=user, action=AuditEntry.Action.AUTH, instance=token, message="push token revoked")
    token.delete()


def push_token_authenticate(key: str, model: type[T]) -> T | None:
    """The ``model`` token (NodeToken or ClusterToken) whose key this is, or None."""
    if not key.startswith(model.PREFIX):
        return None
    related = "node" if model is NodeToken else "cluster"
    token = model._default_manager.select_related(related).filter(key_hash=node_token_hash(key)).first()
    if token is None:
        return None
    now = timezone.now()
    if token.last_used is None or (now - token.last_used).total_seconds() > 60:
        model._default_manager.filter(pk=token.pk).update(last_used=now)
    return token


def node_token_authenticate(key: str) -> NodeToken | None:
    return push_token_authenticate(key, NodeToken)
