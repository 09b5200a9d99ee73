"""drf-spectacular hooks."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


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
