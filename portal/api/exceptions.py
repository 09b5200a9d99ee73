from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from portal.services import integrity_error_as_validation


def validation_detail(exc: DjangoValidationError) -> Any:
    if hasattr(exc, "error_dict"):
        detail: dict[str, Any] = {}
        for field, errors in exc.message_dict.items():
            detail["non_field_errors" if field == "__all__" else field] = errors
        return detail
    return {"non_field_errors": exc.messages}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Model validation and database constraint errors become 400s with field errors, never 500s."""
    if isinstance(exc, IntegrityError):
        exc = integrity_error_as_validation(exc)
    if isinstance(exc, DjangoValidationError):
        return Response(validation_detail(exc), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, exceptions.ParseError):
        return Response(
            {"detail": f"Malformed request body: {exc.detail}"}, status=status.HTTP_400_BAD_REQUEST
        )
    return drf_exception_handler(exc, context)
