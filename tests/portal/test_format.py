"""The shared value filters: units scaled, separators per language, currency, labels, one time format."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone, translation

from portal.templatetags import portal_format as f


@pytest.mark.parametrize(
    ("value", "text"),
    [(0, "0 W"), (850, "850 W"), (999.6, "1,000 W"), (1000, "1 kW"), (20698, "20.7 kW"), (34918, "34.9 kW"),
     (150000, "150 kW"), (1_250_000, "1.25 MW"), (None, "—"), ("", "—"), ("n/a", "—")],
)  # fmt: skip
def test_watts_scale_to_the_unit_a_person_reads(value: Any, text: str) -> None:
    assert f.watts(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(512, "512 MiB"), (81559, "79.6 GiB"), (131072, "128 GiB"), (3 * 1024**2, "3 TiB"), (None, "—")],
)
def test_mebibytes(value: Any, text: str) -> None:
    assert f.mebibytes(value) == text


def test_bytes_and_energy() -> None:
    assert (f.bytesize(1536), f.bytesize(10), f.bytesize(5 * 1024**3)) == ("1.5 KiB", "10 B", "5 GiB")
    assert (f.energy_kwh(0.0042), f.energy_kwh(12.345), f.energy_kwh(15234)) == (
        "4.2 Wh",
        "12.3 kWh",
        "15.2 MWh",
    )


def test_numbers_carry_thousands_separators() -> None:
    assert (f.number(300000), f.number(1234.567, 2), f.number(None)) == ("300,000", "1,234.57", "—")


@override_settings(PORTAL_CURRENCY="USD")
def test_money_uses_the_configured_currency() -> None:
    assert (f.money(Decimal("300000.00")), f.money(1400), f.money(0.125)) == ("$300,000", "$1,400", "$0.12")
    assert f.money(-12.5) == "-$12.50"
    with override_settings(PORTAL_CURRENCY="EUR"):
        assert f.money(6000) == "€6,000"
    with override_settings(PORTAL_CURRENCY="SEK"):
        assert f.money(6000) == "6,000 SEK"


def test_choice_labels_not_keys() -> None:
    from inventory.choices import CableKind, LeadKind

    assert f.choice("dac", CableKind) == str(CableKind.DAC.label)
    assert f.choice("pcie-8pin", LeadKind) == str(LeadKind("pcie-8pin").label) != "pcie-8pin"
    assert f.choice(None, CableKind) == "—"

    class Obj:
        kind = "dac"

        def get_kind_display(self) -> str:
            return "QSFP-DD DAC (copper)"

    assert f.label(Obj(), "kind") == "QSFP-DD DAC (copper)"
    assert f.label(None, "kind") == "—"


def test_dash_replaces_missing_values() -> None:
    assert (f.dash(None), f.dash(""), f.dash(0), f.dash("x")) == ("—", "—", 0, "x")


def test_durations_as_slurm_writes_them() -> None:
    assert [f.duration(s) for s in (5, 65, 3600, 3725, 86400 + 3725, None)] == [
        "0:05", "1:05", "1:00:00", "1:02:05", "1-01:02:05", "—",
    ]  # fmt: skip
    assert f.duration(dt.timedelta(days=2, minutes=3)) == "2-00:03:00"


@override_settings(TIME_ZONE="UTC")
def test_one_exact_format_per_language_and_no_utc_offset_or_microseconds() -> None:
    moment = dt.datetime(2026, 12, 1, 9, 5, 7, 123456, tzinfo=dt.UTC)
    with translation.override("en"):
        assert f.exact(moment) == "2026-12-01 09:05:07"
    with translation.override("zh-hans"):
        assert f.exact(moment) == "2026年12月1日 09:05:07"
    assert f.exact(None) == "—"


def test_relative_times_with_the_exact_time_on_hover() -> None:
    now = timezone.now()
    with translation.override("en"):
        html = str(f.ago(now - dt.timedelta(minutes=3, seconds=10)))
        assert html.startswith('<time datetime="') and ">3\xa0minutes ago</time>" in html
        assert 'title="' in html and '+00:00" title' in html  # the ISO value stays in the attribute only
        assert ">just now<" in str(f.ago(now))
        assert ">in 2\xa0hours<" in str(f.ago(now + dt.timedelta(hours=2, minutes=1)))
        old = now - dt.timedelta(days=30)
        assert f">{f.exact(old)}<" in str(f.ago(old))
    with translation.override("zh-hans"):
        assert ">3\xa0分钟前</time>" in str(f.ago(now - dt.timedelta(minutes=3, seconds=5)))


def test_pairs_reads_a_mapping_without_its_repr():
    from portal.templatetags.portal_format import pairs

    value = {"oversubscription": 1, "host_links": {"gpu01": 8, "gpu02": 8}, "rails": [1, 2], "spare": None}
    assert pairs(value) == "Oversubscription: 1 · Host links: gpu01 8, gpu02 8 · Rails: 1, 2 · Spare: —"
    assert pairs({}) == "—" and pairs(None) == "—"


def test_a_yes_no_filter_left_open_reads_any_not_unknown(db: Any) -> None:
    from inventory.filters import PortFilterSet

    html = str(PortFilterSet({}).form["connected"])
    assert '<option value="unknown" selected>(any)</option>' in html and "Unknown" not in html
    bound = PortFilterSet({"connected": "true"}).form
    assert bound.is_valid() and bound.cleaned_data["connected"] is True
