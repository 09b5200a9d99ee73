"""Prometheus remote write into the portal's store: the series a Prometheus (or Grafana Alloy,
vmagent) forwards are mapped to nodes, cards and metrics with the cluster's mapping and go through
the one ingest path (:func:`telemetry_ingest_result`)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from django.utils.translation import gettext as _

from inventory.models import Node
from monitoring.models import ClusterToken, NodeToken, PrometheusSource
from monitoring.parsers import ParseError, ParseResult
from monitoring.parsers.prom_mapping import PromMapping, results_by_node
from monitoring.parsers.remote_write import parse_write_request
from monitoring.services.ingest import IngestError, IngestReport, _nodes_by_name, telemetry_ingest_result


def remote_write_mapping(token: Any) -> PromMapping:
    """The mapping of the token's cluster's Prometheus source; the default one without."""
    cluster_id = None
    if isinstance(token, ClusterToken):
        cluster_id = token.cluster_id
    elif isinstance(token, NodeToken):
        cluster_id = token.node.cluster_id
    data = (
        PrometheusSource.objects.filter(cluster_id=cluster_id).values_list("mapping", flat=True).first()
        if cluster_id is not None
        else None
    )
    return PromMapping.from_data(data)


def _allowed(node: Node, token: Any) -> bool:
    if isinstance(token, NodeToken):
        return node.pk == token.node_id
    if isinstance(token, ClusterToken):
        return node.cluster_id == token.cluster_id
    return True  # a user allowed to add samples: any node


def telemetry_ingest_remote_write(body: bytes, *, token: Any = None) -> IngestReport:
    """Ingest one remote-write body (snappy-compressed protobuf ``WriteRequest``).

    ``token``: the NodeToken or ClusterToken that sent it (None: a user allowed to add samples).
    Series the mapping does not know, of nodes the inventory does not know or the token may not
    write for are skipped and named in the report's warnings (a Prometheus forwards everything it
    scrapes; refusing the batch would make it drop the rest). Undecodable bodies: IngestError.
    """
    now = timezone.now()
    try:
        series = parse_write_request(body)
    except ParseError as exc:
        raise IngestError([_("Cannot decode the remote-write body: %(reason)s") % {"reason": exc}])
    mapping = remote_write_mapping(token)
    by_node, unmapped = results_by_node(((s.name, s.labels, s.samples) for s in series), mapping)
    nodes = _nodes_by_name(by_node)
    result = ParseResult()
    unknown, refused = [], []
    for name, part in sorted(by_node.items()):
        node = nodes.get(name)
        if node is None:
            unknown.append(name)
        elif not _allowed(node, token):
            refused.append(name)
        else:
            result.samples += part.samples
    report = telemetry_ingest_result(result, node_hostname=None, now=now)
    warnings = []
    if unmapped:
        warnings.append(
            _("%(n)s series were not mapped to a node metric (name or node label unknown).") % {"n": unmapped}
        )
    if unknown:
        warnings.append(_("Not in the inventory, skipped: %(nodes)s") % {"nodes": ", ".join(unknown[:20])})
    if refused:
        warnings.append(
            _("This token may not send telemetry for %(nodes)s; skipped.")
            % {"nodes": ", ".join(refused[:20])}
        )
    report.skipped += sum(len(by_node[n].samples) for n in (*unknown, *refused))
    report.warnings = [*warnings, *report.warnings]
    return report
