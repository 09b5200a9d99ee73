from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from inventory.api.serializers import CableSerializer
from jobs import filters, selectors, services
from jobs.api import serializers as s
from jobs.models import Action, ActionKind, Job, JobTemplate
from jobs.output import job_output_get
from jobs.report import services as report_services
from jobs.report import timeline as tl
from jobs.report.selectors import job_report_get, report_as_dict
from portal.api.permissions import HasPerm
from portal.api.viewsets import PortalModelViewSet
from portal.services import instance_save


def _accepted(action_row: Action, request: Request) -> Response:
    """202 with a new action; 200 with the one already doing it (a repeated cancel of a job)."""
    data = s.ActionSerializer(action_row, context={"request": request}).data
    return Response(data, status=status.HTTP_200_OK if action_row.reused else status.HTTP_202_ACCEPTED)


_ACTION_RESPONSES = {
    202: OpenApiResponse(s.ActionSerializer, description="The action was recorded and enqueued."),
    200: OpenApiResponse(
        s.ActionSerializer, description="A cancel of this job is already in progress (or done): that action."
    ),
}


class ActionViewSet(mixins.CreateModelMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                    viewsets.GenericViewSet):  # fmt: skip
    """Cluster actions: POST requests one (202, then poll it), GET lists them with status and output."""

    queryset = selectors.action_list()
    serializer_class = s.ActionSerializer
    filterset_class = filters.ActionFilterSet
    ordering_fields = ["created", "finished", "status", "kind"]

    def get_queryset(self) -> QuerySet[Action]:
        return selectors.action_list(user=self.request.user)

    def get_serializer_class(self) -> type[Any]:
        return s.ActionRequestSerializer if self.action == "create" else s.ActionSerializer

    @extend_schema(
        request=s.ActionRequestSerializer,
        responses=_ACTION_RESPONSES,
        examples=[
            OpenApiExample(
                "Submit a job",
                request_only=True,
                value={
                    "kind": "submit",
                    "cluster": 2,
                    "params": {"name": "eval", "script": "#!/bin/bash\nsrun python eval.py\n", "gpus": 4},
                },
            ),
            OpenApiExample(
                "Drain a node",
                request_only=True,
                value={"kind": "drain", "node": 7, "params": {"reason": "fan replacement"}},
            ),
            OpenApiExample("Cancel a job", request_only=True, value={"kind": "cancel", "job": 1234}),
        ],
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        d = serializer.validated_data
        row = services.action_request(
            d["kind"],
            user=request.user,
            node=d.get("node"),
            job=d.get("job"),
            cluster=d.get("cluster"),
            params=d.get("params") or {},
        )
        return _accepted(row, request)


class TimelineMixin:
    """GET .../{id}/timeline/: the incident timeline of a job, node, card or cable, newest first (the
    entries of its page). Mixed into the viewsets of jobs, nodes, cards and cables: the object is
    theirs to find (404 for what the user may not see)."""

    timeline_kind: str = ""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "source", str, many=True, enum=list(tl.SOURCES), description="Repeat to combine."
            ),
            OpenApiParameter(
                "severity", str, enum=list(tl.SEVERITIES), description="At least this severity."
            ),
            OpenApiParameter(
                "range",
                str,
                enum=list(tl.RANGES),
                description="Nodes, cards, cables: up to now (default 7d). A job: its run.",
            ),
        ],  # fmt: skip
        responses=s.TimelineEntrySerializer(many=True),
        filters=False,
    )
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def timeline(self, request: Request, pk: str | None = None) -> Response:
        q = request.query_params
        errors: dict[str, list[str]] = {}
        sources = q.getlist("source")
        if set(sources) - set(tl.SOURCES):
            errors["source"] = [f"each one of {', '.join(tl.SOURCES)}"]
        severity = q.get("severity") or "info"
        if severity not in tl.SEVERITIES:
            errors["severity"] = [f"one of {', '.join(tl.SEVERITIES)}"]
        range_key = q.get("range") or tl.DEFAULT_RANGE
        if range_key not in tl.RANGES:
            errors["range"] = [f"one of {', '.join(tl.RANGES)}"]
        if errors:
            raise ValidationError(errors)
        scope = tl.scope_of(self.timeline_kind, self.get_object(), range_key)  # type: ignore[attr-defined, arg-type]
        entries = tl.timeline_list(scope, user=request.user, sources=sources or None, min_severity=severity)
        return Response([
            {"ts": e.ts, "source": e.source, "severity": e.severity, "title": e.title, "detail": e.detail,
             "who": e.who, "target": e.target, "url": reverse(e.link[0], args=[e.link[1]]) if e.link else None}
            for e in entries
        ])  # fmt: skip


class JobViewSet(TimelineMixin, viewsets.ReadOnlyModelViewSet):
    """Jobs as last synced from Slurm (researchers see their own unless the site lets them see all)."""

    queryset = selectors.job_list()
    serializer_class = s.JobSerializer
    timeline_kind = "job"
    filterset_class = filters.JobFilterSet
    ordering_fields = ["job_id", "submit_time", "start_time", "end_time", "state", "user", "partition"]

    def get_queryset(self) -> QuerySet[Job]:
        return selectors.job_list(user=self.request.user)

    @extend_schema(request=None, responses=_ACTION_RESPONSES)
    @action(detail=True, methods=["post"], permission_classes=[HasPerm.of("jobs.add_action")])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        return _accepted(services.job_cancel_request(self.get_object(), user=request.user), request)

    @extend_schema(responses=s.JobReportSerializer)
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def report(self, request: Request, pk: str | None = None) -> Response:
        """The job's report: efficiency per node and card, notes, and for a failed job the likely
        causes ranked, from the telemetry of its window (live while it runs)."""
        job = self.get_object()
        report = job_report_get(job, output=job_output_get(job).text)
        # plain values in the documented shape (a serializer pass costs more than the report itself
        # at 512 cards; tests/jobs/test_report_next_steps.py holds the two to the same keys)
        return Response(report_as_dict(report))

    @extend_schema(
        request=s.JobResubmitSerializer,
        responses={202: OpenApiResponse(s.ActionSerializer, description="The submit action was recorded.")},
    )
    @action(detail=True, methods=["post"], permission_classes=[HasPerm.of("jobs.submit_job")])
    def resubmit(self, request: Request, pk: str | None = None) -> Response:
        """Submit a finished job of yours again, through the same checks as any submission,
        excluding one of its nodes and/or resuming from its template's checkpoint directory."""
        body = s.JobResubmitSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        row = services.job_resubmit(self.get_object(), user=request.user, **body.validated_data)
        return _accepted(row, request)

    @extend_schema(
        request=None,
        responses={202: OpenApiResponse(s.ActionSerializer, description="The drain action was recorded.")},
    )
    @action(detail=True, methods=["post"], url_path="drain-suspect",
            permission_classes=[HasPerm.of("jobs.operate_nodes")])  # fmt: skip
    def drain_suspect(self, request: Request, pk: str | None = None) -> Response:
        """Drain the node the job's report names as the likely cause, the job as the reason."""
        _ = request.data  # no body is needed; one that is sent must parse
        return _accepted(
            report_services.job_suspect_node_drain(self.get_object(), user=request.user), request
        )

    @extend_schema(request=None, responses=CableSerializer)
    @action(detail=True, methods=["post"], url_path="cable-faulty",
            permission_classes=[HasPerm.of("jobs.operate_nodes")])  # fmt: skip
    def cable_faulty(self, request: Request, pk: str | None = None) -> Response:
        """Mark the cable the job's report names as the likely cause faulty, the job as the reason."""
        _ = request.data  # no body is needed; one that is sent must parse
        cable = report_services.job_suspect_cable_mark_faulty(self.get_object(), user=request.user)
        return Response(CableSerializer(cable, context={"request": request}).data)

    @extend_schema(responses=s.JobTransitionSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def transitions(self, request: Request, pk: str | None = None) -> Response:
        rows = selectors.job_transition_list(self.get_object())
        return Response(s.JobTransitionSerializer(rows, many=True).data)


class ClusterAccountViewSet(PortalModelViewSet):
    queryset = selectors.cluster_account_list()
    serializer_class = s.ClusterAccountSerializer
    filterset_class = filters.ClusterAccountFilterSet


class NodeStateViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = selectors.node_state_list()
    serializer_class = s.NodeStateSerializer
    filterset_class = filters.NodeStateFilterSet


class PartitionViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = selectors.partition_list()
    serializer_class = s.PartitionSerializer
    filterset_fields = ["cluster", "name", "state"]


class JobTemplateViewSet(PortalModelViewSet):
    queryset = selectors.job_template_list()
    serializer_class = s.JobTemplateSerializer
    filterset_class = filters.JobTemplateFilterSet

    def perform_write(self, instance: models.Model) -> models.Model:
        assert isinstance(instance, JobTemplate)
        if instance.created_by_id is None and self.request.user.is_authenticated:
            instance.created_by = self.request.user
        return instance_save(instance, user=self.request.user)


NODE_ACTION_SCHEMA = extend_schema(
    request=s.NodeActionSerializer, responses={202: s.ActionSerializer}, filters=False
)
NODE_ACTION_SCHEMA_DRAIN = extend_schema(
    request=s.NodeActionSerializer,
    responses={202: s.ActionSerializer},
    filters=False,
    examples=[
        OpenApiExample(
            "Drain for maintenance, then set the node down",
            request_only=True,
            value={"reason": "replace fan 2", "asap": False, "next_state": "down"},
        )
    ],
)


class NodeActionsMixin:
    """Node actions reachable from the node: POST /api/inventory/nodes/{id}/drain|resume|reboot|power-cycle/.

    Mixed into inventory's NodeViewSet; each call records an action (202) through jobs.services.
    """

    def _node_action(self, request: Request, kind: str) -> Response:
        node = self.get_object()  # type: ignore[attr-defined]
        body = s.NodeActionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        params = {k: v for k, v in body.validated_data.items() if v not in (None, "")}
        row = services.action_request(kind, user=request.user, node=node, params=params)
        return _accepted(row, request)

    @NODE_ACTION_SCHEMA_DRAIN
    @action(detail=True, methods=["post"], permission_classes=[HasPerm.of("jobs.operate_nodes")])
    def drain(self, request: Request, pk: str | None = None) -> Response:
        return self._node_action(request, ActionKind.DRAIN)

    @NODE_ACTION_SCHEMA
    @action(detail=True, methods=["post"], permission_classes=[HasPerm.of("jobs.operate_nodes")])
    def resume(self, request: Request, pk: str | None = None) -> Response:
        return self._node_action(request, ActionKind.RESUME)

    @NODE_ACTION_SCHEMA
    @action(detail=True, methods=["post"], permission_classes=[HasPerm.of("jobs.operate_nodes")])
    def reboot(self, request: Request, pk: str | None = None) -> Response:
        return self._node_action(request, ActionKind.REBOOT)

    @NODE_ACTION_SCHEMA
    @action(detail=True, methods=["post"], url_path="power-cycle",
            permission_classes=[HasPerm.of("jobs.operate_nodes")])  # fmt: skip
    def power_cycle(self, request: Request, pk: str | None = None) -> Response:
        return self._node_action(request, ActionKind.POWER_CYCLE)
