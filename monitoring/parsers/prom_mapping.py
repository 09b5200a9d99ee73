"""How Prometheus series (dcgm-exporter, node_exporter) map to the portal's nodes, cards and metrics.

One mapping serves both directions: the remote-write endpoint turns received series into
canonical samples with it, and the Prometheus source builds its PromQL selectors from it. It is
data (a cluster's Prometheus source stores it as JSON, editable), with defaults for dcgm-exporter
and node_exporter:

    {"node_labels": ["Hostname", "hostname", "instance"],   # first one present names the node
     "card_labels": ["UUID", "uuid", "pci_bus_id"],          # first one present names the card
     "index_label": "gpu",
     "metrics": {"DCGM_FI_DEV_GPU_TEMP": {"metric": "temperature_c", "scale": 1}, ...}}

``scale`` turns the exporter's unit into the canonical one (MiB -> bytes, mJ -> J, ratio -> %).
An ``instance`` label's ``:port`` is dropped (``gpu07:9100`` names node ``gpu07``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from . import metrics as m
from .model import Labels, ParseResult, Sample, make_labels
from .prometheus import _VIRTUAL_DEVICES, DCGM_METRICS, NODE_EXPORTER_METRICS

_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_HOST_PORT = re.compile(r"^(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:]+)):\d+$")
# the labels dcgm-exporter and Prometheus add that say where a value comes from, not what it is
_IDENTITY_LABELS = frozenset(
    {
        "__name__",
        "job",
        "instance",
        "modelName",
        "device",
        "DCGM_FI_DRIVER_VERSION",
        "pci_bus_id",
        "UUID",
        "uuid",
    }
)

NODE_METRICS = frozenset(NODE_EXPORTER_METRICS.values())  # node series (a device label, no card)


def _scale_of(conv: Any) -> float:
    return float(conv(1.0))


def _default_metrics() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, (metric, conv) in DCGM_METRICS.items():
        if name.startswith("DCGM_"):  # not the dcgm-exporter 1.x lowercase names
            out[name] = {"metric": metric, "scale": _scale_of(conv)}
    for name, metric in NODE_EXPORTER_METRICS.items():
        out[name] = {"metric": metric, "scale": 1.0}
    return out


DEFAULT_MAPPING: dict[str, Any] = {
    "node_labels": ["Hostname", "hostname", "instance"],
    "card_labels": ["UUID", "uuid", "pci_bus_id"],
    "index_label": "gpu",
    "metrics": _default_metrics(),
}


def default_mapping() -> dict[str, Any]:
    """A fresh copy of :data:`DEFAULT_MAPPING` (a JSONField default)."""
    return {
        "node_labels": list(DEFAULT_MAPPING["node_labels"]),
        "card_labels": list(DEFAULT_MAPPING["card_labels"]),
        "index_label": DEFAULT_MAPPING["index_label"],
        "metrics": {k: dict(v) for k, v in DEFAULT_MAPPING["metrics"].items()},
    }


def mapping_errors(data: Any) -> list[str]:
    """What is wrong with a mapping given as data (empty when it is usable)."""
    if not isinstance(data, Mapping):
        return ["the mapping must be an object with node_labels, card_labels, index_label and metrics"]
    errors = []
    for key in ("node_labels", "card_labels"):
        labels = data.get(key)
        if not isinstance(labels, list) or not labels or not all(isinstance(x, str) for x in labels):
            errors.append(f"{key}: a non-empty list of label names")
        else:
            errors += [f"{key}: {x!r} is not a label name" for x in labels if not _LABEL_NAME.match(x)]
    index = data.get("index_label", "")
    if not isinstance(index, str) or (index and not _LABEL_NAME.match(index)):
        errors.append("index_label: a label name (or empty)")
    series = data.get("metrics")
    if not isinstance(series, Mapping) or not series:
        errors.append("metrics: an object of Prometheus metric name -> {metric, scale}")
        return errors
    for name, spec in series.items():
        if not _METRIC_NAME.match(name):
            errors.append(f"metrics: {name!r} is not a Prometheus metric name")
        elif not isinstance(spec, Mapping) or spec.get("metric") not in m.METRICS:
            errors.append(f"metrics.{name}: 'metric' must be one of the portal's metric names")
        else:
            scale = spec.get("scale", 1)
            if type(scale) not in (int, float) or not math.isfinite(scale) or scale == 0:
                errors.append(f"metrics.{name}: 'scale' must be a non-zero number")
    unknown = sorted(set(data) - {"node_labels", "card_labels", "index_label", "metrics"})
    errors += [f"{k}: not a mapping key" for k in unknown]
    return errors


@dataclass(frozen=True)
class PromMapping:
    node_labels: tuple[str, ...]
    card_labels: tuple[str, ...]
    index_label: str
    by_name: Mapping[str, tuple[str, float]]  # Prometheus name -> (canonical metric, scale)

    @cached_property
    def _skip(self) -> frozenset[str]:
        """Labels that name where a value comes from (not kept on the series)."""
        return _IDENTITY_LABELS | {*self.node_labels, *self.card_labels, self.index_label}

    def kept_labels(self, metric: str, labels: Mapping[str, str], card: str | None) -> Labels:
        """The labels a series of ``metric`` keeps: the card's index, node_exporter's device, and
        what is not identity (target, node, card, exporter details)."""
        return make_labels(
            {
                "index": labels.get(self.index_label) if card else None,
                "device": labels.get("device") if metric in NODE_METRICS else None,
                **{k: v for k, v in labels.items() if k not in self._skip and k != "device"},
            }
        )

    @classmethod
    def from_data(cls, data: Mapping[str, Any] | None = None) -> PromMapping:
        data = data or DEFAULT_MAPPING
        return cls(
            node_labels=tuple(data["node_labels"]),
            card_labels=tuple(data["card_labels"]),
            index_label=data.get("index_label", ""),
            by_name={k: (v["metric"], float(v.get("scale", 1))) for k, v in data["metrics"].items()},
        )

    def names_of(self, metric: str) -> list[tuple[str, float]]:
        """The Prometheus names (and scales) that give ``metric``, in mapping order."""
        return [(name, scale) for name, (canon, scale) in self.by_name.items() if canon == metric]

    def node_of(self, labels: Mapping[str, str]) -> str | None:
        for key in self.node_labels:
            value = labels.get(key)
            if value:
                hp = _HOST_PORT.match(value)
                return (hp.group("host") or hp.group("v6")) if hp else value
        return None

    def card_of(self, labels: Mapping[str, str]) -> str | None:
        for key in self.card_labels:
            if labels.get(key):
                return labels[key]
        return None

    def samples(
        self, name: str, labels: Mapping[str, str], points: Iterable[tuple[int, float]]
    ) -> list[Sample]:
        """Canonical samples of one series' (timestamp ms, value) points; [] when unmapped."""
        found = self.by_name.get(name)
        node = self.node_of(labels)
        if found is None or node is None:
            return []
        metric, scale = found
        device = labels.get("device", "")
        if metric in NODE_METRICS and (not device or _VIRTUAL_DEVICES.match(device)):
            return []  # loopback, container and virtual devices (as when parsing node_exporter's page)
        card = None if metric in NODE_METRICS else self.card_of(labels)
        keep = self.kept_labels(metric, labels, card)
        unit = m.unit_of(metric)
        out = []
        for ts_ms, raw in points:
            if not math.isfinite(raw) or (metric == "net_speed_bytes_per_s" and raw <= 0):
                continue
            ts = datetime.fromtimestamp(ts_ms / 1000, UTC)
            value = raw * scale
            out.append(Sample(metric, value, unit, ts, node, card, keep))
            if metric == "throttle_reasons" and value.is_integer() and value >= 0:
                out += [
                    Sample(k, f, m.BOOL, ts, node, card, keep)
                    for k, f in m.throttle_flags(int(value)).items()
                ]
        return out


def results_by_node(
    series: Iterable[tuple[str, Mapping[str, str], Iterable[tuple[int, float]]]], mapping: PromMapping
) -> tuple[dict[str, ParseResult], int]:
    """(name, labels, points) series -> node name -> its samples, and how many series were not
    mapped (a name the mapping does not know, or no node label)."""
    out: dict[str, ParseResult] = {}
    unmapped = 0
    for name, labels, points in series:
        samples = mapping.samples(name, labels, points)
        if not samples:
            unmapped += 1
            continue
        for s in samples:
            out.setdefault(s.node or "", ParseResult()).samples.append(s)
    return out, unmapped
