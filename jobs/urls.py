"""Job and node-operation pages (namespace `jobs`)."""

from django.urls import path

from jobs import views as v
from jobs import views_burnin as vb
from jobs import views_runbooks as rb

app_name = "jobs"

urlpatterns = [
    path("", v.job_list, name="job_list"),
    path("submit/", v.job_submit, name="job_submit"),
    path("<int:pk>/", v.job_detail, name="job"),
    path("<int:pk>/output/", v.job_output, name="job_output"),
    path("<int:pk>/cancel/", v.job_cancel, name="job_cancel"),
    path("<int:pk>/report/", v.job_report, name="job_report"),
    path("<int:pk>/resubmit/", v.job_resubmit, name="job_resubmit"),
    path("<int:pk>/drain-suspect/", v.job_drain_suspect, name="job_drain_suspect"),
    path("<int:pk>/cable-faulty/", v.job_cable_faulty, name="job_cable_faulty"),
    path("timeline/<str:kind>/<int:pk>/", v.timeline, name="timeline"),
    path("actions/", v.action_list, name="action_list"),
    path("actions/<uuid:pk>/", v.action_detail, name="action"),
    path("nodes/", v.node_ops, name="node_ops"),
    path("nodes/<int:pk>/row/", v.node_row, name="node_row"),
    path("burnin/", vb.burnin_list, name="burnin_list"),
    path("burnin/start/", vb.burnin_start_view, name="burnin_start"),
    path("burnin/<int:pk>/", vb.burnin_detail, name="burnin"),
    path("templates/", v.JobTemplateListView.as_view(), name="jobtemplate_list"),
    path("templates/add/", v.JobTemplateEditView.as_view(), name="jobtemplate_add"),
    path("templates/<int:pk>/", v.JobTemplateView.as_view(), name="jobtemplate"),
    path("templates/<int:pk>/edit/", v.JobTemplateEditView.as_view(), name="jobtemplate_edit"),
    path("runbooks/", rb.RunbookListView.as_view(), name="runbook_list"),
    path("runbooks/add/", rb.RunbookEditView.as_view(), name="runbook_add"),
    path("runbooks/<int:pk>/", rb.RunbookView.as_view(), name="runbook"),
    path("runbooks/<int:pk>/edit/", rb.RunbookEditView.as_view(), name="runbook_edit"),
    path("runbook-runs/", rb.RunbookRunListView.as_view(), name="runbookrun_list"),
    path("runbook-runs/<int:pk>/", rb.runbook_run, name="runbookrun"),
    path("runbook-runs/<int:pk>/cancel/", rb.runbook_run_cancel, name="runbookrun_cancel"),
    path("runbook-runs/<int:pk>/continue/", rb.runbook_run_continue, name="runbookrun_continue"),
    path("nodes/<int:node_pk>/runbook/", rb.runbook_start, name="runbook_start"),
]
