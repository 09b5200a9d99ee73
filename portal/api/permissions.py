from __future__ import annotations

from typing import Any

from rest_framework import permissions
from rest_framework.request import Request

from portal.models import APIToken


class ModelPermissions(permissions.DjangoModelPermissions):
    """Django model permissions, reads included: a user needs `view_<model>` to list or retrieve.

    A read-only API token refuses every write whatever its user may do (checked where the token is
    authenticated, portal.api.authentication.token_scope_check, and again here and in HasPerm so
    that a permission class used with another authentication keeps the rule).
    """

    perms_map = {
        "GET": ["%(app_label)s.view_%(model_name)s"],
        "OPTIONS": [],
        "HEAD": ["%(app_label)s.view_%(model_name)s"],
        "POST": ["%(app_label)s.add_%(model_name)s"],
        "PUT": ["%(app_label)s.change_%(model_name)s"],
        "PATCH": ["%(app_label)s.change_%(model_name)s"],
        "DELETE": ["%(app_label)s.delete_%(model_name)s"],
    }

    def has_permission(self, request: Request, view: Any) -> bool:
        if (
            isinstance(request.auth, APIToken)
            and not request.auth.write_enabled
            and request.method not in permissions.SAFE_METHODS
        ):
            return False
        return super().has_permission(request, view)


class HasPerm(permissions.BasePermission):
    """Require one named permission, e.g. `HasPerm.of("jobs.operate_nodes")`."""

    perm = ""

    @classmethod
    def of(cls, perm: str) -> type[HasPerm]:
        return type(f"HasPerm_{perm.replace('.', '_')}", (cls,), {"perm": perm})

    def has_permission(self, request: Request, view: Any) -> bool:
        if (
            isinstance(request.auth, APIToken)
            and not request.auth.write_enabled
            and request.method not in permissions.SAFE_METHODS
        ):
            return False
        user = request.user
        return bool(user and user.is_authenticated and user.has_perm(self.perm))
