"""The audit log page: every change and action, filterable; admins only (portal.view_auditentry)."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import QuerySet
from django.urls import NoReverseMatch, reverse
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.text import capfirst
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from portal.filters import AuditEntryFilterSet
from portal.models import AuditEntry
from portal.templatetags.portal_format import MISSING, at, exact
from portal.views.generic import Column, ObjectListView

MAX_CHANGED_FIELDS = 8


def audit_entry_list() -> QuerySet[AuditEntry]:
    return AuditEntry.objects.select_related("content_type").order_by("-ts", "-id")


def _field_of(entry: AuditEntry, key: str) -> models.Field[Any, Any] | None:
    ct = entry.content_type
    model = ct.model_class() if ct is not None else None
    if model is None:
        return None
    for field in model._meta.concrete_fields:
        if key in (field.attname, field.name):
            return field
    return None


def _label(entry: AuditEntry, key: str) -> str:
    """The field's verbose name, in the catalogue's language also where the model gives none."""
    field = _field_of(entry, key)
    name = str(field.verbose_name) if field is not None else key.replace("_", " ")
    return capfirst(gettext(name))


def _value(entry: AuditEntry, key: str, value: Any) -> str:
    """A stored JSON value as a person reads it: choice labels, times in the language's format, "—"."""
    if value is None or value == "" or value == [] or value == {}:
        return MISSING
    field = _field_of(entry, key)
    if isinstance(value, bool):
        return str(_("yes")) if value else str(_("no"))
    if field is not None and field.choices:
        return str(dict(field.flatchoices).get(value, value))
    if field is not None and field.is_relation:
        return f"#{value}"
    if isinstance(value, str) and isinstance(field, models.DateTimeField | models.DateField):
        parsed = parse_datetime(value) or parse_date(value)
        if parsed is not None:
            return exact(parsed)
    if isinstance(value, dict):
        text = ", ".join(f"{gettext(k.replace('_', ' '))}: {_value(entry, '', v)}" for k, v in value.items())
    elif isinstance(value, list):
        text = ", ".join(_value(entry, "", v) for v in value)
    else:
        text = gettext(str(value))  # a stored system message ("No cards.") is in the catalogue
    return text if len(text) <= 80 else text[:79] + "…"


def _noise(entry: AuditEntry, key: str) -> bool:
    """Bookkeeping a person does not need in the log: automatic timestamps and who-saved columns."""
    field = _field_of(entry, key)
    if field is None:
        return False
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        return True
    return field.name in ("id", "updated_by", "created_by")


def audit_object(entry: AuditEntry) -> SafeString | str:
    if not entry.object_repr:
        return MISSING
    ct = entry.content_type
    if ct is not None and entry.action != AuditEntry.Action.DELETE:
        try:
            url = reverse(f"{ct.app_label}:{ct.model}", kwargs={"pk": entry.object_id})
        except NoReverseMatch:
            url = ""
        if url:
            return format_html('<a href="{}">{}</a>', url, entry.object_repr)
    return entry.object_repr


def audit_changes(entry: AuditEntry) -> SafeString | str:
    """A table of changed fields, labelled: `Field | before → after` (a create or delete shows one side)."""
    before, after = entry.before or {}, entry.after or {}
    keys = [k for k in dict.fromkeys([*after, *before]) if not _noise(entry, k)]
    if entry.action == AuditEntry.Action.UPDATE:
        keys = [k for k in keys if before.get(k) != after.get(k)]
    else:
        side = after if entry.action != AuditEntry.Action.DELETE else before
        keys = [k for k in keys if _value(entry, k, side.get(k)) != MISSING]
    message = format_html("<p>{}</p>", entry.message) if entry.message else ""
    if not keys:
        return message or MISSING
    rows = [
        (
            _label(entry, k),
            _value(entry, k, before[k]) if k in before else "",
            _value(entry, k, after[k]) if k in after else "",
        )
        for k in keys[:MAX_CHANGED_FIELDS]
    ]
    body = format_html_join(
        "", '<tr><th scope="row">{}</th><td><del>{}</del></td><td>→</td><td><ins>{}</ins></td></tr>', rows
    )
    more = len(keys) - MAX_CHANGED_FIELDS
    tail = (
        format_html(
            '<tr><td colspan="4" class="muted">{}</td></tr>',
            ngettext("and %(n)s more field", "and %(n)s more fields", more) % {"n": more},
        )
        if more > 0
        else ""
    )
    # folded: a page of entries reads as one line each; the fields open on a click
    summary = entry.message or ngettext("%(n)s field", "%(n)s fields", len(keys)) % {"n": len(keys)}
    return format_html(
        '<details class="changes"><summary>{}</summary><table class="changes">{}{}</table></details>',
        summary,
        body,
        tail,
    )


def _model(entry: AuditEntry) -> str:
    ct = entry.content_type
    model = ct.model_class() if ct is not None else None
    return capfirst(gettext(str(model._meta.verbose_name))) if model is not None else MISSING


class AuditListView(ObjectListView):
    model = AuditEntry
    queryset = audit_entry_list
    filterset_class = AuditEntryFilterSet
    template_name = "portal/audit_list.html"
    title = _("Audit log")  # type: ignore[assignment]  # lazy, rendered per request
    per_page = 25
    columns = [
        Column(_("When"), render=lambda e: at(e.ts), order_by="ts"),
        Column(_("User"), "username", order_by="username"),
        Column(_("Action"), "action", order_by="action"),
        Column(_("Type"), render=_model),
        Column(_("Object"), render=audit_object),
        Column(_("Changes"), render=audit_changes),
    ]
