"""Runbook pages: runbooks (admins edit), runs (list, one run with its steps, cancel / continue),
starting one on a node with a dry run first. Thin adapters over jobs.runbooks."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.html import format_html_join
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from inventory.models import Node
from jobs import runbooks, selectors
from jobs.models import Runbook, RunbookRun
from portal.templatetags.portal_format import ago
from portal.views.generic import Column, ObjectDetailView, ObjectEditView, ObjectListView


def _steps_text(runbook: Runbook) -> Any:
    """One line per step: what it does, its timeout, where it goes on failure."""
    lines = []
    for i, step in enumerate(runbook.steps, 1):
        parts = [str(runbooks.STEP_LABELS.get(step["do"], step["do"]))]
        if step.get("when"):
            parts.append(str(_("only if the node has a BMC")))
        if step.get("timeout_s"):
            parts.append(str(_("at most %(s)s s")) % {"s": step["timeout_s"]})
        if step.get("on_failure"):
            parts.append(str(_("on failure: %(next)s")) % {"next": step["on_failure"]})
        lines.append((i, step["id"], " · ".join(parts)))
    return format_html_join("", "<div>{}. <code>{}</code> {}</div>", lines)


class RunbookForm(forms.ModelForm[Runbook]):
    class Meta:
        model = Runbook
        fields = ["name", "description", "steps", "trigger_check_kinds", "enabled"]


class RunbookListView(ObjectListView):
    model = Runbook
    queryset = selectors.runbook_list
    title = _("Runbooks")  # type: ignore[assignment]
    columns = (
        Column(_("Name"), render=lambda r: r, order_by="name"),
        Column(_("Steps"), render=lambda r: len(r.steps)),
        Column(_("Enabled"), "enabled"),
    )


class RunbookView(ObjectDetailView):
    model = Runbook
    queryset = selectors.runbook_list
    fields = (
        Column(_("Name"), "name"),
        Column(_("Description"), "description"),
        Column(_("Steps"), render=_steps_text),
        Column(
            _("Started by failing health checks of kinds"),
            render=lambda r: ", ".join(r.trigger_check_kinds) or None,
        ),
        Column(_("Enabled"), "enabled"),
    )


class RunbookEditView(ObjectEditView):
    model = Runbook
    form_class = RunbookForm


class RunbookRunListView(ObjectListView):
    model = RunbookRun
    queryset = selectors.runbook_run_list
    title = _("Runbook runs")  # type: ignore[assignment]
    columns = (
        Column(_("Started"), render=lambda r: ago(r.created), order_by="created"),
        Column(_("Node"), "node"),
        Column(_("Runbook"), "runbook"),
        Column(_("Status"), "status", order_by="status"),
        Column(_("Current step"), "step"),
        Column(_("Why"), "reason"),
        Column(_("Requested by"), "requested_by"),
    )


@login_required
@permission_required("jobs.view_runbookrun", raise_exception=True)
def runbook_run(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(selectors.runbook_run_list(), pk=pk)
    context = {"run": run, "steps": run.steps.order_by("created"), "title": str(run.runbook)}
    if getattr(request, "htmx", False):
        return render(request, "jobs/runbook_run.html#run-card", context)
    return render(request, "jobs/runbook_run.html", context)


def _transition(request: HttpRequest, pk: int, service: Any) -> HttpResponse:
    run = get_object_or_404(RunbookRun, pk=pk)
    try:
        run = service(run=run, user=request.user)
    except (ValidationError, PermissionDenied) as exc:
        messages = getattr(exc, "messages", [str(exc)])
        context = {"run": run, "steps": run.steps.order_by("created"), "errors": messages}
        return render(request, "jobs/runbook_run.html#run-card", context, status=400)
    return render(
        request, "jobs/runbook_run.html#run-card", {"run": run, "steps": run.steps.order_by("created")}
    )


@require_POST
@login_required
@permission_required(runbooks.RUN_RUNBOOK, raise_exception=True)
def runbook_run_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    return _transition(request, pk, runbooks.runbook_run_cancel)


@require_POST
@login_required
@permission_required(runbooks.RUN_RUNBOOK, raise_exception=True)
def runbook_run_continue(request: HttpRequest, pk: int) -> HttpResponse:
    return _transition(request, pk, runbooks.runbook_run_continue)


class RunbookStartForm(forms.Form):
    runbook = forms.ModelChoiceField(label=_("Runbook"), queryset=Runbook.objects.filter(enabled=True))
    reason = forms.CharField(label=_("Why"), max_length=255, required=False)


@login_required
@permission_required(runbooks.RUN_RUNBOOK, raise_exception=True)
def runbook_start(request: HttpRequest, node_pk: int) -> HttpResponse:
    """Start a runbook on a node; "Dry run" shows its steps and commands without doing anything."""
    node = get_object_or_404(Node, pk=node_pk)
    form = RunbookStartForm(
        request.POST or None, initial={"runbook": Runbook.objects.filter(enabled=True).first()}
    )
    plan = None
    status = 200
    if request.method == "POST" and form.is_valid():
        try:
            if "dry_run" in request.POST:
                plan = runbooks.runbook_plan(form.cleaned_data["runbook"], node)
            else:
                run = runbooks.runbook_run_start(
                    runbook=form.cleaned_data["runbook"], node=node, user=request.user,
                    reason=form.cleaned_data["reason"],
                )  # fmt: skip
                return redirect("jobs:runbookrun", pk=run.pk)
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(None if field not in form.fields else field, errors)
    if request.method == "POST" and form.errors:
        status = 400
    context = {
        "node": node,
        "form": form,
        "plan": plan,
        "title": _("Run a runbook on %(node)s") % {"node": node},
    }
    return render(request, "jobs/runbook_start.html", context, status=status)
