"""The report's next steps as writes: drain the suspect node, mark the suspect cable faulty (for
operators), each with the job as the recorded reason. The suspect is the server's own reading of
the report, never the client's. Resubmitting is :func:`jobs.services.job_resubmit`."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.utils.translation import gettext as _

from inventory.models import Cable, Node
from inventory.services import cable_mark_faulty
from jobs.models import Action, Job
from jobs.output import job_output_get
from jobs.report.findings import Finding
from jobs.report.selectors import JobReport, job_report_get
from jobs.services import OPERATE_NODES, node_drain_request


def _report(job: Job, user: Any) -> JobReport:
    if not user.has_perm(OPERATE_NODES):
        raise PermissionDenied(_("You may not operate nodes."))
    return job_report_get(job, output=job_output_get(job).text)


def job_report_reason(job: Job, finding: Finding | None) -> str:
    """What a drain or a cable's audit entry records: the job and the cause its report names."""
    cause = finding.code if finding is not None else "unexplained"
    return f"report of job {job.job_id} on {job.cluster.name}: {cause}"


def job_suspect_node_drain(job: Job, *, user: Any) -> Action:
    report = _report(job, user)
    suspect = report.suspect_node
    if suspect is None:
        raise ValidationError({"job": [_("The report of this job names no suspect node.")]})
    node = Node.objects.get(pk=suspect.id)
    return node_drain_request(node, user=user, reason=job_report_reason(job, report.diagnosis[0]))


def job_suspect_cable_mark_faulty(job: Job, *, user: Any) -> Cable:
    report = _report(job, user)
    finding = next((f for f in report.diagnosis if f.suspect and f.suspect.kind == "cable"), None)
    if finding is None or finding.suspect is None:
        raise ValidationError({"job": [_("The report of this job names no suspect cable.")]})
    cable = Cable.objects.get(pk=finding.suspect.id)
    return cable_mark_faulty(cable, user=user, reason=job_report_reason(job, finding))
