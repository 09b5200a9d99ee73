"""Energy and cost per job, for mixed NVIDIA and Tenstorrent nodes.

Card energy: every card power series (``power_w``) of the job's nodes, integrated with the
trapezoid rule over [start, end]; two samples further apart than PORTAL_ENERGY_MAX_GAP_S are not
bridged (that time is unknown and lowers ``coverage_pct``). When a job holds only some GPUs of a
node, it gets the share gpus / cards of the node. Host: the same share of (node_power_w - cards)
when the BMC reports node power, else of the host base load (node override or chassis model).
Cost: kWh x PORTAL_ENERGY_TARIFF_PER_KWH + (node + cards purchase cost) / PORTAL_DEPRECIATION_MONTHS
per month (730 h) x hours x share.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from inventory.models import Node
from monitoring import storage
from monitoring.models import JobEnergy, Series
from monitoring.promql import PromError

HOURS_PER_MONTH = 730.0
J_PER_KWH = 3_600_000.0


def integrate(
    points: Sequence[tuple[dt.datetime, float]], start: dt.datetime, end: dt.datetime, max_gap_s: float
) -> tuple[float, float]:
    """(joules, covered seconds) of a power series over [start, end]; gaps > max_gap_s are skipped."""
    energy = covered = 0.0
    for (t0, v0), (t1, v1) in zip(points, points[1:], strict=False):
        span = (t1 - t0).total_seconds()
        if span <= 0 or span > max_gap_s:
            continue
        a, b = max(t0, start), min(t1, end)
        width = (b - a).total_seconds()
        if width <= 0:
            continue
        va = v0 + (v1 - v0) * (a - t0).total_seconds() / span
        vb = v0 + (v1 - v0) * (b - t0).total_seconds() / span
        energy += (va + vb) / 2 * width
        covered += width
    return energy, covered


def job_nodes(job: Any) -> list[Node]:
    names = {n for n in (job.node_names or "").split(",") if n}
    if not names:
        return []
    return [
        n
        for n in Node.objects.filter(cluster_id=job.cluster_id)
        .select_related("chassis")
        .prefetch_related("cards__card_model")
        if n.effective_slurm_name in names or n.hostname in names
    ]


def _power_points(
    source: Any, nodes: list[Node], start: dt.datetime, end: dt.datetime
) -> tuple[list[tuple[Any, int, str, str]], dict[Any, list[tuple[dt.datetime, float]]]]:
    """(series key, node id, metric, card ref) of the nodes' card and node power series, and their
    points over [start, end]: from the cluster's Prometheus source if it has one, else the store."""
    from monitoring.prometheus_source import prometheus_power_points

    if source is not None:  # PromError when it cannot answer: no figures rather than wrong ones
        return prometheus_power_points(source, nodes, start, end)
    series: list[tuple[Any, int, str, str]] = list(
        Series.objects.filter(node__in=nodes, metric__in=["power_w", "node_power_w"]).values_list(
            "id", "node_id", "metric", "card_ref"
        )
    )
    by_series: dict[Any, list[tuple[dt.datetime, float]]] = defaultdict(list)
    for sid, ts, value in storage.raw_points([s[0] for s in series], start, end):
        by_series[sid].append((ts, value))
    return series, by_series


def job_energy_estimate(job: Any, *, now: dt.datetime | None = None) -> dict[str, Any]:
    """Compute (without storing) the energy and cost figures of ``job``."""
    from monitoring.prometheus_source import source_for_cluster

    now = now or timezone.now()
    start = job.start_time
    end = job.end_time or now
    if start is None or end <= start:
        raise ValueError("the job has not run")
    max_gap = float(settings.PORTAL_ENERGY_MAX_GAP_S)
    duration = (end - start).total_seconds()
    hours = duration / 3600
    nodes = job_nodes(job)
    source = source_for_cluster(job.cluster_id)
    series, by_series = _power_points(
        source, nodes, start - dt.timedelta(seconds=max_gap), end + dt.timedelta(seconds=max_gap)
    )
    tariff = Decimal(str(settings.PORTAL_ENERGY_TARIFF_PER_KWH))
    months = max(1, settings.PORTAL_DEPRECIATION_MONTHS)
    card_j = host_j = 0.0
    covered = expected = 0.0
    hardware = Decimal("0")
    per_node = []
    for node in nodes:
        cards = [c for c in node.cards.all() if c.status == "active"]
        card_series = [s for s in series if s[1] == node.pk and s[2] == "power_w" and s[3]]
        node_series = [s for s in series if s[1] == node.pk and s[2] == "node_power_w"]
        n_cards = max(len(cards), len(card_series))
        share = min(1.0, job.gpus / n_cards) if job.gpus and n_cards else 1.0
        node_card_j = 0.0
        for sid, *_rest in card_series:
            joules, secs = integrate(by_series[sid], start, end, max_gap)
            node_card_j += joules
            covered += secs
            expected += duration
        node_total_j = covered_node = 0.0
        for sid, *_rest in node_series[:1]:  # the whole-node reading (first sensor)
            node_total_j, covered_node = integrate(by_series[sid], start, end, max_gap)
        if node_series and covered_node >= 0.5 * duration:
            host_node_j = max(0.0, node_total_j - node_card_j)
            host_source = "node_power_w"
        else:
            base_w = (
                node.base_power_w
                if node.base_power_w is not None
                else (node.chassis.base_power_w if node.chassis else 0)
            )
            host_node_j = base_w * duration
            host_source = "base_load"
        card_j += node_card_j * share
        host_j += host_node_j * share
        purchase = node.purchase_cost + sum((c.card_model.list_price for c in cards), Decimal("0"))
        node_hw = purchase / months / Decimal(str(HOURS_PER_MONTH)) * Decimal(str(hours * share))
        hardware += node_hw
        per_node.append(
            {
                "node": node.hostname,
                "share": round(share, 4),
                "card_series": len(card_series),
                "card_kwh": round(node_card_j * share / J_PER_KWH, 6),
                "host_kwh": round(host_node_j * share / J_PER_KWH, 6),
                "host_source": host_source,
                "hardware_cost": str(round(node_hw, 4)),
            }
        )
    kwh = (card_j + host_j) / J_PER_KWH
    energy_cost = Decimal(str(kwh)) * tariff
    return {
        "energy_kwh": kwh,
        "card_kwh": card_j / J_PER_KWH,
        "host_kwh": host_j / J_PER_KWH,
        "coverage_pct": 100.0 * covered / expected if expected else 0.0,
        "energy_cost": energy_cost.quantize(Decimal("0.0001")),
        "hardware_cost": hardware.quantize(Decimal("0.0001")),
        "total_cost": (energy_cost + hardware).quantize(Decimal("0.0001")),
        "hours": hours,
        "details": {
            "nodes": per_node,
            "tariff_per_kwh": str(tariff),
            "depreciation_months": months,
            "max_gap_s": max_gap,
            "source": "prometheus" if source is not None else "store",
            "start": start.isoformat(),
            "end": end.isoformat(),
        },
    }


@transaction.atomic
def job_energy_compute(job: Any, *, now: dt.datetime | None = None) -> JobEnergy:
    """Compute and store (replace) the JobEnergy of ``job``."""
    figures = job_energy_estimate(job, now=now)
    energy, _created = JobEnergy.objects.update_or_create(job=job, defaults=figures)
    return energy


def job_energy_compute_pending(*, limit: int = 500, now: dt.datetime | None = None) -> int:
    """JobEnergy for finished jobs that have none yet (the periodic task), once their end is
    ``PORTAL_ENERGY_SETTLE_S`` old: the power samples that close their last interval are in by then
    (computed earlier, a job would miss the time since the last sample before its end, for good)."""
    from jobs.models import Job

    settled = (now or timezone.now()) - dt.timedelta(
        seconds=float(getattr(settings, "PORTAL_ENERGY_SETTLE_S", 60))
    )
    done = 0
    for job in Job.objects.filter(
        start_time__isnull=False, end_time__isnull=False, end_time__lte=settled, energy__isnull=True
    )[:limit]:
        try:
            job_energy_compute(job)
        except ValueError:
            continue
        except PromError:  # the cluster's Prometheus is down: the next run tries again
            continue
        done += 1
    return done
