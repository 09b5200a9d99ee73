"""Writes of the monitoring app (HackSoft-style services), split by subdomain."""

from monitoring.services import energy
from monitoring.services.alerts import (
    alert_acknowledge,
    alert_notify,
    alert_resolve,
    alerts_evaluate,
    alerts_resolve_quiet,
)
from monitoring.services.energy import job_energy_compute, job_energy_estimate
from monitoring.services.ingest import (
    IngestError,
    IngestReport,
    telemetry_ingest_result,
    telemetry_ingest_samples,
    telemetry_ingest_text,
)
from monitoring.services.maintenance import (
    series_relink_cards,
    telemetry_maintain,
    telemetry_partitions_ensure,
    telemetry_retention,
    telemetry_rollup,
)
from monitoring.services.remote_write import telemetry_ingest_remote_write
from monitoring.services.tokens import (
    cluster_token_create,
    node_token_authenticate,
    node_token_create,
    node_token_revoke,
    push_token_authenticate,
)

__all__ = [
    "IngestError",
    "IngestReport",
    "alert_acknowledge",
    "alert_notify",
    "alert_resolve",
    "alerts_evaluate",
    "alerts_resolve_quiet",
    "cluster_token_create",
    "energy",
    "job_energy_compute",
    "job_energy_estimate",
    "node_token_authenticate",
    "node_token_create",
    "node_token_revoke",
    "push_token_authenticate",
    "series_relink_cards",
    "telemetry_ingest_remote_write",
    "telemetry_ingest_result",
    "telemetry_ingest_samples",
    "telemetry_ingest_text",
    "telemetry_maintain",
    "telemetry_partitions_ensure",
    "telemetry_retention",
    "telemetry_rollup",
]
