"""FilterSets shared by the monitoring pages and API."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from monitoring.models import Alert, NodeHealth
from portal.filters import PortalFilterSet


class AlertFilterSet(PortalFilterSet):
    labels = {"status": _("Status"), "severity": _("Severity"), "rule": _("Rule"), "node": _("Node")}

    class Meta:
        model = Alert
        fields = ["status", "severity", "rule", "node"]


class NodeHealthFilterSet(PortalFilterSet):
    labels = {"status": _("Status"), "health_check": _("Check"), "node": _("Node")}

    class Meta:
        model = NodeHealth
        fields = ["status", "health_check", "node"]
