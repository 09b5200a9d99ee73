"""The API's filter backend: django-filter, with a yes/no filter given something else refused (400),
and times compared in UTC.

django-filter reads `?enabled=maybe` as "no filter" and answers every row; a script that misspelt the
value would take the unfiltered answer for the filtered one.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import django_filters as df
from django.utils.translation import gettext as _
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import serializers

BOOLEAN_WORDS = frozenset({"", "true", "false", "True", "False", "1", "0"})


class FilterBackend(DjangoFilterBackend):
    def get_filterset(self, request: Any, queryset: Any, view: Any) -> Any:
        filterset = super().get_filterset(request, queryset, view)
        if filterset is not None:
            errors = {
                name: [_("Either true or false.")]
                for name, flt in filterset.filters.items()
                if isinstance(flt, df.BooleanFilter)
                and any(value not in BOOLEAN_WORDS for value in request.query_params.getlist(name))
            }
            if errors:
                raise serializers.ValidationError(errors)
            if filterset.is_valid():
                # ISO 8601 allows offsets PostgreSQL refuses (-21:31): compare in UTC
                data = filterset.form.cleaned_data
                for name, value in data.items():
                    if isinstance(value, dt.datetime) and value.tzinfo is not None:
                        data[name] = value.astimezone(dt.UTC)
        return filterset
