"""Reads of burn-in runs and acceptance records, and their presentation as rows for pages (labels in the
reader's language, figures through the shared value filters)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from jobs.burnin.criteria import FAIL, KEYS, NOT_APPLICABLE, PASS, REQUIRED
from jobs.models import BurnInResult, BurnInRun, BurnInVerdict
from monitoring.selectors import SeriesQueryError, series_query
from portal.templatetags.portal_format import number, percent, watts

LABELS = {
    "stress_job": gettext_lazy("Stress program ran to its end"),
    "power_band": gettext_lazy("Power within the TDP band"),
    "power_stable": gettext_lazy("Power stable (no dips)"),
    "temperature": gettext_lazy("Temperature under the limit with margin"),
    "throttling": gettext_lazy("Throttling under the threshold"),
    "errors": gettext_lazy("No XID, ECC or AER errors"),
    "heartbeat": gettext_lazy("Firmware heartbeat steady"),
    "links": gettext_lazy("Fabric links up without flaps"),
}
STATUS_LABELS = {
    "pass": gettext_lazy("Pass"),
    "fail": gettext_lazy("Fail"),
    "unmeasured": gettext_lazy("Not measured"),
    "not_applicable": gettext_lazy("Not applicable"),
}
#: chart per criterion: the metric whose run shows the evidence
EVIDENCE = {"power_band": "power_w", "temperature": "temperature_c"}
CHART_POINTS = 120


def burnin_run_list() -> QuerySet[BurnInRun]:
    return BurnInRun.objects.select_related("node", "job", "action", "requested_by").prefetch_related(
        "results__card"
    )


def burnin_result_latest(card: Any) -> BurnInResult | None:
    """The card's newest acceptance record (a run in progress shows its interim figures)."""
    return (
        BurnInResult.objects.filter(card=card)
        .select_related("run__node", "run__job", "run__requested_by")
        .order_by("-run__created")
        .first()
    )


def _c(value: Any) -> str:
    return f"{number(value, 1)} °C"


def _measured(x: dict[str, Any]) -> tuple[str, str]:
    """(measured, limit) texts of one criterion."""
    key, v = x["key"], x.get("value")
    counts = x.get("counts") or {}
    if x["status"] in ("unmeasured", NOT_APPLICABLE) and v is None:
        return "—", "—"
    if key == "stress_job":
        return _("%(state)s, exit %(code)s") % {"state": x.get("state") or "—", "code": number(v)}, _(
            "completed, exit 0"
        )
    if key == "power_band":
        return _("average %(w)s") % {"w": watts(v)}, f"{watts(x.get('low'))} – {watts(x.get('high'))}"
    if key == "power_stable":
        measured = _("%(pct)s variation, lowest %(w)s, %(dips)s dips of %(n)s samples") % {
            "pct": percent(v, 1), "w": watts(x.get("low")), "dips": number(counts.get("dips")),
            "n": number(counts.get("samples")),
        }  # fmt: skip
        return measured, _("at most %(pct)s") % {"pct": percent(x.get("limit"), 1)}
    if key == "temperature":
        return _("hottest %(t)s") % {"t": _c(v)}, _("%(t)s (limit %(l)s less the margin)") % {
            "t": _c(x.get("limit")), "l": _c(x.get("high"))
        }  # fmt: skip
    if key == "throttling":
        return _("%(pct)s of samples") % {"pct": percent(v, 1)}, _("at most %(pct)s") % {
            "pct": percent(x.get("limit"), 1)
        }
    if key == "errors":
        return _("%(xid)s XID, %(ecc)s ECC, %(aer)s AER") % {
            "xid": number(counts.get("xid")), "ecc": number(counts.get("ecc")), "aer": number(counts.get("aer"))
        }, "0"  # fmt: skip
    if key == "heartbeat":
        return _("%(n)s stalls") % {"n": number(v)}, "0"
    if key == "links":
        return _("%(flaps)s flaps, %(down)s of %(ports)s ports seen down") % {
            "flaps": number(counts.get("flaps")), "down": number(counts.get("ports_down")),
            "ports": number(counts.get("ports")),
        }, "0"  # fmt: skip
    return number(v, 1), number(x.get("limit"), 1)


def criterion_rows(result: BurnInResult) -> list[dict[str, Any]]:
    """One row per criterion, in the fixed order, for the card page, the printable record and the API."""
    by_key = {x["key"]: x for x in result.criteria}
    rows = []
    for key in KEYS:
        x = by_key.get(key)
        if x is None:
            continue
        measured, limit = _measured(x)
        status = x["status"]
        final = result.verdict != BurnInVerdict.PENDING
        counts_against = status == FAIL or (final and key in REQUIRED and status != PASS)
        rows.append(
            {
                "key": key,
                "label": str(LABELS[key]),
                "status": status,
                "status_label": str(STATUS_LABELS[status]),
                "fails": counts_against,
                "measured": measured,
                "limit": limit,
            }
        )
    return rows


def _window(result: BurnInResult) -> tuple[dt.datetime, dt.datetime] | None:
    run = result.run
    if run.started is None:
        return None
    end = run.finished or timezone.now()
    return (run.started, end) if end > run.started else None


def evidence_charts(result: BurnInResult) -> list[dict[str, Any]]:
    """Inline SVG charts over the run (server-drawn: they print): power with its band, temperature with
    its limit; the lowest value per bucket is drawn too, so a dip from a bad lead shows."""
    window = _window(result)
    if window is None:
        return []
    start, end = window
    step = max(1, int((end - start).total_seconds() // CHART_POINTS))
    by_key = {x["key"]: x for x in result.criteria}
    charts = []
    for key, metric in EVIDENCE.items():
        try:
            found = series_query(metric=metric, start=start, end=end, step=step, card=str(result.card_id))
        except SeriesQueryError:
            continue
        # a card's one series of the metric (tt-smi labels it with the board type)
        series = sorted(found.series, key=lambda s: (s["labels"] != "", s["id"]))
        points: list[list[float]] = series[0]["points"] if series else []
        if not points:
            continue
        x = by_key.get(key, {})
        lines = [v for v in (x.get("low"), x.get("high"), x.get("limit")) if v is not None]
        charts.append(
            _chart(str(LABELS[key]), points, lines, start, end, "W" if metric == "power_w" else "°C")
        )
    return charts


def _chart(
    title: str, points: list[list[float]], lines: list[float], start: dt.datetime, end: dt.datetime, unit: str
) -> dict[str, Any]:
    width, height = 1000.0, 180.0
    t0, t1 = start.timestamp(), end.timestamp()
    values = [p[1] for p in points] + [p[2] for p in points] + lines
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.1 or 1.0
    lo, hi = max(0.0, lo - pad), hi + pad

    def xy(t: float, v: float) -> str:
        x = (t - t0) / (t1 - t0) * width if t1 > t0 else 0.0
        y = height - (v - lo) / (hi - lo) * height
        return f"{x:.1f},{y:.1f}"

    return {
        "title": title,
        "width": int(width),
        "height": int(height),
        "avg": " ".join(xy(p[0], p[2]) for p in points),
        "min": " ".join(xy(p[0], p[1]) for p in points),
        "lines": [
            {"y": f"{height - (v - lo) / (hi - lo) * height:.1f}", "label": f"{number(v)} {unit}"}
            for v in lines
        ],
        "top": f"{number(hi)} {unit}",
        "bottom": f"{number(lo)} {unit}",
    }
