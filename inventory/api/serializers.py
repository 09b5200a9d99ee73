from __future__ import annotations

from typing import Any

from rest_framework import serializers

from inventory.models import (
    PSU,
    Cable,
    Card,
    CardModel,
    ChassisModel,
    Cluster,
    Node,
    Port,
    PortTemplate,
    PowerFeed,
    PowerLead,
    Rack,
    Site,
)
from inventory.models.devices import MAX_ETH_CHANNEL
from portal.api.serializers import BriefRelatedField, PortalModelSerializer, brief, object_url_for

BASE = ["id", "url", "display"]
STAMPS = ["created", "last_updated"]


class SiteSerializer(PortalModelSerializer):
    rack_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Site
        fields = [*BASE, "name", "description", "address", "rack_count", *STAMPS]


class ClusterSerializer(PortalModelSerializer):
    node_count = serializers.IntegerField(read_only=True)
    stale = serializers.SerializerMethodField()

    class Meta:
        model = Cluster
        fields = [
            *BASE,
            "name",
            "description",
            "site",
            "backend",
            "ssh_host",
            "ssh_port",
            "ssh_user",
            "ssh_host_key",
            "ssh_key_path",
            "slurm_conf",
            "last_sync_at",
            "last_sync_ok_at",
            "last_sync_error",
            "sync_failing_since",
            "last_sync_warnings",
            "stale",
            "node_count",
            *STAMPS,
        ]
        infrastructure_fields = [
            "ssh_host",
            "ssh_port",
            "ssh_user",
            "ssh_host_key",
            "ssh_key_path",
            "slurm_conf",
            "last_sync_error",
            "last_sync_warnings",
        ]

    def get_stale(self, obj: Cluster) -> bool:
        return bool(obj.last_sync_error)


class RackSerializer(PortalModelSerializer):
    node_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Rack
        fields = [*BASE, "name", "site", "u_height", "description", "node_count", *STAMPS]


class ChassisModelSerializer(PortalModelSerializer):
    class Meta:
        model = ChassisModel
        fields = [
            *BASE,
            "manufacturer",
            "name",
            "u_height",
            "airflow",
            "base_power_w",
            "card_slots",
            "pcie_lanes_per_slot",
            *STAMPS,
        ]


class NodeSerializer(PortalModelSerializer):
    card_count = serializers.IntegerField(read_only=True)
    bmc_password = serializers.CharField(
        write_only=True, required=False, allow_blank=True, style={"input_type": "password"}
    )

    class Meta:
        model = Node
        fields = [
            *BASE,
            "hostname",
            "cluster",
            "role",
            "chassis",
            "status",
            "rack",
            "position",
            "u_height",
            "slurm_name",
            "bmc_kind",
            "bmc_address",
            "bmc_username",
            "bmc_password",
            "purchase_cost",
            "purchase_date",
            "base_power_w",
            "notes",
            "slurm_state",
            "slurm_reason",
            "slurm_state_since",
            "card_count",
            *STAMPS,
        ]
        read_only_fields = ["slurm_state", "slurm_reason", "slurm_state_since"]
        infrastructure_fields = ["bmc_kind", "bmc_address", "bmc_username", "bmc_password"]


def eth_channels_field() -> serializers.ListField:
    return serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=MAX_ETH_CHANNEL),
        required=False,
        help_text=str(PortTemplate._meta.get_field("eth_channels").help_text),
    )


class PortTemplateSerializer(PortalModelSerializer):
    eth_channels = eth_channels_field()

    class Meta:
        model = PortTemplate
        fields = [*BASE, "card_model", "name", "kind", "speed_gbps", "eth_channels"]


class NestedPortTemplateSerializer(serializers.ModelSerializer):
    eth_channels = eth_channels_field()

    class Meta:
        model = PortTemplate
        fields = ["id", "name", "kind", "speed_gbps", "eth_channels"]


class CardModelSerializer(PortalModelSerializer):
    port_templates = NestedPortTemplateSerializer(many=True, read_only=True)
    card_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = CardModel
        fields = [
            *BASE,
            "vendor",
            "name",
            "memory_gb",
            "memory_type",
            "tflops_fp8",
            "tflops_fp16",
            "tflops_fp32",
            "tdp_w",
            "list_price",
            "cooling",
            "min_airflow",
            "power_connector",
            "pcie_lanes",
            "port_templates",
            "card_count",
            *STAMPS,
        ]


class CardSerializer(PortalModelSerializer):
    class Meta:
        model = Card
        fields = [
            *BASE,
            "node",
            "card_model",
            "slot",
            "status",
            "serial",
            "pci_bus_id",
            "gpu_uuid",
            "firmware_version",
            "driver_version",
            *STAMPS,
        ]


class PortSerializer(PortalModelSerializer):
    card = BriefRelatedField(queryset=Card.objects.all(), required=False, allow_null=True)
    cable = serializers.SerializerMethodField()

    class Meta:
        model = Port
        fields = [*BASE, "node", "card", "name", "kind", "speed_gbps", "description", "cable"]

    def get_cable(self, obj: Port) -> dict[str, Any] | None:
        term = getattr(obj, "termination", None)
        if term is None:
            return None
        return {"id": term.cable_id, "end": term.end}


class CableEndField(BriefRelatedField):
    """A cable end: `{id, url, display, node, card}`; lists read it from `cable_ends` (one flat query)."""

    def get_attribute(self, instance: Any) -> Any:
        ends = self.context.get("cable_ends")
        if ends is not None:
            return ends.get(instance.pk, {}).get(str(self.field_name)[0])  # "a_port" -> end "a"
        return super().get_attribute(instance)

    def to_representation(self, value: Any) -> Any:
        if isinstance(value, dict):
            url = object_url_for(Port, value["id"], self.context.get("request"))
            return {
                "id": value["id"],
                "url": url,
                "display": value["name"],
                "node": value["node"],
                "card": value["card"],
            }
        data = brief(value, self.context.get("request"))
        if data is not None:
            data["node"] = value.node.hostname
            card = value.card
            data["card"] = str(card) if card is not None else None
        return data


class CableSerializer(PortalModelSerializer):
    a_port = CableEndField(queryset=Port.objects.select_related("node"))
    b_port = CableEndField(queryset=Port.objects.select_related("node"))

    class Meta:
        model = Cable
        fields = [*BASE, "a_port", "b_port", "kind", "status", "length_m", "label", "description", *STAMPS]


class PowerFeedSerializer(PortalModelSerializer):
    available_power_w = serializers.IntegerField(read_only=True)

    class Meta:
        model = PowerFeed
        fields = [
            *BASE,
            "name",
            "site",
            "rack",
            "voltage",
            "amperage",
            "phase",
            "max_utilization_pct",
            "available_power_w",
            "description",
            *STAMPS,
        ]


class PSUSerializer(PortalModelSerializer):
    class Meta:
        model = PSU
        fields = [
            *BASE,
            "name",
            "node",
            "feed",
            "capacity_w",
            "efficiency_pct",
            "redundant",
            "model",
            *STAMPS,
        ]


class PowerLeadSerializer(PortalModelSerializer):
    effective_rating_w = serializers.IntegerField(read_only=True)

    class Meta:
        model = PowerLead
        fields = [
            *BASE,
            "psu",
            "name",
            "kind",
            "rating_w",
            "effective_rating_w",
            "card",
            "node",
            "wire_gauge_awg",
            *STAMPS,
        ]
