"""Serializer bases: a compact representation for related objects, brief mode, service-backed writes."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.db import models
from django.urls import NoReverseMatch, reverse
from rest_framework import serializers

from portal.roles import INFRASTRUCTURE_PERM

SENTINEL_PK = 987654321


@lru_cache(maxsize=256)
def _detail_url_template(view_name: str) -> str | None:
    try:
        return reverse(view_name, kwargs={"pk": SENTINEL_PK}).replace(str(SENTINEL_PK), "{pk}")
    except NoReverseMatch:
        return None


def api_view_name(model: type[models.Model]) -> str:
    meta = model._meta
    return f"api:{meta.app_label}:{meta.model_name}-detail"


def object_url(obj: models.Model, request: Any = None) -> str | None:
    return object_url_for(type(obj), obj.pk, request)


def object_url_for(model: type[models.Model], pk: Any, request: Any = None) -> str | None:
    template = _detail_url_template(api_view_name(model))
    if template is None:
        return None
    path = template.format(pk=pk)
    if request is not None:
        base = getattr(request, "_portal_base_url", None)
        if base is None:
            base = request.build_absolute_uri("/").rstrip("/")
            request._portal_base_url = base
        return f"{base}{path}"
    return path


def brief(obj: models.Model | None, request: Any = None) -> dict[str, Any] | None:
    if obj is None:
        return None
    return {"id": obj.pk, "url": object_url(obj, request), "display": str(obj)}


class BriefRelatedField(serializers.PrimaryKeyRelatedField):
    """Writes take the related id; reads give `{id, url, display}` of the related row."""

    def use_pk_only_optimization(self) -> bool:
        return False

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            data = data.get("id")
        return super().to_internal_value(data)

    def to_representation(self, value: Any) -> Any:
        return brief(value, self.context.get("request"))

    def get_choices(self, cutoff: int | None = None) -> dict[Any, str]:
        # keyed by id: the representation is a dict, which cannot be a key (a TypeError in any
        # HTML form of the field, e.g. DRF's browsable API)
        queryset = self.get_queryset()
        if queryset is None:
            return {}
        if cutoff is not None:
            queryset = queryset[:cutoff]
        return {item.pk: self.display_value(item) for item in queryset}


def may_see_infrastructure(request: Any) -> bool:
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated and user.has_perm(INFRASTRUCTURE_PERM))


class PortalModelSerializer(serializers.ModelSerializer):
    """Adds `url` and `display`; honours `?fields=a,b` to return only some fields.

    `Meta.infrastructure_fields` names the fields that say how the portal reaches the hardware
    (SSH host, account, keys, BMC): they are left out, in reads and writes, for a user without
    `inventory.see_infrastructure` (researchers), and are optional in the schema
    (portal.api.schema.infrastructure_fields_optional).
    """

    serializer_related_field = BriefRelatedField
    url = serializers.SerializerMethodField()
    display = serializers.SerializerMethodField()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        wanted = (
            request.query_params.get("fields")
            if request is not None and hasattr(request, "query_params")
            else None
        )
        if wanted:
            keep = {f.strip() for f in wanted.split(",") if f.strip()} | {"id"}
            for name in list(self.fields):
                if name not in keep:
                    self.fields.pop(name)
        hidden = getattr(getattr(self, "Meta", None), "infrastructure_fields", ())
        if hidden and not may_see_infrastructure(request):
            for name in hidden:
                self.fields.pop(name, None)

    def get_url(self, obj: models.Model) -> str | None:
        return object_url(obj, self.context.get("request"))

    def get_display(self, obj: models.Model) -> str:
        return str(obj)

    def get_validators(self) -> list[Any]:
        # Unique and check constraints are validated by the model (full_clean in the service),
        # which also knows conditional constraints; DRF's copies would make optional fields required.
        return []


def brief_serializer_for(model: type[models.Model]) -> type[serializers.Serializer]:
    """`?brief=1`: id, url, display and the natural name field."""

    class Brief(serializers.Serializer):
        id = serializers.IntegerField(read_only=True)
        url = serializers.SerializerMethodField()
        display = serializers.SerializerMethodField()

        def get_url(self, obj: models.Model) -> str | None:
            return object_url(obj, self.context.get("request"))

        def get_display(self, obj: models.Model) -> str:
            return str(obj)

    Brief.__name__ = f"Brief{model.__name__}Serializer"
    return Brief
