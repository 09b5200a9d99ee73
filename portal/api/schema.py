"""The OpenAPI schema: authentication schemes, related objects split into request (id) and response
(brief object), and the error responses every operation can give (400 with field errors, 401, 403, 404).

drf-spectacular finds the extensions below when this module is imported (it is the project's
DEFAULT_SCHEMA_CLASS, so it is imported before any schema is built). Per-view shapes stay next to the views
(`extend_schema` in each app's api/views.py).
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerFieldExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent, build_basic_type, get_doc
from drf_spectacular.types import OpenApiTypes
from rest_framework import serializers

# -- shared response bodies ---------------------------------------------------------------------------


class ErrorDetailSerializer(serializers.Serializer):
    """`{"detail": "..."}`: 401, 403, 404, 405, 413, 415 and 429 answers, and 400s without field errors."""

    detail = serializers.CharField()


class BriefSerializer(serializers.Serializer):
    """A related object as the API returns it: write its `id`, read `{id, url, display}`."""

    id = serializers.IntegerField()
    url = serializers.CharField(allow_null=True)
    display = serializers.CharField()


class CableEndSerializer(BriefSerializer):
    node = serializers.CharField()
    card = serializers.CharField(allow_null=True)


# -- authentication -----------------------------------------------------------------------------------


class TokenScheme(OpenApiAuthenticationExtension):
    target_class = "portal.api.authentication.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "A person's API token: `Authorization: Token <key>` "
            "(`manage.py create_token <user>` or /account/tokens/).",
        }


class NodeTokenScheme(OpenApiAuthenticationExtension):
    target_class = "monitoring.api.authentication.NodeTokenAuthentication"
    name = "nodeTokenAuth"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "A node push token, telemetry ingest only: `Authorization: Token rpn_<key>` "
            "(`manage.py telemetry_node_token <hostname>`); it may only send its own node's telemetry.",
        }


class PushTokenScheme(OpenApiAuthenticationExtension):
    target_class = "monitoring.api.authentication.PushTokenAuthentication"
    name = "pushTokenAuth"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "A cluster push token (`Authorization: Token rpc_<key>`, `manage.py "
            "telemetry_cluster_token <cluster>`: the cluster's nodes) or a node push token (`rpn_`: that node).",
        }


# -- related objects ----------------------------------------------------------------------------------


def _component(auto_schema: AutoSchema, serializer: type[serializers.Serializer]) -> dict[str, Any]:
    component = auto_schema.resolve_serializer(serializer(), "response")
    return component.ref


class BriefRelatedFieldExtension(OpenApiSerializerFieldExtension):
    """Requests send the related id (as the field's primary key type); responses read a brief object."""

    target_class = "portal.api.serializers.BriefRelatedField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: AutoSchema, direction: str) -> dict[str, Any]:
        if direction == "request":
            return auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        from inventory.api.serializers import CableEndField

        if isinstance(self.target, CableEndField):
            return _component(auto_schema, CableEndSerializer)
        return _component(auto_schema, BriefSerializer)


# -- error responses ----------------------------------------------------------------------------------

_FIELD_ERRORS = {"type": "array", "items": {"type": "string"}}


def _pascal(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^0-9A-Za-z]+", name) if part)


class PortalAutoSchema(AutoSchema):
    """Adds the error answers to every operation: 400 (field errors, named per request body), 401, 403,
    404 (operations on one object) - unless the view declares its own."""

    def get_description(self) -> str:  # type: ignore[override]
        # the view's own docstring only: the bases' ones are written for developers
        action_or_method = getattr(self.view, getattr(self.view, "action", self.method.lower()), None)
        own = type(self.view).__dict__.get("__doc__")
        return get_doc(action_or_method) or (get_doc(type(self.view)) if own else "")

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        detail = self._get_response_for_code(ErrorDetailSerializer, "400", direction=direction)
        if "400" not in responses and self._accepts_input():
            responses["400"] = self._validation_error_response()
        if self._needs_auth():
            responses.setdefault("401", {**detail, "description": "Not authenticated."})
        responses.setdefault("403", {**detail, "description": "Not allowed."})
        if "{" in self.path:
            responses.setdefault("404", {**detail, "description": "Not found."})
        return responses

    def _needs_auth(self) -> bool:
        return bool(self.view.get_authenticators())

    def _accepts_input(self) -> bool:
        if self.method in ("POST", "PUT", "PATCH", "DELETE"):  # DELETE: a row still in use
            return True
        return bool(self._get_filter_parameters() or self.get_override_parameters())

    def _validation_error_response(self) -> dict[str, Any]:
        request = self.get_request_serializer() if self.method in ("POST", "PUT", "PATCH") else None
        request = request() if isinstance(request, type) else request
        properties: dict[str, Any] = {
            "non_field_errors": _FIELD_ERRORS,
            "detail": build_basic_type(OpenApiTypes.STR),
        }
        name = "ValidationError"
        if isinstance(request, serializers.Serializer):
            base = self._get_serializer_name(request, "request")
            name = f"{base}ValidationError"
            for field_name, field in request.fields.items():
                if field.read_only:
                    continue
                nested = isinstance(field, serializers.BaseSerializer | serializers.DictField)
                properties[field_name] = {} if nested else _FIELD_ERRORS
            if "detail" in request.fields:  # a field named like the unreadable-body message: either one
                properties["detail"] = {"oneOf": [build_basic_type(OpenApiTypes.STR), _FIELD_ERRORS]}
        component = ResolvedComponent(
            name=name,
            type=ResolvedComponent.SCHEMA,
            object=name,
            schema={
                "type": "object",
                "description": "The reasons, per field (`non_field_errors` for the object as a whole, "
                "`detail` for a body that could not be read). Nothing was written.",
                "properties": properties,
                "additionalProperties": {},
            },
        )
        self.registry.register_on_missing(component)
        return {
            "content": {"application/json": {"schema": component.ref}},
            "description": "Invalid input: nothing was written.",
        }


class SessionScheme(OpenApiAuthenticationExtension):
    target_class = "rest_framework.authentication.SessionAuthentication"
    name = "cookieAuth"
    priority = 1  # over drf-spectacular's own, to say what the cookie needs

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "cookie",
            "name": settings.SESSION_COOKIE_NAME,
            "description": "The portal's login session (browsers); writes also need the `X-CSRFToken` header.",
        }


# Query parameters where an empty value means "not given" (django-filter and the telemetry views skip
# it); limit, offset, step and group_by refuse it with a 400.
EMPTY_REFUSED = frozenset({"limit", "offset", "step", "group_by"})


def postprocess_empty_query_values(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Mark optional query parameters `allowEmptyValue` where the API reads `?x=` as no filter."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if (
                    parameter.get("in") == "query"
                    and not parameter.get("required")
                    and parameter["name"] not in EMPTY_REFUSED
                ):
                    parameter["allowEmptyValue"] = True
    return result


# -- infrastructure fields (auth hardening) ----------------------------------------------------------


def _all_subclasses(cls: type) -> list[type]:
    out: list[type] = []
    sub: type
    for sub in cls.__subclasses__():
        out += [sub, *_all_subclasses(sub)]
    return out


def infrastructure_fields_optional(result: dict[str, Any], generator: Any, request: Any, public: bool) -> Any:
    """Infrastructure fields (Meta.infrastructure_fields) are absent for researchers: never `required`
    in any component of their serializer, and each says who sees it."""
    from portal.api.serializers import PortalModelSerializer

    schemas = result.get("components", {}).get("schemas", {})
    for cls in _all_subclasses(PortalModelSerializer):
        hidden = getattr(getattr(cls, "Meta", None), "infrastructure_fields", ())
        if not hidden or not issubclass(cls, serializers.Serializer):
            continue
        base = cls.__name__.removesuffix("Serializer")
        for name in (base, f"{base}Request", f"Patched{base}", f"Patched{base}Request"):
            component = schemas.get(name)
            if not component:
                continue
            if "required" in component:
                component["required"] = [f for f in component["required"] if f not in hidden]
                if not component["required"]:
                    del component["required"]
            for field in hidden:
                prop = component.get("properties", {}).get(field)
                if prop is not None and "$ref" not in prop:
                    note = "Only for admins and operators (inventory.see_infrastructure); absent otherwise."
                    prop["description"] = f"{prop['description']} {note}" if prop.get("description") else note
    return result
