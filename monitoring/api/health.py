"""Health check API: checks (admins edit, operators read), the nodes' standings, and the node
agents' check-command endpoint (GET what to run, POST what it printed)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.authentication import SessionAuthentication
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from inventory.models import Node
from monitoring import selectors
from monitoring.api.authentication import NodeTokenAuthentication
from monitoring.api.views import CanIngest
from monitoring.filters import NodeHealthFilterSet
from monitoring.health import services as health
from monitoring.models import HEALTH_CHECK_FIELDS, HealthCheck, NodeHealth, NodeToken
from portal.api.authentication import TokenAuthentication
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

    queryset = NodeHealth.objects.all()  # the model (schema, permissions); rows come from the selector
    serializer_class = NodeHealthSerializer
    filterset_class = NodeHealthFilterSet

    def get_queryset(self) -> QuerySet[NodeHealth]:
        return selectors.node_health_list()


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


NODE_PARAMETER = OpenApiParameter(
    "node", OpenApiTypes.STR, description="The node's hostname (not with a node token: its own node)."
)


class HealthProbeResultsSerializer(serializers.Serializer[Any]):
    results = serializers.ListField(
        child=serializers.DictField(), max_length=100, help_text="[{key, exit_code, stdout, stderr}]"
    )


def _probe_node(request: Request) -> Node | Response:
    """A node token's own node, or (a user allowed to add telemetry) the node named by ``?node=``."""
    if isinstance(request.auth, NodeToken):
        return request.auth.node
    name = request.query_params.get("node", "")
    node = Node.objects.filter(hostname=name).first() if name else None
    if node is None:
        return Response({"detail": _("Name an existing node with ?node=<hostname>.")}, status=400)
    return node


class HealthProbeView(APIView):
    """For a node's agent (node token; or a user who may add telemetry, with ``?node=``): GET the
    check commands to run (argv lists), POST what they printed; the node's checks are evaluated at once."""

    authentication_classes = [NodeTokenAuthentication, TokenAuthentication, SessionAuthentication]
    permission_classes = [CanIngest]

    @extend_schema(
        parameters=[NODE_PARAMETER],
        responses={
            200: inline_serializer(
                "HealthProbeCommands", {"commands": serializers.ListField(child=_Command)}
            ),
            400: ErrorDetailSerializer,
        },
    )
    def get(self, request: Request) -> Response:
        node = _probe_node(request)
        if isinstance(node, Response):
            return node
        return Response({"commands": health.health_probe_commands(node)})

    @extend_schema(
        parameters=[NODE_PARAMETER],
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
                {"detail": _("Each result needs a key (text) and an exit_code (integer).")}, status=400
            )
        node = _probe_node(request)
        if isinstance(node, Response):
            return node
        try:
            stored = health.health_probes_store(node, results)
        except DjangoValidationError as exc:
            return Response({"detail": "; ".join(exc.messages)}, status=400)
        health.health_evaluate(node_ids=[node.pk])
        return Response({"stored": stored}, status=status.HTTP_202_ACCEPTED)
