from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import models
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from jobs import filters, selectors, services
from jobs.api import serializers as s
from jobs.burnin.selectors import burnin_run_list
from jobs.burnin.services import RUN_BURNIN, burnin_start
from jobs.models import Action, ActionKind, Job, JobTemplate
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


class JobViewSet(viewsets.ReadOnlyModelViewSet):
    """Jobs as last synced from Slurm (researchers see their own unless the site lets them see all)."""

    queryset = selectors.job_list()
    serializer_class = s.JobSerializer
    filterset_class = filters.JobFilterSet
    ordering_fields = ["job_id", "submit_time", "start_time", "end_time", "state", "user", "partition"]

    def get_queryset(self) -> QuerySet[Job]:
        return selectors.job_list(user=self.request.user)

    @extend_schema(request=None, responses=_ACTION_RESPONSES)
    @action(detail=True, methods=["post"], permission_classes=[HasPerm.of("jobs.add_action")])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        return _accepted(services.job_cancel_request(self.get_object(), user=request.user), request)

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


class BurnInRunViewSet(mixins.CreateModelMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                       viewsets.GenericViewSet):  # fmt: skip
    """Burn-in runs: POST starts one (201; the Slurm job is submitted as your cluster account and the run
    follows it), GET lists them with each card's acceptance record."""

    queryset = burnin_run_list()
    serializer_class = s.BurnInRunSerializer
    filterset_fields = ["node", "status"]
    ordering_fields = ["created", "started", "finished"]

    def get_permissions(self) -> Sequence[Any]:
        if self.action == "create":
            return [HasPerm.of(RUN_BURNIN)()]
        return super().get_permissions()

    @extend_schema(request=s.BurnInStartSerializer, responses={201: s.BurnInRunSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        body = s.BurnInStartSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        run = burnin_start(
            user=request.user,
            node=data["node"],
            card_ids=[c.pk for c in data.get("cards", [])],
            duration_minutes=data.get("duration_minutes"),
            program=data.get("program"),
        )
        out = s.BurnInRunSerializer(self.get_queryset().get(pk=run.pk), context={"request": request})
        return Response(out.data, status=status.HTTP_201_CREATED)
