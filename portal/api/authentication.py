from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from portal.services import api_token_authenticate


class TokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Token <key>`; keys are stored hashed (portal.models.APIToken)."""

    keyword = "Token"

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(_("Invalid token header: expected 'Token <key>'."))
        try:
            key = header[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed(_("Invalid token header."))
        token = api_token_authenticate(key)
        if token is None:
            raise exceptions.AuthenticationFailed(_("Invalid, expired or revoked token."))
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
