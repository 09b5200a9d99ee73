"""Push tokens: `Authorization: Token rpn_…` (a node's agent) or `Token rpc_…` (a cluster's
Prometheus) authenticate for ingest only."""

from __future__ import annotations

from typing import Any, ClassVar

from django.contrib.auth.models import AnonymousUser
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from monitoring.models import ClusterToken, NodeToken, PushToken
from monitoring.services import push_token_authenticate


class NodeTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Token"
    token_models: ClassVar[tuple[type[PushToken], ...]] = (NodeToken,)

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).split()
        if len(header) != 2 or header[0].lower() != b"token":
            return None
        key = header[1].decode(errors="replace")
        for model in self.token_models:
            if key.startswith(model.PREFIX):
                token = push_token_authenticate(key, model)
                if token is None:
                    raise exceptions.AuthenticationFailed("Invalid or revoked push token.")
                return AnonymousUser(), token
        return None  # a user API token: the next authentication class handles it

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class PushTokenAuthentication(NodeTokenAuthentication):
    """Node or cluster tokens (the remote-write endpoint)."""

    token_models = (NodeToken, ClusterToken)
