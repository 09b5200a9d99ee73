"""Signals of the monitoring app.

``telemetry_ingested`` is sent after each ingest batch COMMITS, with the ids that changed, so that
live updates (websockets, issue 7) can re-read and push them. Receivers must be quick.
"""

from django.dispatch import Signal

# kwargs: node_ids: set[int], card_ids: set[int], alert_ids: set[int]
telemetry_ingested = Signal()
