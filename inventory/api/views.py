from __future__ import annotations

from typing import Any

from django.db import models
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from inventory import filters, selectors
from inventory.api import serializers as s
from inventory.models import Cable, Card
from inventory.services import cable_connect, cable_update, card_save
from jobs.api.views import NodeActionsMixin, TimelineMixin
from portal.api.viewsets import PortalModelViewSet


class SiteViewSet(PortalModelViewSet):
    queryset = selectors.site_list()
    serializer_class = s.SiteSerializer
    filterset_class = filters.SiteFilterSet
    ordering_fields = ["name", "created"]


class ClusterViewSet(PortalModelViewSet):
    queryset = selectors.cluster_list()
    serializer_class = s.ClusterSerializer
    filterset_class = filters.ClusterFilterSet
    ordering_fields = ["name", "created", "last_sync_at"]


class RackViewSet(PortalModelViewSet):
    queryset = selectors.rack_list()
    serializer_class = s.RackSerializer
    filterset_class = filters.RackFilterSet
    ordering_fields = ["name", "u_height"]


class ChassisModelViewSet(PortalModelViewSet):
    queryset = selectors.chassis_model_list()
    serializer_class = s.ChassisModelSerializer
    filterset_class = filters.ChassisModelFilterSet
    ordering_fields = ["manufacturer", "name"]


class NodeViewSet(NodeActionsMixin, TimelineMixin, PortalModelViewSet):
    queryset = selectors.node_list()
    timeline_kind = "node"
    serializer_class = s.NodeSerializer
    filterset_class = filters.NodeFilterSet
    ordering_fields = ["hostname", "role", "status", "position", "purchase_cost", "created", "slurm_state"]


class CardModelViewSet(PortalModelViewSet):
    queryset = selectors.card_model_list()
    serializer_class = s.CardModelSerializer
    filterset_class = filters.CardModelFilterSet
    ordering_fields = ["vendor", "name", "tdp_w", "list_price"]


class PortTemplateViewSet(PortalModelViewSet):
    queryset = selectors.port_template_list()
    serializer_class = s.PortTemplateSerializer
    filterset_class = filters.PortTemplateFilterSet


class CardViewSet(TimelineMixin, PortalModelViewSet):
    queryset = selectors.card_list()
    timeline_kind = "card"
    serializer_class = s.CardSerializer
    filterset_class = filters.CardFilterSet
    ordering_fields = ["slot", "serial", "pci_bus_id", "created"]

    def perform_write(self, instance: models.Model) -> models.Model:
        assert isinstance(instance, Card)
        return card_save(instance, user=self.request.user)


class PortViewSet(PortalModelViewSet):
    queryset = selectors.port_list()
    serializer_class = s.PortSerializer
    filterset_class = filters.PortFilterSet
    ordering_fields = ["name", "speed_gbps"]


class CableViewSet(TimelineMixin, PortalModelViewSet):
    queryset = selectors.cable_list()
    timeline_kind = "cable"
    serializer_class = s.CableSerializer
    filterset_class = filters.CableFilterSet
    ordering_fields = ["id", "label", "kind", "status", "length_m"]

    def get_queryset(self) -> models.QuerySet[Any]:
        if self.action == "list":
            return Cable.objects.all()  # the ends come from selectors.cable_ends, below
        return super().get_queryset()

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if self.is_brief:
            return super().list(request, *args, **kwargs)
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        assert page is not None
        context = {**self.get_serializer_context(), "cable_ends": selectors.cable_ends([c.pk for c in page])}
        return self.get_paginated_response(self.get_serializer(page, many=True, context=context).data)

    def perform_create(self, serializer: serializers.BaseSerializer) -> None:
        data: dict[str, Any] = dict(serializer.validated_data)
        serializer.instance = self.reread(cable_connect(user=self.request.user, **data))

    def perform_update(self, serializer: serializers.BaseSerializer) -> None:
        assert isinstance(serializer.instance, Cable)
        serializer.instance = self.reread(
            cable_update(serializer.instance, user=self.request.user, **dict(serializer.validated_data))
        )

    def perform_write(self, instance: models.Model) -> models.Model:
        # Bulk create path: build_instance cannot hold the two ends, so connect explicitly.
        data = getattr(instance, "_cable_data", None)
        assert data is not None
        return cable_connect(user=self.request.user, **data)

    def build_instance(self, data: dict[str, Any], instance: models.Model | None = None) -> models.Model:
        cable = Cable()
        cable._cable_data = data  # type: ignore[attr-defined]
        return cable


class PowerFeedViewSet(PortalModelViewSet):
    queryset = selectors.power_feed_list()
    serializer_class = s.PowerFeedSerializer
    filterset_class = filters.PowerFeedFilterSet


class PSUViewSet(PortalModelViewSet):
    queryset = selectors.psu_list()
    serializer_class = s.PSUSerializer
    filterset_class = filters.PSUFilterSet


class PowerLeadViewSet(PortalModelViewSet):
    queryset = selectors.power_lead_list()
    serializer_class = s.PowerLeadSerializer
    filterset_class = filters.PowerLeadFilterSet
