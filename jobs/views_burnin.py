"""Burn-in pages: the runs, one run with each card's acceptance record, and the start form."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.translation import gettext as _

from jobs.burnin.selectors import burnin_run_list, criterion_rows, evidence_charts
from jobs.burnin.services import RUN_BURNIN, burnin_start
from jobs.forms import BurnInStartForm
from portal.views.generic import _add_errors, redirect_after_post

VIEW_BURNIN = "jobs.view_burninrun"


@login_required
@permission_required(VIEW_BURNIN, raise_exception=True)
def burnin_list(request: HttpRequest) -> HttpResponse:
    page = Paginator(burnin_run_list(), 50).get_page(request.GET.get("page"))
    return render(request, "jobs/burnin_list.html", {"title": _("Burn-in runs"), "page": page})


@login_required
@permission_required(VIEW_BURNIN, raise_exception=True)
def burnin_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(burnin_run_list(), pk=pk)
    results = [
        {"result": r, "criteria": criterion_rows(r), "charts": evidence_charts(r)}
        for r in run.results.select_related("card__card_model", "run")
    ]
    context: dict[str, Any] = {"title": _("Burn-in #%(id)s") % {"id": run.pk}, "run": run, "results": results}
    return render(request, "jobs/burnin.html", context)


@login_required
@permission_required(RUN_BURNIN, raise_exception=True)
def burnin_start_view(request: HttpRequest) -> HttpResponse:
    form = BurnInStartForm(request.POST or None, initial=request.GET.dict())
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            try:
                run = burnin_start(
                    user=request.user,
                    node=data["node"],
                    card_ids=[c.pk for c in data["cards"]],
                    duration_minutes=data["duration_minutes"],
                    program=data["program"],
                )
            except PermissionDenied as exc:
                return render(request, "403.html", {"message": str(exc)}, status=403)
            except ValidationError as exc:
                _add_errors(form, exc)
            else:
                messages.success(request, _("Burn-in #%(id)s submitted.") % {"id": run.pk})
                return redirect_after_post(request, reverse("jobs:burnin", args=[run.pk]))
        status = 400
    template = "jobs/burnin_start.html"
    if getattr(request, "htmx", False) and request.method == "POST":
        template = f"{template}#form"
    return render(request, template, {"title": _("Start a burn-in"), "form": form}, status=status)
