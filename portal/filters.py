"""FilterSets of the shared core, used alike by the HTML pages and the API."""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

import django_filters as df
from django import forms
from django.contrib.contenttypes.models import ContentType
from django.db.models import Q, QuerySet
from django.utils.translation import gettext_lazy as _

from portal.models import AuditEntry

_DATE = forms.DateInput(attrs={"type": "date"})


class AnyYesNo(forms.NullBooleanSelect):
    """A yes/no filter's select: "(any)" where Django writes "Unknown" (a filter left open reads as
    "Connected: Unknown" otherwise)."""

    def __init__(self, attrs: Any = None) -> None:
        super().__init__(attrs)
        self.choices = [("unknown", _("(any)")), ("true", _("Yes")), ("false", _("No"))]


class BooleanFilter(df.BooleanFilter):
    """The product's yes/no filter (its select offers "(any)", yes, no)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", AnyYesNo)
        super().__init__(*args, **kwargs)


class PortalFilterSet(df.FilterSet):
    """A FilterSet whose ``labels`` name its filters in the catalogue (a model field without a
    translated verbose name would otherwise show its English attribute name, "Requested by")."""

    labels: ClassVar[dict[str, Any]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, label in self.labels.items():
            if name in self.filters:
                self.filters[name].label = label


AUDITED_APPS = ("inventory", "jobs", "monitoring", "portal")


def audited_model_choices() -> list[tuple[str, str]]:
    cts = ContentType.objects.filter(app_label__in=AUDITED_APPS).order_by("app_label", "model")
    return [(f"{ct.app_label}.{ct.model}", f"{ct.app_label} · {ct.name}") for ct in cts]


class AuditEntryFilterSet(df.FilterSet):
    """`user` (user name), `action`, `model` (`app_label.model`), `object_id`, `since`/`until`
    (ISO date or date-time, inclusive) and `q` (object or message text)."""

    q = df.CharFilter(method="search", label=_("Search"))
    user = df.CharFilter(field_name="username", lookup_expr="iexact", label=_("User"))
    action = df.ChoiceFilter(choices=AuditEntry.Action.choices, label=_("Action"))
    model = df.ChoiceFilter(choices=audited_model_choices, method="filter_model", label=_("Object type"))
    object_id = df.CharFilter(label=_("Object id"))
    since = df.DateTimeFilter(field_name="ts", lookup_expr="gte", label=_("Since"), widget=_DATE)
    until = df.DateTimeFilter(method="filter_until", label=_("Until"), widget=_DATE)

    class Meta:
        model = AuditEntry
        fields = ["q", "user", "action", "model", "object_id", "since", "until"]

    def search(self, queryset: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        value = value.strip()
        if not value:
            return queryset
        return queryset.filter(Q(object_repr__icontains=value) | Q(message__icontains=value))

    def filter_model(self, queryset: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        app_label, _sep, model = value.partition(".")
        return queryset.filter(content_type__app_label=app_label, content_type__model=model)

    def filter_until(self, queryset: QuerySet[Any], name: str, value: dt.datetime) -> QuerySet[Any]:
        raw = str(self.data.get("until", ""))
        if "T" not in raw and " " not in raw.strip():  # a date: the whole day is included
            return queryset.filter(ts__lt=value + dt.timedelta(days=1))
        return queryset.filter(ts__lte=value)
