"""API for fabrics (CRUD, check, plan), power budgets and what-if, and node readiness. Thin over services."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from inventory import power
from inventory.api import shapes
from inventory.models import (
    Card,
    CardModel,
    Fabric,
    FabricMember,
    FabricTemplate,
    Node,
    PowerFeed,
)
from inventory.readiness import readiness_evaluate, readiness_list, readiness_set, readiness_summary
from inventory.topology.data import fabric_check, fabric_data, fabric_list
from inventory.topology.plan import Plan, plan
from inventory.topology.services import MemberInput, fabric_plan_create, fabric_save
from inventory.topology.templates import TEMPLATES
from portal.api.serializers import BriefRelatedField, PortalModelSerializer
from portal.api.viewsets import PortalModelViewSet
from portal.models import APIToken


class Perm(permissions.BasePermission):
    """`read` permission for safe methods, `write` for the others; read-only tokens never write."""

    read = ""
    write = ""

    @classmethod
    def of(cls, read: str, write: str = "") -> type[Perm]:
        return type(f"Perm_{read}_{write}".replace(".", "_"), (cls,), {"read": read, "write": write})

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        if request.method in permissions.SAFE_METHODS:
            return bool(user.has_perm(self.read))
        if isinstance(request.auth, APIToken) and not request.auth.write_enabled:
            return False
        return bool(self.write and user.has_perm(self.write))


# -- fabrics ----------------------------------------------------------------------------------------------


class FabricMemberSerializer(serializers.ModelSerializer):
    card = BriefRelatedField(queryset=Card.objects.select_related("node"), required=False, allow_null=True)
    node = BriefRelatedField(queryset=Node.objects.all(), required=False, allow_null=True)

    class Meta:
        model = FabricMember
        fields = ["id", "position", "label", "role", "card", "node"]
        read_only_fields = ["id", "position"]
        extra_kwargs = {"label": {"required": False, "allow_blank": True}, "role": {"required": False}}


class FabricSerializer(PortalModelSerializer):
    members = FabricMemberSerializer(many=True, required=False)
    member_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Fabric
        fields = [
            "id",
            "url",
            "display",
            "name",
            "cluster",
            "template",
            "params",
            "description",
            "members",
            "member_count",
            "created",
            "last_updated",
        ]


class FabricViewSet(PortalModelViewSet):
    queryset = fabric_list().prefetch_related(
        Prefetch("members", queryset=FabricMember.objects.select_related("card__node", "node"))
    )
    serializer_class = FabricSerializer
    filterset_fields = ["cluster", "template"]
    ordering_fields = ["name", "created"]

    def build_instance(self, data: dict[str, Any], instance: models.Model | None = None) -> models.Model:
        members = data.pop("members", None)
        obj = super().build_instance(data, instance)
        obj._members = (  # type: ignore[attr-defined]
            None if members is None else [MemberInput(**dict(m)) for m in members]
        )
        return obj

    def perform_write(self, instance: models.Model) -> models.Model:
        assert isinstance(instance, Fabric)
        return fabric_save(instance, user=self.request.user, members=getattr(instance, "_members", None))

    @extend_schema(responses=shapes.FabricCheckSerializer)
    @action(detail=True, methods=["get"])
    def check(self, request: Request, pk: str | None = None) -> Response:
        data, result = fabric_check(self.get_object())
        out = result.as_dict()
        out["member_names"] = {m.label: m.display for m in data.members}
        return Response(out)

    @extend_schema(methods=["GET"], responses=shapes.FabricPlanSerializer)
    @extend_schema(methods=["POST"], request=None, responses={201: shapes.FabricPlanCreatedSerializer})
    @action(
        detail=True,
        methods=["get", "post"],
        permission_classes=[Perm.of("inventory.view_fabric", "inventory.add_cable")],
    )
    def plan(self, request: Request, pk: str | None = None) -> Response:
        fabric = self.get_object()
        if request.method == "GET":
            return Response(plan_dict(plan(fabric_data(fabric))))
        cables = fabric_plan_create(fabric, user=request.user)
        return Response(
            {"created": [c.pk for c in cables], "count": len(cables)}, status=status.HTTP_201_CREATED
        )

    @extend_schema(responses=shapes.FabricTemplateSerializer(many=True))
    @action(detail=False, methods=["get"], pagination_class=None, filter_backends=[])
    def templates(self, request: Request) -> Response:
        return Response(
            [
                {
                    "key": t.key,
                    "name": str(FabricTemplate(t.key).label),
                    "members": t.members,
                    "assumption": t.assumption,
                }
                for t in TEMPLATES.values()
            ]
        )


def plan_dict(result: Plan) -> dict[str, Any]:
    return {
        "ok": result.ok,
        "kept": result.kept,
        "errors": [{"where": w, "message": m} for w, m in result.errors],
        "links": [
            {
                "a": ln.a.ref,
                "a_port": ln.a.id,
                "b": ln.b.ref,
                "b_port": ln.b.id,
                "kind": ln.kind,
                "label": ln.label,
            }
            for ln in result.links
        ],
    }


# -- power --------------------------------------------------------------------------------------------------


HEADROOM = OpenApiParameter(
    "headroom",
    OpenApiTypes.FLOAT,
    description="PSU headroom kept free, percent (0-99); default PORTAL_POWER_HEADROOM_PCT.",
)


def _headroom(request: Request) -> float | None:
    raw = request.query_params.get("headroom")
    if raw in (None, ""):
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1
    if not 0 <= value < 100:
        raise serializers.ValidationError({"headroom": ["A percentage from 0 to 99."]})
    return value


class PSUBudgetView(APIView):
    permission_classes = [Perm.of("inventory.view_psu")]

    @extend_schema(parameters=[HEADROOM], responses=shapes.BudgetSerializer)
    def get(self, request: Request, pk: int) -> Response:
        psu = get_object_or_404(power.psu_queryset(), pk=pk)
        return Response(power.psu_budget(psu, headroom_pct=_headroom(request)).as_dict())


class FeedBudgetView(APIView):
    permission_classes = [Perm.of("inventory.view_powerfeed")]

    @extend_schema(parameters=[HEADROOM], responses=shapes.BudgetSerializer)
    def get(self, request: Request, pk: int) -> Response:
        feed = get_object_or_404(PowerFeed, pk=pk)
        return Response(power.feed_budgets([feed], headroom_pct=_headroom(request))[0].as_dict())


class NodePowerView(APIView):
    permission_classes = [Perm.of("inventory.view_psu")]

    @extend_schema(responses=shapes.NodePowerSerializer)
    def get(self, request: Request, pk: int) -> Response:
        node = get_object_or_404(Node.objects.select_related("chassis"), pk=pk)
        out = power.node_power(node)
        return Response(
            {
                "psus": [b.as_dict() for b in out["psus"]],
                "feeds": [b.as_dict() for b in out["feeds"]],
                "findings": [{"severity": s, "message": m} for s, m in out["findings"]],
            }
        )


class WhatIfQuery(serializers.Serializer):
    card_model = serializers.PrimaryKeyRelatedField(queryset=CardModel.objects.all())
    count = serializers.IntegerField(min_value=1, max_value=64)


class WhatIfView(APIView):
    """GET /nodes/{id}/what-if/?card_model=ID&count=N: would the node's PSUs and feeds still hold?"""

    permission_classes = [Perm.of("inventory.view_psu")]

    @extend_schema(parameters=[WhatIfQuery], responses=shapes.WhatIfSerializer)
    def get(self, request: Request, pk: int) -> Response:
        node = get_object_or_404(Node.objects.select_related("chassis"), pk=pk)
        query = WhatIfQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        result = power.power_what_if(node, query.validated_data["card_model"], query.validated_data["count"])
        return Response(result.as_dict())


# -- readiness ------------------------------------------------------------------------------------------------


class ReadinessInput(serializers.Serializer):
    key = serializers.CharField()
    status = serializers.CharField()
    detail = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)


class NodeReadinessView(APIView):
    """GET the checklist; POST {key, status, detail} (or a list of them, all or nothing) to set manual checks."""

    permission_classes = [Perm.of("inventory.view_readinesscheck", "inventory.change_readinesscheck")]

    @extend_schema(responses=shapes.ReadinessSerializer)
    def get(self, request: Request, pk: int) -> Response:
        node = get_object_or_404(Node, pk=pk)
        return Response(_readiness_body(node))

    @extend_schema(request=ReadinessInput, responses=shapes.ReadinessSerializer)
    def post(self, request: Request, pk: int) -> Response:
        from django.db import transaction

        node = get_object_or_404(Node, pk=pk)
        many = isinstance(request.data, list)
        body = ReadinessInput(data=request.data, many=many)
        body.is_valid(raise_exception=True)
        items = body.validated_data if many else [body.validated_data]
        with transaction.atomic():
            for item in items:
                readiness_set(
                    node,
                    key=item["key"],
                    status=item["status"],
                    detail=item["detail"],
                    user=request.user,
                    source="api",
                )
        return Response(_readiness_body(node))


class NodeReadinessEvaluateView(APIView):
    """POST {"seen": ["0000:01:00.0", "GPU-…"]} (optional) to recompute the derived checks."""

    permission_classes = [Perm.of("inventory.view_readinesscheck", "inventory.change_readinesscheck")]

    @extend_schema(request=shapes.ReadinessEvaluateSerializer, responses=shapes.ReadinessSerializer)
    def post(self, request: Request, pk: int) -> Response:
        node = get_object_or_404(Node.objects.select_related("chassis"), pk=pk)
        seen = request.data.get("seen") if isinstance(request.data, dict) else None
        if seen is not None and (not isinstance(seen, list) or not all(isinstance(s, str) for s in seen)):
            return Response(
                {"seen": ["A list of PCI bus ids or GPU UUIDs."]}, status=status.HTTP_400_BAD_REQUEST
            )
        readiness_evaluate(node, user=request.user, seen=seen)
        return Response(_readiness_body(node))


def _readiness_body(node: Node) -> dict[str, Any]:
    checks = readiness_list(node)
    return {"node": node.hostname, "status": readiness_summary(c["status"] for c in checks), "checks": checks}
