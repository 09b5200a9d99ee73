"""Health check API: checks (admins edit, operators read), the nodes' standings, and the node
agents' check-command endpoint (GET what to run, POST what it printed)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from monitoring.api.authentication import NodeTokenAuthentication
from monitoring.health import services as health
from monitoring.models import HEALTH_CHECK_FIELDS, HealthCheck, NodeHealth, NodeToken
from portal.api.schema import ErrorDetailSerializer
from portal.api.serializers import PortalModelSerializer
from portal.api.viewsets import PortalModelViewSet


class HealthCheckSerializer(PortalModelSerializer):
    class Meta:
        model = HealthCheck
        fields = ["id", "url", "display", *HEALTH_CHECK_FIELDS]


class NodeHealthSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.hostname", read_only=True)
    check_name = serializers.CharField(source="health_check.name", read_only=True)

    class Meta:
        model = NodeHealth
        fields = ["id", "health_check", "check_name", "node", "status", "streak", "message", "changed_at"]
        read_only_fields = fields


class HealthCheckViewSet(PortalModelViewSet):
    queryset = HealthCheck.objects.select_related("cluster", "card_model")
    serializer_class = HealthCheckSerializer
    filterset_fields = ["enabled", "kind", "cluster", "drain"]


class NodeHealthViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Each check's standing on each node (failing first)."""

    serializer_class = NodeHealthSerializer
    filterset_fields = ["status", "node", "health_check"]

    def get_queryset(self) -> QuerySet[NodeHealth]:
        return NodeHealth.objects.select_related("node", "health_check").order_by(
            "status", "node__hostname", "pk"
        )


class IsNodeAgent(permissions.BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, NodeToken)


_Command = inline_serializer(
    "HealthProbeCommand",
    {"key": serializers.CharField(), "argv": serializers.ListField(child=serializers.CharField())},
)
_Result = inline_serializer(
    "HealthProbeResult",
    {
        "key": serializers.CharField(),
        "exit_code": serializers.IntegerField(),
        "stdout": serializers.CharField(allow_blank=True, required=False),
        "stderr": serializers.CharField(allow_blank=True, required=False),
    },
)


class HealthProbeResultsSerializer(serializers.Serializer[Any]):
    results = serializers.ListField(
        child=serializers.DictField(), max_length=100, help_text="[{key, exit_code, stdout, stderr}]"
    )


class HealthProbeView(APIView):
    """For a node's agent (node token): GET the check commands to run (argv lists), POST what they
    printed; the node's checks are evaluated at once."""

    authentication_classes = [NodeTokenAuthentication]
    permission_classes = [IsNodeAgent]

    @extend_schema(
        responses=inline_serializer(
            "HealthProbeCommands", {"commands": serializers.ListField(child=_Command)}
        )
    )
    def get(self, request: Request) -> Response:
        return Response({"commands": health.health_probe_commands(request.auth.node)})

    @extend_schema(
        request=inline_serializer("HealthProbeResults", {"results": serializers.ListField(child=_Result)}),
        responses={
            202: inline_serializer("HealthProbeStored", {"stored": serializers.IntegerField()}),
            400: ErrorDetailSerializer,
        },
    )
    def post(self, request: Request) -> Response:
        body = HealthProbeResultsSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        results = body.validated_data["results"]
        bad = [
            r for r in results if not isinstance(r.get("key"), str) or not isinstance(r.get("exit_code"), int)
        ]
        if bad:
            return Response(
                {"detail": "each result needs a key (string) and an exit_code (integer)"}, status=400
            )
        node = request.auth.node
        try:
            stored = health.health_probes_store(node, results)
        except DjangoValidationError as exc:
            return Response({"detail": "; ".join(exc.messages)}, status=400)
        health.health_evaluate(node_ids=[node.pk])
        return Response({"stored": stored}, status=status.HTTP_202_ACCEPTED)
