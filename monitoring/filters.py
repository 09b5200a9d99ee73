"""FilterSets shared by the monitoring pages and API."""

from __future__ import annotations

import django_filters as df

from monitoring.models import Alert


class AlertFilterSet(df.FilterSet):
    class Meta:
        model = Alert
        fields = ["status", "severity", "rule", "node"]
