"""The audit log page: every change and action, filterable; admins only (portal.view_auditentry)."""

from __future__ import annotations

import json
from typing import Any

from django.db.models import QuerySet
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from portal.filters import AuditEntryFilterSet
from portal.models import AuditEntry
from portal.views.generic import Column, ObjectListView

MAX_CHANGED_FIELDS = 8


def audit_entry_list() -> QuerySet[AuditEntry]:
    return AuditEntry.objects.select_related("content_type").order_by("-ts", "-id")


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:59] + "…"


def audit_object(entry: AuditEntry) -> SafeString | str:
    if not entry.object_repr:
        return "—"
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
    """`field: before → after` for each changed field (a create or delete shows one side)."""
    before, after = entry.before or {}, entry.after or {}
    keys = list(dict.fromkeys([*after, *before]))
    if not keys:
        return entry.message or "—"
    rows = [
        (k, _short(before[k]) if k in before else "", _short(after[k]) if k in after else "")
        for k in keys[:MAX_CHANGED_FIELDS]
    ]
    body = format_html_join("", "<li><code>{}</code>: <del>{}</del> → <ins>{}</ins></li>", rows)
    more = len(keys) - MAX_CHANGED_FIELDS
    tail = format_html("<li class='muted'>… {}</li>", more) if more > 0 else ""
    message = format_html("<p>{}</p>", entry.message) if entry.message else ""
    return format_html('{}<ul class="changes">{}{}</ul>', message, body, tail)


def _model(entry: AuditEntry) -> str:
    ct = entry.content_type
    return f"{ct.app_label}.{ct.model}" if ct is not None else "—"


class AuditListView(ObjectListView):
    model = AuditEntry
    queryset = audit_entry_list
    filterset_class = AuditEntryFilterSet
    template_name = "portal/audit_list.html"
    title = _("Audit log")  # type: ignore[assignment]  # lazy, rendered per request
    columns = [
        Column(_("When"), "ts", order_by="ts"),
        Column(_("User"), "username", order_by="username"),
        Column(_("Action"), "action", order_by="action"),
        Column(_("Type"), render=_model),
        Column(_("Object"), render=audit_object),
        Column(_("Changes"), render=audit_changes),
    ]
