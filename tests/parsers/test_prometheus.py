import contextlib
import math
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitoring.parsers import (
    METRICS,
    ParseError,
    parse,
    parse_dcgm_exporter,
    parse_prometheus_text,
    xid_events,
)
from monitoring.parsers.prometheus import escape_label_value, format_sample, last_xids
from tests.parsers.conftest import read_fixture

G0 = "GPU-5e1f0c2a-77aa-4c1e-9d0b-1f2e3d4c5b6a"
G1 = "GPU-1b2c3d4e-5f60-4718-8293-a4b5c6d7e8f9"
MIB = 1024 * 1024


def _by_name(samples, name):
    return [s for s in samples if s.name == name]


def test_text_format_families_types_and_help():
    samples = parse_prometheus_text(read_fixture("dcgm_exporter_2gpu.prom"))
    temp = _by_name(samples, "DCGM_FI_DEV_GPU_TEMP")
    assert [s.value for s in temp] == [58.0, 41.0]
    assert temp[0].type == "gauge"
    assert temp[0].help == "GPU temperature (in C)."
    assert temp[0].labels["UUID"] == G0
    assert _by_name(samples, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")[0].type == "counter"
    assert _by_name(samples, "untyped_metric_no_labels")[0].type == "untyped"
    assert _by_name(samples, "untyped_metric_no_labels")[0].labels == {}


def test_text_format_tricky_lines():
    samples = _by_name(
        parse_prometheus_text(read_fixture("dcgm_exporter_2gpu.prom")), "rackpilot_test_escapes"
    )
    first = samples[0]
    assert first.labels == {"path": "C:\\dcgm\\x", "quote": 'say "hi"', "multi": "a\nb", "tricky": "a,b}c=d"}
    assert first.value == 1500.0
    assert first.timestamp_ms == 1717236000000
    assert first.help == "Help with a backslash \\ and a newline \n in it."
    assert math.isnan(samples[1].value)
    assert samples[2].value == math.inf
    assert samples[3].value == -math.inf
    assert samples[3].timestamp_ms == -42


def test_histogram_and_summary_suffixes_belong_to_family():
    samples = parse_prometheus_text(read_fixture("dcgm_exporter_2gpu.prom"))
    hist = [s for s in samples if s.family == "rackpilot_request_seconds"]
    assert [(s.name, s.type) for s in hist] == [
        ("rackpilot_request_seconds_bucket", "histogram"),
        ("rackpilot_request_seconds_bucket", "histogram"),
        ("rackpilot_request_seconds_bucket", "histogram"),
        ("rackpilot_request_seconds_sum", "histogram"),
        ("rackpilot_request_seconds_count", "histogram"),
    ]
    assert [s.labels["le"] for s in hist[:3]] == ["0.1", "1", "+Inf"]
    summ = [s for s in samples if s.family == "rackpilot_rpc_seconds"]
    assert {s.type for s in summ} == {"summary"}
    assert len(summ) == 4


def test_suffix_without_histogram_type_is_its_own_family():
    (s,) = parse_prometheus_text("foo_count 3\n")
    assert (s.family, s.type) == ("foo_count", "untyped")


def test_blank_lines_comments_and_crlf():
    text = '\n# just a comment\n#\n  \r\nfoo{a="1"} 2\r\n# HELP\n'
    (s,) = parse_prometheus_text(text)
    assert (s.name, s.labels, s.value) == ("foo", {"a": "1"}, 2.0)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('ok 1\nfoo{a="1" 2\n', 2),  # missing '}'
        ('foo{a="x\\q"} 1\n', 1),  # invalid escape
        ("foo 1 2 3\n", 1),
        ("foo abc\n", 1),
        ("foo\n", 1),
        ("# TYPE foo gauge\n# TYPE foo counter\n", 2),
        ("# TYPE foo bogus\n", 1),
        ("foo 1\n# TYPE foo gauge\n", 2),
        ('foo{a="1",a="2"} 1\n', 1),
        ('foo{1a="1"} 1\n', 1),
        ("9foo 1\n", 1),
        ("foo 1_000\n", 1),
        ("foo 1 1.5\n", 1),
        ('\n\nfoo{a="unterminated} 1\n', 3),
    ],
)
def test_syntax_errors_name_the_line(text, line):
    with pytest.raises(ParseError) as exc:
        parse_prometheus_text(text)
    assert exc.value.line == line
    assert str(exc.value).startswith(f"line {line}:")


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text_only_raises_parse_error(text):
    with contextlib.suppress(ParseError):
        parse_prometheus_text(text)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "foo",
                "{",
                "}",
                "=",
                '"',
                "\\",
                ",",
                " ",
                "\n",
                "1",
                "NaN",
                "# TYPE ",
                "# HELP ",
                "gauge",
                "a",
                "le",
                "_bucket",
                "+Inf",
                "\t",
                "e5",
            ]
        ),
        max_size=40,
    )
)
def test_token_soup_only_raises_parse_error(tokens):
    with contextlib.suppress(ParseError):
        parse_prometheus_text("".join(tokens))


label_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,10}", fullmatch=True), label_text, max_size=5),
    st.floats(allow_nan=False),
    st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
)
def test_label_escape_round_trip(labels, value, ts):
    (s,) = parse_prometheus_text(format_sample("metric_x", labels, value, ts) + "\n")
    assert s.labels == labels
    assert s.value == value
    assert s.timestamp_ms == ts


def test_escape_label_value():
    assert escape_label_value('a\\b"c\nd') == 'a\\\\b\\"c\\nd'


# ---------------------------------------------------------------- dcgm-exporter


def test_dcgm_exporter_mapping():
    r = parse_dcgm_exporter(read_fixture("dcgm_exporter_2gpu.prom"))
    assert r.problems == []
    assert r.value("temperature_c", G0) == 58.0
    assert r.value("memory_temperature_c", G1) == 38.0
    assert r.value("power_w", G0) == 612.345
    assert r.value("energy_j", G0) == 81234567.890
    assert r.value("utilization_pct", G0) == 87.0
    assert r.value("memory_utilization_pct", G0) == 42.0
    assert r.value("memory_used_bytes", G0) == 65211 * MIB
    assert r.value("memory_free_bytes", G1) == 81005 * MIB
    assert r.value("sm_clock_mhz", G0) == 1980.0
    assert r.value("mem_clock_mhz", G0) == 2619.0
    assert r.value("pcie_replay_total", G1) == 17.0
    assert r.value("graphics_engine_active_pct", G0) == pytest.approx(91.2345)
    assert r.value("tensor_active_pct", G0) == pytest.approx(50.3)
    assert r.value("dram_active_pct", G0) == pytest.approx(25.0)
    assert r.value("xid_last", G0) == 0.0
    assert r.value("xid_last", G1) == 79.0
    assert r.value("xid_errors_total", G1, xid="79") == 1.0
    assert all(s.node == "gpu07" for s in r.samples)
    assert {s.card for s in r.samples} == {G0, G1}
    assert all(s.metric in METRICS and s.unit == METRICS[s.metric][0] for s in r.samples)
    s = r.find("temperature_c", G1)[0]
    assert s.labels == (("index", "1"),)
    xid = r.find("xid_last", G1)[0]
    assert xid.label("err_code") == "79"
    a, b = r.cards
    assert (a.card, a.bus_id, a.index, a.name, a.driver_version) == (
        G0,
        "0000:18:00.0",
        0,
        "NVIDIA H100 80GB HBM3",
        "570.124.06",
    )
    assert b.bus_id == "0000:2a:00.0"


def test_dcgm_node_argument_wins_and_lowercase_hostname_label():
    text = 'DCGM_FI_DEV_GPU_TEMP{gpu="0",uuid="GPU-x",hostname="n9"} 40\n'
    assert parse_dcgm_exporter(text).samples[0].node == "n9"
    assert parse_dcgm_exporter(text, node="given").samples[0].node == "given"
    assert parse_dcgm_exporter(text).samples[0].card == "GPU-x"


def test_dcgm_timestamps_nan_and_pci_fallback():
    ts = datetime(2026, 1, 1, tzinfo=UTC)
    text = (
        'DCGM_FI_DEV_GPU_TEMP{pci_bus_id="00000000:3B:00.0"} 40 1717236000000\n'
        'DCGM_FI_DEV_POWER_USAGE{pci_bus_id="00000000:3B:00.0"} NaN\n'
        'DCGM_FI_DEV_GPU_UTIL{pci_bus_id="00000000:3B:00.0"} 7\n'
        "go_goroutines 12\n"
    )
    r = parse_dcgm_exporter(text, ts=ts)
    assert [(s.metric, s.card) for s in r.samples] == [
        ("temperature_c", "0000:3b:00.0"),
        ("utilization_pct", "0000:3b:00.0"),
    ]
    assert r.samples[0].ts == datetime(2024, 6, 1, 10, 0, tzinfo=UTC)
    assert r.samples[1].ts == ts


def test_dcgm_legacy_lowercase_names():
    r = parse_dcgm_exporter(read_fixture("dcgm_exporter_legacy_1x.prom"), node="old")
    u = "GPU-9c8b7a6f-5e4d-3c2b-1a09-f8e7d6c5b4a3"
    assert r.value("temperature_c", u) == 67.0
    assert r.value("power_w", u) == 349.63
    assert r.value("memory_used_bytes", u) == 23010 * MIB


def test_dcgm_throttle_reasons_flags():
    r = parse_dcgm_exporter('DCGM_FI_DEV_CLOCKS_EVENT_REASONS{UUID="GPU-a"} 64\n')
    assert r.value("throttle_reasons", "GPU-a") == 64.0
    assert r.value("throttle_hw_thermal_slowdown", "GPU-a") == 1.0
    assert r.value("throttle_sw_power_cap", "GPU-a") == 0.0


def test_dcgm_garbage_raises():
    with pytest.raises(ParseError) as exc:
        parse_dcgm_exporter("# HELP x\n<html><body>502 Bad Gateway</body></html>\n")
    assert exc.value.line == 2


def test_xid_events_from_gauge_changes():
    r = parse_dcgm_exporter(read_fixture("dcgm_exporter_2gpu.prom"))
    assert xid_events({}, r) == []  # first sight is a baseline
    events = xid_events({G0: 0, G1: 0}, r)
    assert len(events) == 1
    (e,) = events
    assert (e.kind, e.card, e.node, e.severity) == ("xid", G1, "gpu07", "critical")
    assert e.data["xid"] == 79 and e.data["previous"] == 0
    assert "fallen off the bus" in e.message
    assert xid_events({G1: 79}, r) == []
    assert last_xids(r) == {G0: 0, G1: 79}
    r13 = parse_dcgm_exporter(f'DCGM_FI_DEV_XID_ERRORS{{UUID="{G0}"}} 13\n')
    assert xid_events({G0: 79}, r13)[0].severity == "warning"


def test_parse_dispatch_prometheus():
    r = parse("prometheus", read_fixture("dcgm_exporter_legacy_1x.prom"), node="n")
    assert r.samples[0].node == "n"
