"""The base viewset: writes go through services (validation + audit), bulk create is all or nothing."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models, transaction
from rest_framework import serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from portal.api.exceptions import validation_detail
from portal.api.serializers import brief_serializer_for
from portal.services import instance_delete, instance_save


class PortalModelViewSet(viewsets.ModelViewSet):
    """CRUD with brief mode (`?brief=1`), `?fields=`, list-body bulk create, audited service writes.

    Subclasses may override `perform_write(instance, data)` to call a domain service instead of the
    generic validated save.
    """

    brief_queryset_only: bool = True

    @property
    def model_class(self) -> type[models.Model]:
        return super().get_queryset().model

    @property
    def is_brief(self) -> bool:
        return self.request is not None and self.request.query_params.get("brief") in {"1", "true", "True"}

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:
        if self.is_brief and self.request.method == "GET":
            return brief_serializer_for(self.model_class)
        return super().get_serializer_class()

    def get_queryset(self) -> models.QuerySet[Any]:
        qs = super().get_queryset()
        if self.is_brief and self.brief_queryset_only:
            # brief output reads only the row itself (str() must not touch relations)
            qs = qs.select_related(None).prefetch_related(None)
        return qs

    # -- writes ---------------------------------------------------------------------------
    def build_instance(self, data: dict[str, Any], instance: models.Model | None = None) -> models.Model:
        model = self.model_class
        m2m = (
            {
                k: data.pop(k)
                for k in list(data)
                if isinstance(model._meta.get_field(k), models.ManyToManyField)
            }
            if data
            else {}
        )
        obj = instance if instance is not None else model()
        for key, value in data.items():
            setattr(obj, key, value)
        obj._portal_m2m = m2m  # type: ignore[attr-defined]
        return obj

    def perform_write(self, instance: models.Model) -> models.Model:
        saved = instance_save(instance, user=self.request.user)
        for key, value in getattr(instance, "_portal_m2m", {}).items():  # noqa: B009
            getattr(saved, key).set(value)
        return saved

    def reread(self, instance: models.Model) -> models.Model:
        """The written row as GET returns it: through the selector, with its annotations (counts)."""
        return self.get_queryset().get(pk=instance.pk)

    def perform_create(self, serializer: serializers.BaseSerializer) -> None:
        serializer.instance = self.reread(
            self.perform_write(self.build_instance(dict(serializer.validated_data)))
        )

    def perform_update(self, serializer: serializers.BaseSerializer) -> None:
        serializer.instance = self.reread(
            self.perform_write(
                self.build_instance(dict(serializer.validated_data), instance=serializer.instance)
            )
        )

    def perform_destroy(self, instance: models.Model) -> None:
        instance_delete(instance, user=self.request.user)

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if not isinstance(request.data, list):
            return super().create(request, *args, **kwargs)
        # Bulk create: every item validated and saved in one transaction, or nothing at all.
        serializer = self.get_serializer(data=request.data, many=True)
        serializer.is_valid(raise_exception=True)
        errors: list[Any] = []
        created: list[models.Model] = []
        with transaction.atomic():
            for item in serializer.validated_data:
                try:
                    created.append(self.perform_write(self.build_instance(dict(item))))
                    errors.append({})
                except DjangoValidationError as exc:
                    errors.append(validation_detail(exc))
            if any(errors):
                transaction.set_rollback(True)
                return Response(errors, status=status.HTTP_400_BAD_REQUEST)
        rows = self.get_queryset().in_bulk([obj.pk for obj in created])
        out = self.get_serializer([rows[obj.pk] for obj in created], many=True)
        return Response(out.data, status=status.HTTP_201_CREATED)
