"""Values become text for people here, and only here: `{% load portal_format %}`.

One implementation for every page and live fragment (STYLE.md, "Pages people trust"): units scaled
(W/kW/MW, MiB/GiB/TiB), thousands separators of the active language, the currency of PORTAL_CURRENCY,
choice labels instead of keys, one date-time format per language (portal/formats/), relative times with
the exact time on hover, durations as Slurm writes them, and an em dash for a missing value (never
"None").
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from django import template
from django.conf import settings
from django.utils import formats, timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.timesince import timesince, timeuntil
from django.utils.translation import gettext, pgettext

register = template.Library()

MISSING = "—"
CURRENCY_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "CNY": "¥", "JPY": "¥", "CHF": "CHF ", "TWD": "NT$"}


def _num(value: Any) -> float | None:
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


@register.filter
def number(value: Any, decimals: int | str = 0) -> str:
    """1234567.8 -> "1,234,568" (the active language's separators); None -> "—"."""
    v = _num(value)
    if v is None:
        return MISSING
    places = int(decimals)
    return formats.number_format(round(v, places), places, use_l10n=True, force_grouping=True)


def _scaled(v: float, steps: list[tuple[float, str]], unit_one: str) -> str:
    """Three significant digits at most in the largest unit the value reaches ("20.7 kW", "850 W")."""
    factor, unit = next(((f, u) for f, u in steps if abs(v) >= f), (1.0, unit_one))
    scaled = v / factor
    places = 0 if abs(scaled) >= 100 else 1 if abs(scaled) >= 10 else 2
    text = formats.number_format(round(scaled, places), places, use_l10n=True, force_grouping=True)
    return f"{_trim(text)} {unit}"


def _trim(text: str) -> str:
    """ "1.50" -> "1.5", "2.00" -> "2" (the decimal separator of the active language)."""
    sep = formats.get_format("DECIMAL_SEPARATOR")
    if sep in text:
        text = text.rstrip("0").rstrip(sep)
    return text


@register.filter
def watts(value: Any) -> str:
    """850 -> "850 W", 20698 -> "20.7 kW", 1.2e6 -> "1.2 MW"."""
    v = _num(value)
    if v is None:
        return MISSING
    return _scaled(v, [(1e6, "MW"), (1e3, "kW")], "W")


@register.filter
def mebibytes(value: Any) -> str:
    """A size in MiB: 512 -> "512 MiB", 81559 -> "79.6 GiB"."""
    v = _num(value)
    if v is None:
        return MISSING
    return _scaled(v, [(1024.0**2, "TiB"), (1024.0, "GiB")], "MiB")


@register.filter
def bytesize(value: Any) -> str:
    """A size in bytes: 1536 -> "1.5 KiB"."""
    v = _num(value)
    if v is None:
        return MISSING
    return _scaled(v, [(1024.0**4, "TiB"), (1024.0**3, "GiB"), (1024.0**2, "MiB"), (1024.0, "KiB")], "B")


@register.filter
def energy_kwh(value: Any) -> str:
    """kWh with sensible precision: 0.0042 -> "4.2 Wh", 12.345 -> "12.3 kWh", 15234 -> "15.2 MWh"."""
    v = _num(value)
    if v is None:
        return MISSING
    return _scaled(v * 1000, [(1e6, "MWh"), (1e3, "kWh")], "Wh")


@register.filter
def money(value: Any, decimals: int | str | None = None) -> str:
    """300000 -> "$300,000" (PORTAL_CURRENCY); cents shown only when there are any, or when asked."""
    v = _num(value)
    if v is None:
        return MISSING
    code = getattr(settings, "PORTAL_CURRENCY", "USD")
    if decimals is None:
        places = 0 if float(v).is_integer() else 2
    else:
        places = int(decimals)
    text = formats.number_format(round(v, places), places, use_l10n=True, force_grouping=True)
    sign = "-" if text.startswith("-") else ""
    symbol = CURRENCY_SYMBOLS.get(code)
    if symbol is None:
        return f"{text} {code}"
    return f"{sign}{symbol}{text.lstrip('-')}"


@register.filter
def percent(value: Any, decimals: int | str = 0) -> str:
    v = _num(value)
    if v is None:
        return MISSING
    return f"{number(v, decimals)} %"


@register.filter
def label(obj: Any, field: str) -> str:
    """The choice label of a model field (``{{ card|label:"kind" }}``), never the stored key."""
    if obj is None:
        return MISSING
    getter = getattr(obj, f"get_{field}_display", None)
    value = getter() if callable(getter) else getattr(obj, field, None)
    return str(value) if value not in (None, "") else MISSING


@register.filter
def choice(value: Any, choices: Any) -> str:
    """A stored key through a TextChoices class or a choices list: ``{{ key|choice:kinds }}``."""
    if value in (None, ""):
        return MISSING
    pairs = getattr(choices, "choices", choices) or []
    return str(dict(pairs).get(value, value))


@register.filter
def dash(value: Any) -> Any:
    """The value, or "—" where it is missing (None or empty), so no page reads "None"."""
    return MISSING if value is None or value == "" else value


def _aware(value: dt.datetime | dt.date) -> dt.datetime | dt.date:
    if isinstance(value, dt.datetime):
        if timezone.is_naive(value):
            value = timezone.make_aware(value, dt.UTC)
        return timezone.localtime(value)
    return value


@register.filter
def exact(value: Any) -> str:
    """The one date-time format of the active language (portal/formats/<lang>/formats.py)."""
    if not isinstance(value, dt.date):
        return MISSING
    value = _aware(value)
    fmt = "DATETIME_FORMAT" if isinstance(value, dt.datetime) else "DATE_FORMAT"
    return formats.date_format(value, fmt)


def relative_text(value: dt.datetime, now: dt.datetime | None = None) -> str:
    now = now or timezone.now()
    if abs((now - value).total_seconds()) < 45:
        return gettext("just now")
    if value <= now:
        return pgettext("relative time", "%(delta)s ago") % {"delta": timesince(value, now, depth=1)}
    return pgettext("relative time", "in %(delta)s") % {"delta": timeuntil(value, now, depth=1)}


@register.filter
def ago(value: Any) -> SafeString | str:
    """A <time> element reading "3 minutes ago" (within a week) or the exact time, with the exact
    time on hover and the ISO timestamp in ``datetime`` for scripts."""
    if not isinstance(value, dt.datetime):
        return exact(value) if isinstance(value, dt.date) else MISSING
    value = _aware(value)
    assert isinstance(value, dt.datetime)
    now = timezone.now()
    shown = relative_text(value, now) if abs(now - value) < dt.timedelta(days=7) else exact(value)
    return format_html(
        '<time datetime="{}" title="{}">{}</time>', value.isoformat(timespec="seconds"), exact(value), shown
    )


@register.filter
def at(value: Any) -> SafeString | str:
    """A <time> element with the exact time shown (tables where rows are compared by time)."""
    if not isinstance(value, dt.datetime):
        return exact(value) if isinstance(value, dt.date) else MISSING
    value = _aware(value)
    assert isinstance(value, dt.datetime)
    return format_html('<time datetime="{}">{}</time>', value.isoformat(timespec="seconds"), exact(value))


def slurm_duration(seconds: float | int | None) -> str:
    """Slurm's elapsed format: "M:SS", "H:MM:SS", "D-HH:MM:SS"."""
    if seconds is None:
        return MISSING
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


@register.filter
def duration(value: Any) -> str:
    """A timedelta or a number of seconds, as Slurm writes it (``squeue``'s TIME column)."""
    if isinstance(value, dt.timedelta):
        return slurm_duration(value.total_seconds())
    v = _num(value)
    return slurm_duration(v) if v is not None else MISSING


@register.filter
def decimal_plain(value: Any) -> str:
    """A Decimal without trailing zeros ("3.50" -> "3.5"), for lengths and ratios."""
    if isinstance(value, Decimal):
        text = format(value.normalize(), "f")
        return text
    return MISSING if value is None else str(value)


@register.filter
def pairs(value: Any) -> str:
    """A mapping as a person reads it, never its repr: {"oversubscription": 1, "host_links": {"gpu01": 8}}
    -> "Oversubscription: 1 · Host links: gpu01 8"; keys through the catalogue; "—" when empty."""
    if not value:
        return MISSING
    if not isinstance(value, dict):
        return str(value)

    def one(v: Any) -> str:
        if isinstance(v, dict):
            return ", ".join(f"{k} {one(x)}" for k, x in v.items()) or MISSING
        if isinstance(v, list | tuple):
            return ", ".join(one(x) for x in v) or MISSING
        if isinstance(v, bool):
            return gettext("yes") if v else gettext("no")
        return MISSING if v is None or v == "" else str(v)

    return " · ".join(f"{gettext(str(k).replace('_', ' ')).capitalize()}: {one(v)}" for k, v in value.items())
