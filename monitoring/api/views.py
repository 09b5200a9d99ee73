"""Thin API adapters over monitoring selectors and services."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.authentication import SessionAuthentication
from rest_framework.decorators import action
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from monitoring import selectors, services
from monitoring.api.authentication import NodeTokenAuthentication
from monitoring.api.serializers import AlertRuleSerializer, AlertSerializer, EventSerializer
from monitoring.filters import AlertFilterSet
from monitoring.models import Alert, AlertRule, Event, NodeToken
from monitoring.parsers import FORMATS
from portal.api.authentication import TokenAuthentication
from portal.api.permissions import HasPerm
from portal.api.viewsets import PortalModelViewSet
from portal.jsonsafe import json_loads
from portal.models import APIToken


class CanIngest(permissions.BasePermission):
    """A node token, or a user allowed to add samples through a write-enabled token or session."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if isinstance(request.auth, NodeToken):
            return True
        if isinstance(request.auth, APIToken) and not request.auth.write_enabled:
            return False
        user = request.user
        return bool(user and user.is_authenticated and user.has_perm("monitoring.add_sample"))


def _bad(errors: list[str]) -> Response:
    return Response(
        {"detail": errors[0] if errors else _("Malformed body."), "errors": errors},
        status=status.HTTP_400_BAD_REQUEST,
    )


class JSONOnlyNegotiation(DefaultContentNegotiation):
    """`?format=` names the tool output here, not DRF's response format: always answer JSON."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        first = next(iter(renderers))
        return first, first.media_type


class IngestView(APIView):
    """POST JSON samples, or a raw tool output with `?format=<name>&node=<hostname>`.

    202 with what was stored; 400 with the reasons (nothing stored). A node token may only send
    its own node's telemetry.
    """

    authentication_classes = [NodeTokenAuthentication, TokenAuthentication, SessionAuthentication]
    permission_classes = [CanIngest]
    content_negotiation_class = JSONOnlyNegotiation

    def post(self, request: Request) -> Response:
        token_node = request.auth.node.hostname if isinstance(request.auth, NodeToken) else None
        fmt = request.query_params.get("format")
        raw = request.body
        try:
            if fmt:
                if fmt not in FORMATS:
                    return _bad(
                        [
                            _("Unknown format %(f)r; known: %(k)s")
                            % {"f": fmt, "k": ", ".join(sorted(FORMATS))}
                        ]
                    )
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
                    body = json_loads(raw)
                except (ValueError, UnicodeDecodeError) as exc:  # TooDeep is a ValueError
                    return _bad([_("Malformed JSON: %(e)s") % {"e": exc}])
                if isinstance(body, dict) and isinstance(body.get("samples"), list):
                    body = body["samples"]
                if not isinstance(body, list):
                    return _bad([_("Expected a JSON list of samples (or ?format= with a tool output).")])
                report = services.telemetry_ingest_samples(body, only_node=token_node)
        except services.IngestError as exc:
            return _bad(exc.errors)
        return Response(report.as_dict(), status=status.HTTP_202_ACCEPTED)


def _when(raw: str | None, default: dt.datetime) -> dt.datetime:
    if not raw:
        return default
    if raw.lstrip("-").replace(".", "", 1).isdigit():
        return dt.datetime.fromtimestamp(float(raw), tz=dt.UTC)
    if raw.startswith("now-") and raw[4:-1].isdigit() and raw[-1] in "smhd":
        unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}[raw[-1]]
        return timezone.now() - dt.timedelta(seconds=int(raw[4:-1]) * unit)
    parsed = parse_datetime(raw.replace(" ", "+"))
    if parsed is None:
        raise ValueError(_("not a time: %(v)r (ISO 8601, epoch seconds or now-<n><s|m|h|d>)") % {"v": raw})
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


class SeriesView(APIView):
    """GET ?card=|node=&metric=&from=&to=&step=: min/avg/max per step from the fitting resolution."""

    permission_classes = [HasPerm.of("monitoring.view_sample")]

    def get(self, request: Request) -> Response:
        q = request.query_params
        now = timezone.now()
        try:
            if not q.get("metric"):
                raise ValueError(_("'metric' is required"))
            end = _when(q.get("to"), now)
            start = _when(q.get("from"), end - dt.timedelta(hours=1))
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
        return Response(result.as_dict())


class LatestView(APIView):
    """GET ?node=&card=&metric=: the newest value of each matching series (values-based, lean)."""

    permission_classes = [HasPerm.of("monitoring.view_latestvalue")]

    def get(self, request: Request) -> Response:
        q = request.query_params
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

    @action(detail=True, methods=["post"], permission_classes=[HasPerm.of("monitoring.acknowledge_alert")])
    def acknowledge(self, request: Request, pk: str | None = None) -> Response:
        return self._transition(request, services.alert_acknowledge)

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
