"""Node push tokens: `Authorization: Token rpn_…` authenticates a node's agent for ingest only."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from monitoring.models import NodeToken
from monitoring.services import node_token_authenticate


class NodeTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Token"

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).split()
        if len(header) != 2 or header[0].lower() != b"token":
            return None
        key = header[1].decode(errors="replace")
        if not key.startswith(NodeToken.PREFIX):
            return None  # a user API token: the next authentication class handles it
        token = node_token_authenticate(key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked node token.")
        return AnonymousUser(), token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
