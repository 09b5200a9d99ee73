"""Runbook API: runbooks (admins edit), runs (operators start, dry-run, cancel, continue; all read)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from inventory.models import Node
from jobs import runbooks
from jobs.models import Runbook, RunbookRun
from portal.api.permissions import HasPerm
from portal.api.serializers import PortalModelSerializer
from portal.api.viewsets import PortalModelViewSet


class RunbookSerializer(PortalModelSerializer):
    class Meta:
        model = Runbook
        fields = ["id", "url", "display", "name", "description", "steps", "trigger_check_kinds", "enabled"]


class RunbookRunSerializer(serializers.ModelSerializer):
    node_name = serializers.CharField(source="node.hostname", read_only=True)
    runbook_name = serializers.CharField(source="runbook.name", read_only=True)
    steps = serializers.SerializerMethodField()

    class Meta:
        model = RunbookRun
        fields = ["id", "runbook", "runbook_name", "node", "node_name", "status", "step", "reason", "cards",
                  "summary", "requested_by", "created", "finished", "steps"]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_steps(self, run: RunbookRun) -> list[dict[str, Any]]:
        return [
            {
                "step": a.params.get("step", ""),
                "kind": a.kind,
                "status": a.status,
                "attempts": a.attempts,
                "output": a.output,
                "error": a.error,
                "started": a.started,
                "finished": a.finished,
            }  # fmt: skip
            for a in run.steps.order_by("created")
        ]


class RunbookRunStartSerializer(serializers.Serializer[Any]):
    runbook = serializers.PrimaryKeyRelatedField(queryset=Runbook.objects.all())
    node = serializers.PrimaryKeyRelatedField(queryset=Node.objects.all())
    cards = serializers.ListField(child=serializers.IntegerField(), required=False, max_length=64)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=255)
    dry_run = serializers.BooleanField(required=False, default=False)


PLAN = inline_serializer("RunbookPlan", {"plan": serializers.ListField(child=serializers.DictField())})


class RunbookViewSet(PortalModelViewSet):
    queryset = Runbook.objects.all()
    serializer_class = RunbookSerializer


class RunbookRunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Runbook runs: POST starts one on a node (201), or with ``dry_run`` returns what it would do (200)."""

    queryset = RunbookRun.objects.select_related("runbook", "node").order_by("-created")
    serializer_class = RunbookRunSerializer
    filterset_fields = ["status", "node", "runbook"]

    def get_permissions(self) -> Any:
        if self.action in ("create", "cancel", "advance"):
            return [HasPerm.of(runbooks.RUN_RUNBOOK)()]
        return super().get_permissions()

    def get_serializer_class(self) -> type[Any]:
        return RunbookRunStartSerializer if self.action == "create" else RunbookRunSerializer

    @extend_schema(
        request=RunbookRunStartSerializer,
        responses={
            201: RunbookRunSerializer,
            200: OpenApiResponse(PLAN, description="dry_run: the steps and commands a run would do."),
        },
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        body = RunbookRunStartSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        d = body.validated_data
        if d["dry_run"]:
            return Response({"plan": runbooks.runbook_plan(d["runbook"], d["node"], card_ids=d.get("cards"))})
        run = runbooks.runbook_run_start(
            runbook=d["runbook"], node=d["node"], user=request.user, reason=d.get("reason", ""),
            card_ids=d.get("cards"),
        )  # fmt: skip
        return Response(RunbookRunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=RunbookRunSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        run = runbooks.runbook_run_cancel(run=self.get_object(), user=request.user)
        return Response(RunbookRunSerializer(run).data)

    @extend_schema(request=None, responses=RunbookRunSerializer)
    @action(detail=True, methods=["post"], url_path="continue")
    def advance(self, request: Request, pk: str | None = None) -> Response:
        """Let a run that waits for an operator (a wait deadline passed) go on."""
        run = runbooks.runbook_run_continue(run=self.get_object(), user=request.user)
        return Response(RunbookRunSerializer(run).data)
