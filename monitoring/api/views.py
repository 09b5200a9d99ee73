"""Thin API adapters over monitoring selectors and services."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.authentication import SessionAuthentication
from rest_framework.decorators import action
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from monitoring import selectors, services
from monitoring.api import shapes
from monitoring.api.authentication import NodeTokenAuthentication, PushTokenAuthentication
from monitoring.api.serializers import (
    AlertRuleSerializer,
    AlertSerializer,
    EventSerializer,
    PrometheusSourceSerializer,
)
from monitoring.filters import AlertFilterSet
from monitoring.models import Alert, AlertRule, ClusterToken, Event, NodeToken
from monitoring.parsers import FORMATS
from monitoring.promql import PromError
from portal.api.authentication import TokenAuthentication
from portal.api.permissions import HasPerm
from portal.api.schema import ErrorDetailSerializer
from portal.api.viewsets import PortalModelViewSet
from portal.jsonsafe import json_loads_records
from portal.models import APIToken


class CanIngest(permissions.BasePermission):
    """A node token, or a user allowed to add samples through a write-enabled token or session;
    what the endpoint accepts (GET) is for anyone signed in."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if isinstance(request.auth, NodeToken | ClusterToken):
            return True
        user = request.user
        if request.method in permissions.SAFE_METHODS:
            return bool(user and user.is_authenticated)
        if isinstance(request.auth, APIToken) and not request.auth.write_enabled:
            return False
        return bool(user and user.is_authenticated and user.has_perm("monitoring.add_sample"))


def _bad(errors: list[str]) -> Response:
    return Response(
        {"detail": errors[0] if errors else _("Malformed body."), "errors": errors},
        status=status.HTTP_400_BAD_REQUEST,
    )


# What a body may be declared as. JSON samples: application/json (or a +json type). A tool's
# output (?format=): the types its output is served or saved as, and text/plain for all.
JSON_TYPES = ("application/json",)
TEXT = "text/plain"
FORMAT_TYPES: dict[str, tuple[str, ...]] = {
    "nvidia-smi-csv": (TEXT, "text/csv"),
    "nvidia-smi-xml": (TEXT, "application/xml", "text/xml"),
    "prometheus": (TEXT, "application/openmetrics-text"),
    "dcgm-exporter": (TEXT, "application/openmetrics-text"),
    "node-exporter": (TEXT, "application/openmetrics-text"),
    "tt-smi": (TEXT, "application/json"),
    "tt-link-status": (TEXT,),
    "ipmitool-sdr": (TEXT, "text/csv"),
    "ipmitool-sensor": (TEXT,),
    "redfish": ("application/json", TEXT),
    "kernel-log": (TEXT,),
}
# No type said: curl --data-binary sends application/x-www-form-urlencoded unless told otherwise,
# and generic clients application/octet-stream; the body is then read as ?format= (or JSON) says.
UNDECLARED_TYPES = frozenset({"", "application/octet-stream", "application/x-www-form-urlencoded"})


def _media_type(request: Request) -> str:
    return request.META.get("CONTENT_TYPE", "").split(";", 1)[0].strip().lower()


def _is_json_type(media: str) -> bool:
    return media in JSON_TYPES or (media.startswith("application/") and media.endswith("+json"))


def _unsupported(media: str, fmt: str | None) -> Response:
    accepted = list(FORMAT_TYPES[fmt]) if fmt else list(JSON_TYPES)
    if fmt:
        detail = _("A %(format)s body is sent as %(types)s, not %(media)s.") % {
            "format": fmt,
            "types": ", ".join(accepted),
            "media": media,
        }
    else:
        detail = _(
            "JSON samples are sent as application/json, not %(media)s; a tool's output needs "
            "?format=<tool>&node=<hostname>."
        ) % {"media": media}
    return Response({"detail": detail, "accepted": accepted}, status=status.HTTP_415_UNSUPPORTED_MEDIA_TYPE)


def _too_large(limit: int) -> Response:
    return Response(
        {
            "detail": _("The request body is larger than the limit of %(limit)s bytes.")
            % {"limit": f"{limit:,}"},
            "limit": limit,
        },
        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    )


_TOO_LARGE = OpenApiResponse(
    inline_serializer(
        "IngestTooLarge", {"detail": serializers.CharField(), "limit": serializers.IntegerField()}
    ),
    description="The body is larger than PORTAL_TELEMETRY_MAX_BODY_BYTES.",
)


def _read_body(request: Request, limit: int) -> bytes | None:
    """The body, or ``None`` when it is larger than ``limit`` (by its Content-Length, or read up
    to one byte past the limit when it has none)."""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        return None
    raw = request._request.read(limit + 1)  # not .body: its size check answers with an HTML 400
    return None if len(raw) > limit else raw


def ingest_formats() -> dict[str, Any]:
    """What the ingest endpoint takes (its GET answer)."""
    return {
        "json": {
            "content_types": list(JSON_TYPES),
            "shape": "[{ts, node, card, metric, value, labels?}, ...] or {samples: [...]}",
        },
        "formats": [{"name": name, "content_types": list(FORMAT_TYPES[name])} for name in sorted(FORMATS)],
        "max_body_bytes": settings.PORTAL_TELEMETRY_MAX_BODY_BYTES,
    }


class JSONOnlyNegotiation(DefaultContentNegotiation):
    """`?format=` names the tool output here, not DRF's response format: always answer JSON."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        first = next(iter(renderers))
        return first, first.media_type


NVIDIA_SMI_EXAMPLE = (
    "0, GPU-5e1f0c2a-77aa-4c1e-9d0b-1f2e3d4c5b6a, 00000000:3B:00.0, NVIDIA H100 80GB HBM3, 41, 38, 68.40, "
    "700.00, 0, 3, 81559, 0, 1980, 2619, 5, 16, [N/A], 0, 0, 0x0000000000000001\n"
)
INGEST_EXAMPLES = [
    OpenApiExample(
        "JSON samples (a list; one shown)",
        request_only=True,
        media_type="application/json",
        value={
            "node": "gpu01",
            "card": "GPU-5e1f0c2a-77aa-4c1e-9d0b-1f2e3d4c5b6a",
            "metric": "temperature_c",
            "value": 41.0,
            "ts": "2026-12-01T09:00:00Z",
        },
    ),
    OpenApiExample(
        "nvidia-smi CSV (?format=nvidia-smi-csv&node=gpu01)",
        request_only=True,
        media_type="text/plain",
        value=NVIDIA_SMI_EXAMPLE,
    ),
    OpenApiExample(
        "tt-smi snapshot JSON (?format=tt-smi&node=rig01)",
        request_only=True,
        media_type="text/plain",
        value='{"time": "2026-12-01T09:00:00", "host_info": {"Hostname": "rig01"}, "device_info": [...]}',
    ),
    OpenApiExample(
        "dcgm-exporter metrics (?format=dcgm-exporter&node=gpu07)",
        request_only=True,
        media_type="text/plain",
        value="# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
        'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-5e1f0c2a-77aa",Hostname="gpu07"} 41\n',
    ),
    OpenApiExample(
        "Stored",
        response_only=True,
        status_codes=["202"],
        value={
            "stored": 20,
            "events": 0,
            "skipped": 0,
            "series_created": 0,
            "unknown_cards": [],
            "problems": [],
            "alerts": [],
        },
    ),  # fmt: skip
]


class IngestView(APIView):
    """POST JSON samples (application/json), or a raw tool output with `?format=<name>&node=<hostname>`
    (text/plain, or the tool's own type: see GET).

    202 with what was stored; 400 with the reasons (nothing stored); 413 over the body limit
    (``PORTAL_TELEMETRY_MAX_BODY_BYTES``); 415 when the declared Content-Type does not fit the
    body. A node token may only send its own node's telemetry. GET says what the endpoint takes.
    """

    authentication_classes = [NodeTokenAuthentication, TokenAuthentication, SessionAuthentication]
    permission_classes = [CanIngest]
    content_negotiation_class = JSONOnlyNegotiation

    @extend_schema(
        responses=inline_serializer(
            "IngestFormats",
            {
                "json": serializers.DictField(),
                "formats": serializers.ListField(child=serializers.DictField()),
                "max_body_bytes": serializers.IntegerField(),
            },
        )
    )
    def get(self, request: Request) -> Response:
        return Response(ingest_formats())

    @extend_schema(
        parameters=shapes.INGEST_PARAMETERS,
        request={
            "application/json": shapes.SampleSerializer(many=True),
            "text/plain": OpenApiTypes.STR,
        },
        responses={
            202: shapes.IngestReportSerializer,
            400: shapes.IngestErrorSerializer,
            413: _TOO_LARGE,
            415: OpenApiResponse(
                inline_serializer(
                    "IngestUnsupportedType",
                    {
                        "detail": serializers.CharField(),
                        "accepted": serializers.ListField(child=serializers.CharField()),
                    },
                ),
                description="The Content-Type does not fit the body (`accepted` lists those that do).",
            ),
        },
        examples=INGEST_EXAMPLES,
    )
    def post(self, request: Request) -> Response:
        token_node = request.auth.node.hostname if isinstance(request.auth, NodeToken) else None
        fmt = request.query_params.get("format")
        if fmt and fmt not in FORMATS:
            return _bad(
                [_("Unknown format %(f)r; known: %(k)s") % {"f": fmt, "k": ", ".join(sorted(FORMATS))}]
            )
        media = _media_type(request)
        if media not in UNDECLARED_TYPES and not (
            media in FORMAT_TYPES[fmt] if fmt else _is_json_type(media)
        ):
            return _unsupported(media, fmt)
        limit = settings.PORTAL_TELEMETRY_MAX_BODY_BYTES
        raw = _read_body(request, limit)
        if raw is None:
            return _too_large(limit)
        try:
            if fmt:
                node = request.query_params.get("node") or token_node
                if not node:
                    return _bad([_("'node' is required with 'format'.")])
                if token_node is not None and node != token_node:
                    return _bad([_("This token may only send telemetry for %(n)s.") % {"n": token_node}])
                report = services.telemetry_ingest_text(
                    fmt, raw.decode("utf-8", "replace"), node_hostname=node
                )
            else:
                try:
                    body = json_loads_records(raw)
                except (ValueError, UnicodeDecodeError) as exc:  # TooDeep is a ValueError
                    return _bad([_("Malformed JSON: %(e)s") % {"e": exc}])
                except RecursionError:
                    return _bad([_("Malformed JSON: nested too deeply")])
                if isinstance(body, dict) and isinstance(body.get("samples"), list):
                    body = body["samples"]
                if not isinstance(body, list):
                    return _bad([_("Expected a JSON list of samples (or ?format= with a tool output).")])
                report = services.telemetry_ingest_samples(body, only_node=token_node)
        except services.IngestError as exc:
            return _bad(exc.errors)
        return Response(report.as_dict(), status=status.HTTP_202_ACCEPTED)


REMOTE_WRITE_TYPE = "application/x-protobuf"


class RemoteWriteView(APIView):
    """Prometheus remote write 1.0 (what Prometheus, Grafana Alloy and vmagent send): a snappy-compressed
    protobuf WriteRequest, authenticated with a cluster token (`rpc_…`, any node of the cluster), a node
    token (`rpn_…`, that node) or a user token allowed to add samples.

    dcgm-exporter and node_exporter series are mapped to nodes, cards and metrics with the cluster's
    Prometheus source mapping (the defaults without one); other series, and nodes the inventory does not
    know, are skipped and named in `warnings`. 202 with what was stored; 400 for a body that does not
    decode (nothing stored); 413 over the body limit; 415 for another encoding, type or protocol version.
    """

    authentication_classes = [PushTokenAuthentication, TokenAuthentication]
    permission_classes = [CanIngest]
    content_negotiation_class = JSONOnlyNegotiation

    @extend_schema(
        operation_id="monitoring_remote_write",
        parameters=[
            OpenApiParameter(
                "Content-Encoding", str, OpenApiParameter.HEADER, required=True, enum=["snappy"]
            ),
            OpenApiParameter(
                "X-Prometheus-Remote-Write-Version", str, OpenApiParameter.HEADER, enum=["0.1.0"]
            ),
        ],
        request={REMOTE_WRITE_TYPE: OpenApiTypes.BINARY},
        responses={
            202: shapes.IngestReportSerializer,
            400: shapes.IngestErrorSerializer,
            413: _TOO_LARGE,
            415: OpenApiResponse(
                ErrorDetailSerializer,
                description="Not snappy-encoded application/x-protobuf, or remote write 2.0.",
            ),
        },
    )
    def post(self, request: Request) -> Response:
        media, _sep, params = request.META.get("CONTENT_TYPE", "").partition(";")
        encoding = request.META.get("HTTP_CONTENT_ENCODING", "").strip().lower()
        if (
            media.strip().lower() != REMOTE_WRITE_TYPE
            or encoding != "snappy"
            or "io.prometheus.write.v2" in params
        ):
            return Response(
                {
                    "detail": _(
                        "Remote write 1.0 is accepted: Content-Type application/x-protobuf with "
                        "Content-Encoding snappy."
                    )
                },
                status=status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
            )
        limit = settings.PORTAL_TELEMETRY_MAX_BODY_BYTES
        raw = _read_body(request, limit)
        if raw is None:
            return _too_large(limit)
        try:
            report = services.telemetry_ingest_remote_write(raw, token=request.auth)
        except services.IngestError as exc:
            return _bad(exc.errors)
        return Response(report.as_dict(), status=status.HTTP_202_ACCEPTED)


def _when(raw: str | None, now: dt.datetime) -> dt.datetime | None:
    """A time of the series query: ISO 8601, epoch seconds or ``now-<n><s|m|h|d>`` (before the
    request's ``now``: one clock for both ends, so that ``from=now-5m`` spans exactly 5 minutes up
    to the default ``to``); None when not given; ValueError (a 400) for anything else, times
    beyond what a datetime holds included."""
    if not raw:
        return None
    try:
        if raw.lstrip("-").replace(".", "", 1).isdigit():
            return dt.datetime.fromtimestamp(float(raw), tz=dt.UTC)
        if raw.startswith("now-") and raw[4:-1].isdigit() and raw[-1] in "smhd":
            unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}[raw[-1]]
            return now - dt.timedelta(seconds=int(raw[4:-1]) * unit)
        parsed = parse_datetime(raw.replace(" ", "+"))
    except (OverflowError, OSError, ValueError):
        raise ValueError(_("time out of range: %(v)r") % {"v": raw[:40]}) from None
    if parsed is None:
        raise ValueError(_("not a time: %(v)r (ISO 8601, epoch seconds or now-<n><s|m|h|d>)") % {"v": raw})
    # in UTC: ISO 8601 allows offsets PostgreSQL refuses (-21:31)
    return parsed.astimezone(dt.UTC) if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def prometheus_error(exc: PromError) -> Response:
    """503 when the cluster's Prometheus source cannot be reached, 502 when it answered an error."""
    if exc.kind == "unreachable":
        detail = _("The cluster's Prometheus source cannot be reached: %(reason)s") % {"reason": exc.message}
        return Response({"detail": detail}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
    detail = _("The cluster's Prometheus source answered an error: %(reason)s") % {"reason": exc.message}
    return Response({"detail": detail}, status=status.HTTP_502_BAD_GATEWAY)


class SeriesView(APIView):
    """GET ?card=|node=&metric=&from=&to=&step=: min/avg/max per step from the fitting resolution."""

    permission_classes = [HasPerm.of("monitoring.view_sample")]

    @extend_schema(
        parameters=shapes.SERIES_PARAMETERS,
        responses={
            200: shapes.SeriesResultSerializer,
            400: ErrorDetailSerializer,
            502: OpenApiResponse(
                ErrorDetailSerializer, description="The cluster's Prometheus source answered an error."
            ),
            503: OpenApiResponse(
                ErrorDetailSerializer, description="The cluster's Prometheus source cannot be reached."
            ),
        },
        examples=[
            OpenApiExample(
                "A card's temperature, last 6 hours, 5-minute points",
                response_only=True,
                value={
                    "resolution": "1m",
                    "step": 300,
                    "from": "2026-12-01T03:00:00+00:00",
                    "to": "2026-12-01T09:00:00+00:00",
                    "series": [
                        {
                            "id": 17,
                            "node": "gpu01",
                            "card": 3,
                            "card_ref": "GPU-5e1f0c2a-77aa-4c1e-9d0b-1f2e3d4c5b6a",
                            "labels": "",
                            "points": [[1796094000, 40.0, 41.2, 43.0]],
                        }
                    ],
                },
            )
        ],
    )
    def get(self, request: Request) -> Response:
        q = request.query_params
        now = timezone.now()
        try:
            if not q.get("metric"):
                raise ValueError(_("'metric' is required"))
            end = _when(q.get("to"), now) or now
            start = _when(q.get("from"), now) or end - dt.timedelta(hours=1)
            step = int(q.get("step", "60"))
            result = selectors.series_query(
                metric=q["metric"],
                start=start,
                end=end,
                step=step,
                node=q.get("node"),
                card=q.get("card"),
                labels=q.get("labels"),
                now=now,
            )
        except ValueError as exc:  # SeriesQueryError is a ValueError
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        except OverflowError:  # a range reaching past year 1 or 9999
            return Response({"detail": _("time out of range")}, status=status.HTTP_400_BAD_REQUEST)
        except PromError as exc:
            return prometheus_error(exc)
        return Response(result.as_dict())


class LatestView(APIView):
    """GET ?node=&card=&metric=: the newest value of each matching series (values-based, lean).

    A batch's latest values are committed just after its samples (written behind them, within
    milliseconds), so a read between the two sees the previous value of a series, never an older one."""

    permission_classes = [HasPerm.of("monitoring.view_latestvalue")]

    @extend_schema(
        parameters=shapes.LATEST_PARAMETERS,
        responses={
            200: shapes.LatestValueSerializer(many=True),
            502: OpenApiResponse(
                ErrorDetailSerializer, description="The cluster's Prometheus source answered an error."
            ),
            503: OpenApiResponse(
                ErrorDetailSerializer, description="The cluster's Prometheus source cannot be reached."
            ),
        },
    )
    def get(self, request: Request) -> Response:
        q = request.query_params
        target = (
            selectors.prometheus_target(node=q.get("node"), card=q.get("card"))
            if q.get("node") or q.get("card")
            else None
        )
        if target is not None:  # an instant query to the cluster's Prometheus source
            from monitoring.prometheus_source import prometheus_latest

            try:
                return Response(
                    prometheus_latest(target[0], node=target[1], card=target[2], metric=q.get("metric"))
                )
            except PromError as exc:
                return prometheus_error(exc)
        qs = selectors.latest_value_list(node=q.get("node"), card=q.get("card"), metric=q.get("metric"))
        rows = list(
            qs.values(
                "series_id",
                "series__node__hostname",
                "series__card_id",
                "series__card_ref",
                "series__metric",
                "series__labels",
                "ts",
                "value",
            )[:5000]
        )
        return Response(
            [
                {
                    "series": r["series_id"],
                    "node": r["series__node__hostname"],
                    "card": r["series__card_id"],
                    "card_ref": r["series__card_ref"],
                    "metric": r["series__metric"],
                    "labels": r["series__labels"],
                    "ts": r["ts"],
                    "value": r["value"],
                }
                for r in rows
            ]
        )


class AlertRuleViewSet(PortalModelViewSet):
    queryset = AlertRule.objects.select_related("cluster")
    serializer_class = AlertRuleSerializer
    filterset_fields = ["enabled", "kind", "metric", "severity", "cluster"]


class PrometheusSourceViewSet(PortalModelViewSet):
    """Clusters' Prometheus sources. `POST …/{id}/check/` asks the server for `up` with the stored
    settings and says whether it answered (the number of `up` series) or why not."""

    queryset = selectors.prometheus_source_list()
    serializer_class = PrometheusSourceSerializer
    filterset_fields = ["cluster", "enabled"]

    @extend_schema(
        request=None,
        responses={
            200: inline_serializer(
                "PrometheusCheck",
                {
                    "reachable": serializers.BooleanField(),
                    "up_series": serializers.IntegerField(allow_null=True),
                    "error": serializers.CharField(allow_blank=True),
                },
            )
        },
        filters=False,
    )
    @action(
        detail=True, methods=["post"], permission_classes=[HasPerm.of("monitoring.view_prometheussource")]
    )
    def check(self, request: Request, pk: str | None = None) -> Response:
        from monitoring.prometheus_source import prometheus_check

        try:
            up = prometheus_check(self.get_object())
        except PromError as exc:
            return Response(
                {"reachable": False, "up_series": None, "error": prometheus_error(exc).data["detail"]}
            )
        return Response({"reachable": True, "up_series": up, "error": ""})


class AlertViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = AlertSerializer
    queryset = Alert.objects.all()
    filterset_class = AlertFilterSet

    def get_queryset(self) -> QuerySet[Alert]:
        return selectors.alert_list()

    def _transition(self, request: Request, service: Any) -> Response:
        alert = self.get_object()
        try:
            alert = service(alert=alert, user=request.user)
        except DjangoValidationError as exc:
            return Response({"detail": exc.messages[0]}, status=status.HTTP_403_FORBIDDEN)
        return Response(AlertSerializer(alert, context={"request": request}).data)

    @extend_schema(request=None, responses={200: AlertSerializer, 403: ErrorDetailSerializer}, filters=False)
    @action(detail=True, methods=["post"], permission_classes=[HasPerm.of("monitoring.acknowledge_alert")])
    def acknowledge(self, request: Request, pk: str | None = None) -> Response:
        return self._transition(request, services.alert_acknowledge)

    @extend_schema(request=None, responses={200: AlertSerializer, 403: ErrorDetailSerializer}, filters=False)
    @action(detail=True, methods=["post"], permission_classes=[HasPerm.of("monitoring.acknowledge_alert")])
    def resolve(self, request: Request, pk: str | None = None) -> Response:
        return self._transition(request, services.alert_resolve)


class EventViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = EventSerializer
    queryset = Event.objects.all()
    filterset_fields = ["kind", "severity", "node"]

    def get_queryset(self) -> QuerySet[Event]:
        return selectors.event_list()


class EnergyView(APIView):
    """GET ?group_by=job|user|account|month[&cluster=]: energy (kWh) and cost of finished jobs."""

    permission_classes = [HasPerm.of("monitoring.view_jobenergy")]

    @extend_schema(
        parameters=shapes.ENERGY_PARAMETERS,
        responses={200: shapes.EnergyRowSerializer(many=True), 400: ErrorDetailSerializer},
    )
    def get(self, request: Request) -> Response:
        try:
            rows = selectors.job_energy_summary(
                user=request.user,
                group_by=request.query_params.get("group_by", "job"),
                cluster=request.query_params.get("cluster"),
            )
        except ValueError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        return Response(rows)
