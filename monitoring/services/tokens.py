"""Node push tokens: one per agent, hashed, shown once."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from inventory.models import Node
from monitoring.models import NodeToken, node_token_hash
from portal.models import AuditEntry
from portal.services import audit_record


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
def node_token_revoke(*, token: NodeToken, user: Any) -> None:
    audit_record(user=user, action=AuditEntry.Action.AUTH, instance=token, message="node token revoked")
    token.delete()


def node_token_authenticate(key: str) -> NodeToken | None:
    if not key.startswith(NodeToken.PREFIX):
        return None
    token = NodeToken.objects.select_related("node").filter(key_hash=node_token_hash(key)).first()
    if token is None:
        return None
    now = timezone.now()
    if token.last_used is None or (now - token.last_used).total_seconds() > 60:
        NodeToken.objects.filter(pk=token.pk).update(last_used=now)
    return token
