from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _
from rest_framework import pagination, serializers
from rest_framework.request import Request


class LimitOffsetPagination(pagination.LimitOffsetPagination):
    """`count`, `next`, `previous`, `results`; default 50 rows, at most 1000.

    A `limit` or `offset` that is not one whole number is a 400 (DRF would silently use the default).
    """

    default_limit = 50
    max_limit = 1000

    def _number(self, request: Request, name: str, *, minimum: int) -> int | None:
        values = request.query_params.getlist(name)
        if not values:
            return None
        value = values[0]
        if len(values) > 1 or not value.isdigit() or int(value) < minimum:
            raise serializers.ValidationError(
                {name: [_("A whole number, at least %(min)d, given once.") % {"min": minimum}]}
            )
        return int(value)

    def get_limit(self, request: Request) -> Any:
        limit = self._number(request, self.limit_query_param, minimum=1)
        if limit is None:
            return self.default_limit
        return min(limit, self.max_limit) if self.max_limit else limit

    def get_offset(self, request: Request) -> int:
        return self._number(request, self.offset_query_param, minimum=0) or 0

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters: list[dict[str, Any]] = super().get_schema_operation_parameters(view)
        bounds = {
            self.limit_query_param: {"minimum": 1},
            self.offset_query_param: {"minimum": 0},
        }
        for parameter in parameters:
            parameter["schema"].update(bounds.get(parameter["name"], {}))
            if parameter["name"] == self.limit_query_param:
                parameter["description"] = (
                    f"Rows per page: {self.default_limit} unless given, at most {self.max_limit}."
                )
        return parameters
