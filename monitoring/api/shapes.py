"""Request and response shapes of the telemetry endpoints (ingest, series, latest, energy).

They describe what the views read and return, for the OpenAPI schema and generated clients; the
views stay thin over monitoring.services and monitoring.selectors.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from monitoring.parsers import FORMATS
from monitoring.parsers.metrics import METRICS
from monitoring.selectors import ENERGY_GROUPS


class SampleSerializer(serializers.Serializer):
    """One sample of a JSON ingest body."""

    node = serializers.CharField(help_text="The node's hostname.")
    metric = serializers.ChoiceField(choices=sorted(METRICS))
    value = serializers.FloatField()
    ts = serializers.DateTimeField(required=False, help_text="Default: now.")
    card = serializers.CharField(
        required=False, help_text="The card's GPU UUID, PCI bus id or slot; omitted for node metrics."
    )
    labels = serializers.DictField(child=serializers.CharField(), required=False)


class SamplesBodySerializer(serializers.Serializer):
    samples = SampleSerializer(many=True)


class IngestReportSerializer(serializers.Serializer):
    stored = serializers.IntegerField(help_text="Samples stored.")
    events = serializers.IntegerField(help_text="Events (Xid, link down, ...) stored.")
    skipped = serializers.IntegerField()
    duplicates = serializers.IntegerField(help_text="Samples stored before (a resend), not stored again.")
    series_created = serializers.IntegerField()
    unknown_cards = serializers.ListField(child=serializers.CharField())
    problems = serializers.ListField(child=serializers.CharField())
    warnings = serializers.ListField(
        child=serializers.CharField(),
        help_text="What was left out on purpose (unknown fields, series, nodes).",
    )
    alerts = serializers.ListField(child=serializers.IntegerField(), help_text="Alerts opened or updated.")


class IngestErrorSerializer(serializers.Serializer):
    """400 from ingest: nothing was stored."""

    detail = serializers.CharField()
    errors = serializers.ListField(child=serializers.CharField())  # type: ignore[assignment]


class SeriesPointsSerializer(serializers.Serializer):
    id = serializers.IntegerField(
        allow_null=True, help_text="The stored series; null for a Prometheus source's."
    )
    node = serializers.CharField()
    card = serializers.IntegerField(allow_null=True)
    card_ref = serializers.CharField(allow_blank=True)
    labels = serializers.CharField(allow_blank=True, help_text="`key=value,...` that tell series apart.")
    points = serializers.ListField(
        child=serializers.ListField(
            child=serializers.FloatField(allow_null=True), min_length=4, max_length=4
        ),
        help_text="`[epoch seconds, min, avg, max]` per step.",
    )


class SeriesResultSerializer(serializers.Serializer):
    resolution = serializers.CharField(
        help_text="raw, 1m or 1h: the storage the points come from; prometheus: the cluster's Prometheus source."
    )
    step = serializers.IntegerField(help_text="Seconds per point.")
    from_ = serializers.DateTimeField()
    to = serializers.DateTimeField()
    series = SeriesPointsSerializer(many=True)

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["from"] = fields.pop("from_")
        return fields


class LatestValueSerializer(serializers.Serializer):
    series = serializers.IntegerField(
        allow_null=True, help_text="The stored series; null for a Prometheus source's."
    )
    node = serializers.CharField()
    card = serializers.IntegerField(allow_null=True)
    card_ref = serializers.CharField(allow_blank=True)
    metric = serializers.CharField()
    labels = serializers.CharField(allow_blank=True)
    ts = serializers.DateTimeField()
    value = serializers.FloatField()


class EnergyRowSerializer(serializers.Serializer):
    """One group of finished jobs; the group key is the field named by `group_by`."""

    job = serializers.IntegerField(required=False, allow_null=True, help_text="Slurm job id (group_by=job).")
    user = serializers.CharField(required=False, allow_null=True)
    account = serializers.CharField(required=False, allow_null=True)
    month = serializers.CharField(required=False, allow_null=True, help_text="YYYY-MM (group_by=month).")
    jobs = serializers.IntegerField()
    energy_kwh = serializers.FloatField()
    energy_cost = serializers.DecimalField(max_digits=14, decimal_places=4, coerce_to_string=True)
    hardware_cost = serializers.DecimalField(max_digits=14, decimal_places=4, coerce_to_string=True)
    total_cost = serializers.DecimalField(max_digits=14, decimal_places=4, coerce_to_string=True)


TIME_HELP = "ISO 8601, epoch seconds or now-<n><s|m|h|d>"
SERIES_PARAMETERS = [
    OpenApiParameter("metric", OpenApiTypes.STR, required=True, description="e.g. temperature_c"),
    OpenApiParameter("node", OpenApiTypes.STR, description="Hostname."),
    OpenApiParameter("card", OpenApiTypes.STR, description="Card id, GPU UUID or PCI bus id."),
    OpenApiParameter("labels", OpenApiTypes.STR, description="`key=value,...`"),
    OpenApiParameter(
        "from", OpenApiTypes.STR, description=f"Start ({TIME_HELP}); default an hour before `to`."
    ),
    OpenApiParameter("to", OpenApiTypes.STR, description=f"End ({TIME_HELP}); default now."),
    OpenApiParameter("step", OpenApiTypes.INT, description="Seconds per point (default 60)."),
]
LATEST_PARAMETERS = [
    OpenApiParameter("node", OpenApiTypes.STR, description="Hostname."),
    OpenApiParameter("card", OpenApiTypes.STR, description="Card id, GPU UUID or PCI bus id."),
    OpenApiParameter("metric", OpenApiTypes.STR),
]
INGEST_PARAMETERS = [
    OpenApiParameter(
        "format",
        OpenApiTypes.STR,
        enum=sorted(FORMATS),
        description="The tool whose raw output is the body (text/plain); omitted: the body is JSON samples.",
    ),
    OpenApiParameter(
        "node", OpenApiTypes.STR, description="Hostname the tool output is from (default: the node token's)."
    ),
]
ENERGY_PARAMETERS = [
    OpenApiParameter("group_by", OpenApiTypes.STR, enum=list(ENERGY_GROUPS), description="Default `job`."),
    OpenApiParameter("cluster", OpenApiTypes.STR, description="Cluster name."),
]
