"""Job and node-operation pages: thin adapters over jobs.selectors / jobs.services.

Every row or card is one template partial with a stable element id (``job-<pk>``,
``action-<uuid>``, ``node-<pk>``); :func:`job_row_html`, :func:`action_card_html` and
:func:`node_row_html` render them outside a request too (the websocket consumer sends the same
fragments with ``hx-swap-oob``).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseStopPolling
from django_htmx.middleware import HtmxDetails

from inventory.models import Cable, Card, Node
from jobs import page_selectors as ps
from jobs import runbooks, selectors, services
from jobs.filters import ActionFilterSet
from jobs.forms import JobSubmitForm, JobTemplateForm, NodeOperationForm, template_initial
from jobs.models import Action, Job, JobTemplate, RunbookRun
from jobs.output import job_output_get
from jobs.pending_reasons import diagnose_output, explain_pending_reason, explain_submit_error
from jobs.report import services as report_services
from jobs.report import timeline as tl
from jobs.report.selectors import job_report_get, report_next_steps
from monitoring.selectors import job_energy_get
from portal.views.generic import (
    Column,
    ObjectDetailView,
    ObjectEditView,
    ObjectListView,
    _add_errors,
    redirect_after_post,
)


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def _forbidden(request: HtmxHttpRequest, message: str = "") -> HttpResponse:
    return render(request, "403.html", {"message": message}, status=403)


def _page(request: HtmxHttpRequest, qs: Any, per_page: int = 50) -> Any:
    return Paginator(qs, per_page).get_page(request.GET.get("page"))


# -- jobs ----------------------------------------------------------------------------------------


def job_row_context(job: Job, user: Any, *, show_user: bool) -> dict[str, Any]:
    return {"job": job, "show_user": show_user, "can_cancel": ps.can_cancel(job, user)}


def job_row_html(job: Job, user: Any, *, show_user: bool = True) -> str:
    return render_to_string("jobs/job_list.html#job-row", job_row_context(job, user, show_user=show_user))


@login_required
@permission_required("jobs.view_job", raise_exception=True)
def job_list(request: HtmxHttpRequest) -> HttpResponse:
    """My jobs (default) or, for who may see them, all jobs (``?scope=all``); filtered by
    the shared JobFilterSet fields and ``q``, refreshed by htmx while jobs are active."""
    user = request.user
    see_all = selectors.can_see_all_jobs(user)
    scope = "all" if request.GET.get("scope") == "all" and see_all else "mine"
    filterset = ps.JobPageFilterSet(request.GET or None, queryset=ps.job_page_list(user=user, scope=scope))
    page = _page(request, filterset.qs)
    rows = [job_row_context(j, user, show_user=scope == "all") for j in page.object_list]
    context = {
        "title": _("All jobs") if scope == "all" else _("My jobs"),
        "scope": scope,
        "see_all": see_all,
        "rows": rows,
        "page": page,
        "filter_form": filterset.form,
        "query": request.GET.copy(),
        "any_active": any(j.is_active for j in page.object_list),
        "summary": ps.queue_summary(),
        "can_submit": user.has_perm("jobs.submit_job"),
    }
    template = "jobs/job_list.html"
    if request.htmx and not request.htmx.boosted:
        template += "#job-table"
    return render(request, template, context)


@login_required
@permission_required("jobs.view_job", raise_exception=True)
def job_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    job = _visible_job(request, pk)
    context = {
        "job": job,
        "title": _("Job %(id)s on %(cluster)s") % {"id": job.slurm_id, "cluster": job.cluster.name},
        "can_cancel": ps.can_cancel(job, request.user),
        "pending": explain_pending_reason(job.state_reason, job_id=job.job_id, partition=job.partition)
        if job.state == "PENDING"
        else None,
        "transitions": selectors.job_transition_list(job),
        "submit_action": job.submitted_by_action,
        "actions": ps.job_actions(job),
        "energy": job_energy_get(job),
    }
    if request.htmx and not request.htmx.boosted:
        # the energy card polls on its own until the figures are computed (after the job ends)
        part = "job-energy" if request.GET.get("part") == "energy" else "job-status"
        return render(request, f"jobs/job_detail.html#{part}", context)
    return render(request, "jobs/job_detail.html", context)


def _visible_job(request: HtmxHttpRequest, pk: int) -> Job:
    try:
        return selectors.job_get(pk, user=request.user)
    except Job.DoesNotExist:
        raise Http404(_("No such job, or not yours."))


@login_required
@permission_required("jobs.view_job", raise_exception=True)
def job_output(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The tail of the job's output file, fetched by a worker; polls while the job runs."""
    job = _visible_job(request, pk)
    output = job_output_get(job)
    context = {"job": job, "output": output, "signs": diagnose_output(output.text)}
    response = render(request, "jobs/job_detail.html#job-output", context)
    if request.htmx and not output.pending and not job.is_active:
        stop = HttpResponseStopPolling(response.content)
        return stop
    return response


@login_required
@permission_required("jobs.view_job", raise_exception=True)
def job_report(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The job's report (efficiency, notes, diagnosis, next steps); polls while the job runs or its
    output has not been read yet."""
    job = _visible_job(request, pk)
    output = job_output_get(job)
    report = job_report_get(job, output=output.text)
    poll = job.is_active or output.pending
    context = {"job": job, "report": report, "next": report_next_steps(report, request.user), "poll": poll}
    response = render(request, "jobs/job_report.html", context)
    if request.htmx and not poll:
        return HttpResponseStopPolling(response.content)
    return response


def _next_step_done(request: HtmxHttpRequest, job: Job, run: Any, done: Any) -> HttpResponse:
    """Run a next-step service; its refusal comes back as a message on the job page."""
    try:
        result = run()
    except PermissionDenied as exc:
        return _forbidden(request, str(exc))
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return HttpResponseRedirect(reverse("jobs:job", args=[job.pk]))
    return done(result)


@login_required
@require_POST
def job_resubmit(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    job = _visible_job(request, pk)
    exclude = request.POST.get("exclude", "")
    resume = request.POST.get("resume") == "1"
    return _next_step_done(
        request,
        job,
        lambda: services.job_resubmit(job, user=request.user, exclude=exclude, resume=resume),
        lambda action: HttpResponseRedirect(reverse("jobs:action", args=[action.pk])),
    )


@login_required
@require_POST
def job_drain_suspect(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    job = _visible_job(request, pk)
    return _next_step_done(
        request,
        job,
        lambda: report_services.job_suspect_node_drain(job, user=request.user),
        lambda action: HttpResponseRedirect(reverse("jobs:action", args=[action.pk])),
    )


@login_required
@require_POST
def job_cable_faulty(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    job = _visible_job(request, pk)

    def done(cable: Any) -> HttpResponse:
        messages.success(request, _("Cable %(cable)s is marked faulty.") % {"cable": cable})
        return HttpResponseRedirect(reverse("inventory:cable", args=[cable.pk]))

    return _next_step_done(
        request, job, lambda: report_services.job_suspect_cable_mark_faulty(job, user=request.user), done
    )


@login_required
def timeline(request: HtmxHttpRequest, kind: str, pk: int) -> HttpResponse:
    """The incident timeline of a job, node, card or cable, filtered by source and severity, with
    the telemetry charts of the same window beneath it."""
    range_key = ""
    if kind == "job":
        if not request.user.has_perm("jobs.view_job"):
            return _forbidden(request)
        obj: Any = _visible_job(request, pk)
    else:
        models = {"node": Node, "card": Card, "cable": Cable}
        if kind not in models or not request.user.has_perm(f"inventory.view_{kind}"):
            raise Http404
        obj = get_object_or_404(models[kind], pk=pk)
        range_key = request.GET.get("range") or tl.DEFAULT_RANGE
        range_key = range_key if range_key in tl.RANGES else tl.DEFAULT_RANGE
    scope = tl.scope_of(kind, obj, range_key or tl.DEFAULT_RANGE)  # type: ignore[arg-type]
    sources = [x for x in request.GET.getlist("source") if x in tl.SOURCES] or list(tl.SOURCES)
    severity = request.GET.get("severity") or "info"
    severity = severity if severity in tl.SEVERITIES else "info"
    entries = tl.timeline_list(scope, user=request.user, sources=sources, min_severity=severity)
    context = {
        "title": _("Timeline of job %(id)s") % {"id": scope.label}
        if kind == "job"
        else _("Timeline of %(what)s") % {"what": scope.label},
        "kind": kind, "obj": obj, "scope": scope, "entries": entries, "sources": tl.SOURCES,
        "chosen": sources, "severity": severity, "severities": tl.SEVERITIES, "range_key": range_key,
        "ranges": tl.RANGE_LABELS, "max_entries": tl.MAX_ENTRIES, **_timeline_charts(kind, obj, scope),
    }  # fmt: skip
    if request.htmx and not request.htmx.boosted:
        return render(request, "jobs/timeline.html#timeline-entries", context)
    return render(request, "jobs/timeline.html", context)


def _timeline_charts(kind: str, obj: Any, scope: tl.Scope) -> dict[str, Any]:
    """The charts beneath a timeline: its window, on the node (a job: its first node) or card."""
    from inventory.templatetags.inventory_live import chart_labels
    from monitoring.overview import CHART_METRICS

    if kind == "cable" or not scope.node_ids:
        return {}
    node = Node.objects.get(pk=obj.node_id if kind == "card" else scope.node_ids[0])
    cards = [obj] if kind == "card" else list(Card.objects.filter(node=node).order_by("slot"))
    return {
        "chart_node": node.pk, "chart_card": obj.pk if kind == "card" else None, "chart_node_name": node.hostname,
        "chart_cards": [{"id": c.pk, "label": c.slot} for c in cards], "chart_metrics": CHART_METRICS,
        "chart_labels": chart_labels(), "chart_from": int(scope.start.timestamp()),
        "chart_to": int(scope.end.timestamp()),
    }  # fmt: skip


@login_required
@require_POST
def job_cancel(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    job = _visible_job(request, pk)
    try:
        action = services.job_cancel_request(job, user=request.user)
    except PermissionDenied as exc:
        return _forbidden(request, str(exc))
    except ValidationError as exc:
        if request.htmx:  # into the button's target, as the action card would have been
            return HttpResponse(
                format_html('<p class="errors" role="alert">{}</p>', " ".join(exc.messages)), status=400
            )
        messages.error(request, " ".join(exc.messages))
        return HttpResponseRedirect(reverse("jobs:job", args=[job.pk]))
    if request.htmx:
        return render(request, "jobs/action.html#action-card", {"action": action})
    if action.reused:
        messages.info(request, _("Job %(id)s is already being cancelled.") % {"id": job.slurm_id})
    else:
        messages.success(request, _("Cancelling job %(id)s.") % {"id": job.slurm_id})
    return HttpResponseRedirect(reverse("jobs:job", args=[job.pk]))


@login_required
@permission_required("jobs.submit_job", raise_exception=True)
def job_submit(request: HtmxHttpRequest) -> HttpResponse:
    """The submit form. htmx ``_validate`` posts run the service's checks (nothing is written) and
    re-render the form inline; a real post records the action."""
    user = request.user
    template = _template_from(request)
    initial = template_initial(template) if template else {}
    validate_only = request.method == "POST" and "_validate" in request.POST
    if request.method == "POST":
        form = JobSubmitForm(request.POST, user=user, job_template=template, initial=initial)
    else:
        form = JobSubmitForm(user=user, job_template=template, initial={**initial, **request.GET.dict()})
    if request.method == "POST" and form.is_valid():
        submit = services.job_submit_check if validate_only else services.job_submit
        try:
            action = submit(user=user, **form.submit_params())
        except ValidationError as exc:
            _add_errors(form, _map_service_errors(exc))
        except PermissionDenied as exc:
            return _forbidden(request, str(exc))
        else:
            if not validate_only:
                assert isinstance(action, Action)
                return redirect_after_post(request, reverse("jobs:action", args=[action.pk]))
    context = {
        "form": form,
        "title": _("Submit a job"),
        "templates": selectors.job_template_list(),
        "job_template": template,
        "no_clusters": not form.fields["cluster"].queryset.exists(),  # type: ignore[attr-defined]
    }
    status = 400 if request.method == "POST" and form.errors and not validate_only else 200
    if request.htmx and not request.htmx.boosted:
        return render(request, "jobs/job_submit.html#submit-form", context, status=status)
    return render(request, "jobs/job_submit.html", context, status=status)


def _template_from(request: HtmxHttpRequest) -> JobTemplate | None:
    raw = request.POST.get("template") or request.GET.get("template")
    if not raw or not str(raw).isdigit():
        return None
    return JobTemplate.objects.filter(pk=int(raw)).first()


_SERVICE_FIELD = {"time_limit_minutes": "time_limit", "params": None, "kind": None}


def _map_service_errors(exc: ValidationError) -> ValidationError:
    if not hasattr(exc, "error_dict"):
        return exc
    mapped: dict[str, list[str]] = {}
    for field, errors in exc.message_dict.items():
        key = _SERVICE_FIELD.get(field, field) or "__all__"
        mapped.setdefault(key, []).extend(errors)
    return ValidationError(mapped)


# -- actions -------------------------------------------------------------------------------------


def action_card_html(action: Action) -> str:
    return render_to_string("jobs/action.html#action-card", _action_context(action))


def _action_context(action: Action) -> dict[str, Any]:
    explained = None
    if action.status == "failed" and action.kind == "submit":
        explained = explain_submit_error(action.output or action.error)
    return {"action": action, "explained": explained}


@login_required
@permission_required("jobs.view_action", raise_exception=True)
def action_detail(request: HtmxHttpRequest, pk: str) -> HttpResponse:
    try:
        action = selectors.action_get(pk, user=request.user)
    except (Action.DoesNotExist, ValidationError):
        raise Http404(_("No such action."))
    context = {**_action_context(action), "title": str(action)}
    if request.htmx and not request.htmx.boosted:
        # polled from the job's own page: no "Go to job N" button there
        if action.job_id is not None:
            job_url = reverse("jobs:job", kwargs={"pk": action.job_id})
            context["on_job_page"] = request.htmx.current_url_abs_path == job_url
        response = render(request, "jobs/action.html#action-card", context)
        return response if action.is_active else HttpResponseStopPolling(response.content)
    return render(request, "jobs/action.html", context)


@login_required
@permission_required("jobs.view_action", raise_exception=True)
def action_list(request: HtmxHttpRequest) -> HttpResponse:
    """Every action (operators and admins) or one's own (researchers): who, what, when, status."""
    filterset = ActionFilterSet(request.GET or None, queryset=selectors.action_list(user=request.user))
    page = _page(request, filterset.qs)
    context = {
        "title": _("Actions"),
        "page": page,
        "filter_form": filterset.form,
        "query": request.GET.copy(),
        "any_active": any(a.is_active for a in page.object_list),
    }
    template = "jobs/action_list.html"
    if request.htmx and not request.htmx.boosted:
        template += "#action-table"
    return render(request, template, context)


# -- node operations -------------------------------------------------------------------------------


def node_row_html(node: Any) -> str:
    return render_to_string("jobs/node_ops.html#node-row", {"node": node})


@login_required
@permission_required("jobs.operate_nodes", raise_exception=True)
def node_ops(request: HtmxHttpRequest) -> HttpResponse:
    """Nodes with Slurm state, reason, readiness and health; select some and drain (reason
    required), resume, reboot or power-cycle them. Each creates one action whose card polls."""
    filterset = ps.NodeOpsFilterSet(request.GET or None, queryset=ps.node_ops_list())
    form = NodeOperationForm(request.POST or None)
    created: list[Action] = []
    runs: list[RunbookRun] = []
    refused: list[str] = []
    if request.method == "POST" and form.is_valid():
        if form.cleaned_data["operation"] == "runbook":
            runs, refused = _runbook_runs(request.user, form.cleaned_data)
        else:
            created, refused = _node_operation(request.user, form.cleaned_data)
    failed = form.errors or (refused and not created and not runs)
    status = 400 if request.method == "POST" and failed else 200
    context = {
        "title": _("Node operations"),
        "nodes": filterset.qs,
        "filter_form": filterset.form,
        "form": form,
        "created": created,
        "runs": runs,
        "refused": refused,
        "query": request.GET.copy(),
    }
    if request.htmx and not request.htmx.boosted:
        part = "op-result" if request.method == "POST" else "node-table"
        return render(request, f"jobs/node_ops.html#{part}", context, status=status)
    return render(request, "jobs/node_ops.html", context, status=status)


_NODE_SERVICES = {
    "drain": lambda node, user, d: services.node_drain_request(node, user=user, reason=d["reason"]),
    "resume": lambda node, user, d: services.node_resume_request(node, user=user),
    "reboot": lambda node, user, d: services.node_reboot_request(
        node, user=user, asap=bool(d.get("asap")), next_state=d.get("next_state") or None,
        reason=d.get("reason") or None,
    ),
    "power_cycle": lambda node, user, d: services.node_power_cycle_request(node, user=user),
}  # fmt: skip


def _node_operation(user: Any, data: dict[str, Any]) -> tuple[list[Action], list[str]]:
    """One action per node; a node that refuses (busy, no BMC ...) does not stop the others."""
    created: list[Action] = []
    refused: list[str] = []
    request_one = _NODE_SERVICES[data["operation"]]
    for node in data["nodes"]:
        try:
            created.append(request_one(node, user, data))
        except ValidationError as exc:
            refused.append(f"{node}: {' '.join(exc.messages)}")
    return created, refused


def _runbook_runs(user: Any, data: dict[str, Any]) -> tuple[list[RunbookRun], list[str]]:
    """One run per node; a node that refuses (a run there already) does not stop the others."""
    runs: list[RunbookRun] = []
    refused: list[str] = []
    for node in data["nodes"]:
        try:
            runs.append(
                runbooks.runbook_run_start(
                    runbook=data["runbook"], node=node, user=user, reason=data.get("reason", "")
                )
            )
        except (ValidationError, PermissionDenied) as exc:
            refused.append(f"{node}: {' '.join(getattr(exc, 'messages', [str(exc)]))}")
    return runs, refused


@login_required
@permission_required("jobs.operate_nodes", raise_exception=True)
def node_row(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    node = get_object_or_404(ps.node_ops_list(), pk=pk)
    return render(request, "jobs/node_ops.html#node-row", {"node": node})


# -- templates -------------------------------------------------------------------------------------


def _locked_fields(template: JobTemplate) -> str:
    """The locked spec keys by their names in the catalogue ("nodes", "time limit minutes")."""
    return ", ".join(_(k.replace("_", " ")) for k in template.locked_fields) or "—"


class JobTemplateListView(ObjectListView):
    model = JobTemplate
    queryset = selectors.job_template_list
    title = gettext_lazy("Job templates")  # type: ignore[assignment]
    columns = [
        Column(gettext_lazy("Name"), "name", link=True, order_by="name"),
        Column(gettext_lazy("Cluster"), "cluster"),
        Column(gettext_lazy("Description"), "description"),
        Column(gettext_lazy("Locked fields"), render=_locked_fields),
        Column(gettext_lazy("Use"), render=ps.template_use_link),
    ]


class JobTemplateView(ObjectDetailView):
    model = JobTemplate
    queryset = selectors.job_template_list
    template_name = "jobs/jobtemplate.html"
    fields = [
        Column(gettext_lazy("Cluster"), "cluster"),
        Column(gettext_lazy("Description"), "description"),
        Column(gettext_lazy("Defaults"), render=lambda t: ps.json_text(t.defaults)),
        Column(gettext_lazy("Locked fields"), render=_locked_fields),
        Column(gettext_lazy("Use"), render=ps.template_use_link),
    ]


class JobTemplateEditView(ObjectEditView):
    model = JobTemplate
    form_class = JobTemplateForm
