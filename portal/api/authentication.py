from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from portal.models import APIToken
from portal.services import api_token_authenticate


def token_scope_check(request: Request, token: APIToken) -> None:
    """A read-only token never writes: every unsafe method is refused (403) whatever the view's
    permission classes say, so a view that replaces the default permissions cannot forget it."""
    if not token.write_enabled and request.method not in permissions.SAFE_METHODS:
        raise exceptions.PermissionDenied(
            _("This API token is read-only: %(method)s is refused. Create a token that allows writes.")
            % {"method": request.method}
        )


class TokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Token <key>`; keys are stored hashed (portal.models.APIToken).

    The token's scope is enforced here, where every API view authenticates it (token_scope_check).
    """

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
        token_scope_check(request, token)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
