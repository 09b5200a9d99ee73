"""Small declarative view classes for lists, details, forms and deletes (NetBox-style).

A concrete view names its queryset (a selector), FilterSet, columns and form; permissions are the
model's Django permissions, the same ones the API checks. htmx requests get the partial only.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin, PermissionRequiredMixin
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db import models
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import capfirst
from django.utils.translation import gettext as _
from django.views import View
from django_stubs_ext import StrOrPromise

from portal.services import instance_delete, instance_save
from portal.templatetags.portal_format import at


def _resolve(obj: Any, accessor: str) -> Any:
    for part in accessor.split("."):
        if obj is None:
            return None
        obj = getattr(obj, part)
        if callable(obj) and not isinstance(obj, models.Model):
            obj = obj()
    return obj


def object_page_url(obj: models.Model) -> str | None:
    meta = obj._meta
    try:
        return reverse(f"{meta.app_label}:{meta.model_name}", kwargs={"pk": obj.pk})
    except NoReverseMatch:
        return None


@dataclass
class Column:
    header: StrOrPromise
    accessor: str = ""
    render: Callable[[Any], Any] | None = None
    link: bool = False
    order_by: str = ""
    # a value filter of portal_format (watts, money, ...) applied to a present value
    fmt: Callable[[Any], Any] | None = None
    perm: str = ""  # shown only to users with this permission (e.g. infrastructure details)

    def visible_to(self, user: Any) -> bool:
        return not self.perm or bool(user.has_perm(self.perm))

    def cell(self, obj: Any) -> SafeString | str:
        value = self.render(obj) if self.render else _resolve(obj, self.accessor)
        if value is not None and value != "" and self.fmt is not None:
            value = self.fmt(value)
        if isinstance(value, models.Model):
            url = object_page_url(value)
            return format_html('<a href="{}">{}</a>', url, value) if url else str(value)
        if isinstance(value, bool):
            return "✓" if value else "—"
        if value is None or value == "":
            return "—"
        if isinstance(value, dt.datetime | dt.date):
            return at(value)
        if hasattr(obj, f"get_{self.accessor}_display") and "." not in self.accessor:
            value = getattr(obj, f"get_{self.accessor}_display")()
        if self.link:
            url = object_page_url(obj)
            if url:
                return format_html('<a href="{}">{}</a>', url, value)
        return value if isinstance(value, SafeString) else str(value)


class PortalPermissionMixin(LoginRequiredMixin, PermissionRequiredMixin):
    model: type[models.Model]
    request: Any
    action = "view"
    raise_exception = False

    def get_permission_required(self) -> Sequence[str]:
        meta = self.model._meta
        return [f"{meta.app_label}.{self.action}_{meta.model_name}"]

    def handle_no_permission(self) -> Any:
        if self.request.user.is_authenticated:
            return render(self.request, "403.html", status=403)
        return super().handle_no_permission()


class ObjectListView(PortalPermissionMixin, View):
    queryset: Callable[[], models.QuerySet[Any]]
    filterset_class: Any = None
    columns: Sequence[Column] = ()
    template_name = "portal/object_list.html"
    title = ""
    per_page = 50
    bulk_actions: Sequence[tuple[str, str]] = ()

    def get_queryset(self) -> models.QuerySet[Any]:
        return type(self).queryset()

    def get(self, request: Any) -> HttpResponse:
        qs = self.get_queryset()
        filterset = self.filterset_class(request.GET or None, queryset=qs) if self.filterset_class else None
        if filterset is not None:
            qs = filterset.qs
        ordering = request.GET.get("sort", "")
        allowed = {c.order_by for c in self.columns if c.order_by}
        if ordering.lstrip("-") in allowed:
            qs = qs.order_by(ordering)
        try:
            per_page = max(1, min(int(request.GET.get("per_page", self.per_page)), 1000))
        except ValueError:
            per_page = self.per_page
        page = Paginator(qs, per_page).get_page(request.GET.get("page"))
        columns = [c for c in self.columns if c.visible_to(request.user)]
        rows = [(obj, [c.cell(obj) for c in columns]) for obj in page.object_list]
        meta = self.model._meta
        context = {
            "title": self.title or capfirst(str(meta.verbose_name_plural)),
            "columns": columns,
            "rows": rows,
            "page": page,
            "filter_form": filterset.form if filterset is not None else None,
            "add_url": self._add_url(),
            "bulk_actions": self.bulk_actions,
            "sort": ordering,
            "query": request.GET.copy(),
            **self.extra_context(),
        }
        template = self.template_name
        if request.htmx and not request.htmx.boosted:
            template = f"{template}#table"
        return render(request, template, context)

    def extra_context(self) -> dict[str, Any]:
        return {}

    def _add_url(self) -> str | None:
        meta = self.model._meta
        if not self.request.user.has_perm(f"{meta.app_label}.add_{meta.model_name}"):
            return None
        try:
            return reverse(f"{meta.app_label}:{meta.model_name}_add")
        except NoReverseMatch:
            return None


class ObjectDetailView(PortalPermissionMixin, View):
    queryset: Callable[[], models.QuerySet[Any]]
    template_name = "portal/object_detail.html"
    fields: Sequence[Column] = ()

    def get_object(self, pk: int) -> Any:
        return get_object_or_404(type(self).queryset(), pk=pk)

    def get(self, request: Any, pk: int) -> HttpResponse:
        obj = self.get_object(pk)
        meta = self.model._meta
        user = request.user
        context = {
            "object": obj,
            "title": str(obj),
            "verbose_name": meta.verbose_name,
            "properties": [(c.header, c.cell(obj)) for c in self.fields if c.visible_to(user)],
            "edit_url": self._url("edit", obj)
            if user.has_perm(f"{meta.app_label}.change_{meta.model_name}")
            else None,
            "delete_url": self._url("delete", obj)
            if user.has_perm(f"{meta.app_label}.delete_{meta.model_name}")
            else None,
            **self.extra_context(obj),
        }
        return render(request, self.template_name, context)

    def extra_context(self, obj: Any) -> dict[str, Any]:
        return {}

    def _url(self, action: str, obj: Any) -> str | None:
        meta = self.model._meta
        try:
            return reverse(f"{meta.app_label}:{meta.model_name}_{action}", kwargs={"pk": obj.pk})
        except NoReverseMatch:
            return None


class ObjectEditView(PortalPermissionMixin, View):
    """Create (no pk) or edit. Saves through a service; model validation errors land on the form."""

    form_class: type[forms.ModelForm[Any]]
    template_name = "portal/object_edit.html"

    def get_permission_required(self) -> Sequence[str]:
        meta = self.model._meta
        verb = "change" if self.kwargs.get("pk") else "add"
        return [f"{meta.app_label}.{verb}_{meta.model_name}"]

    def get_instance(self, pk: int | None) -> models.Model:
        return get_object_or_404(self.model, pk=pk) if pk else self.model()

    def save(self, form: forms.ModelForm[Any]) -> models.Model:
        return instance_save(form.instance, user=self.request.user)

    def _render(
        self, request: Any, form: forms.ModelForm[Any], instance: models.Model, status: int = 200
    ) -> HttpResponse:
        template = self.template_name
        if request.htmx and not request.htmx.boosted:
            template = f"{template}#form"
        return render(
            request,
            template,
            {
                "form": form,
                "object": instance,
                "title": str(instance)
                if instance.pk
                else _("Add %(name)s") % {"name": self.model._meta.verbose_name},
            },
            status=status,
        )

    def get(self, request: Any, pk: int | None = None) -> HttpResponse:
        instance = self.get_instance(pk)
        return self._render(request, self.form_class(instance=instance, initial=request.GET.dict()), instance)

    def post(self, request: Any, pk: int | None = None) -> HttpResponse:
        instance = self.get_instance(pk)
        form = self.form_class(request.POST, instance=instance)
        if form.is_valid():
            try:
                obj = self.save(form)
            except ValidationError as exc:
                _add_errors(form, exc)
            else:
                messages.success(request, _("Saved %(obj)s.") % {"obj": obj})
                return redirect_after_post(request, object_page_url(obj) or "/")
        return self._render(request, form, instance, status=400 if request.htmx else 200)


def redirect_after_post(request: Any, url: str) -> HttpResponse:
    """Where a successful form post goes: htmx follows ``HX-Redirect`` (204), a plain post a 302."""
    if getattr(request, "htmx", False):
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    return HttpResponseRedirect(url)


def _add_errors(form: forms.BaseForm, exc: ValidationError) -> None:
    if hasattr(exc, "error_dict"):
        for field, errors in exc.message_dict.items():
            form.add_error(field if field in form.fields else None, errors)
    else:
        form.add_error(None, exc.messages)


class ObjectDeleteView(PortalPermissionMixin, View):
    action = "delete"
    template_name = "portal/object_delete.html"
    success_url = "/"

    def get(self, request: Any, pk: int) -> HttpResponse:
        obj = get_object_or_404(self.model, pk=pk)
        return render(
            request, self.template_name, {"object": obj, "title": _("Delete %(obj)s") % {"obj": obj}}
        )

    def post(self, request: Any, pk: int) -> HttpResponse:
        obj = get_object_or_404(self.model, pk=pk)
        try:
            instance_delete(obj, user=request.user)
        except ValidationError as exc:
            return render(
                request,
                self.template_name,
                {"object": obj, "title": _("Delete %(obj)s") % {"obj": obj}, "errors": exc.messages},
                status=400,
            )
        messages.success(request, _("Deleted %(obj)s.") % {"obj": obj})
        return HttpResponseRedirect(self.success_url)
