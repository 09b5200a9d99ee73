from datetime import UTC, datetime

import pytest

from monitoring.parsers import FORMATS, METRICS, ParseError, parse, parse_node_exporter
from tests.parsers.conftest import read_fixture

TS = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _values(result):
    return {(s.metric, s.label("device")): s.value for s in result.samples}


def test_node_exporter_page_maps_network_and_disk_counters():
    # given a real node_exporter page (Go float formatting, HELP/TYPE lines, other families)
    text = read_fixture("node_exporter.prom")
    # when
    result = parse_node_exporter(text, node="gpu01", ts=TS)
    # then only the five families, physical devices only, -1 speed (unknown) skipped
    assert _values(result) == {
        ("disk_reads_total", "nvme0n1"): 1234567000.0,
        ("disk_reads_total", "nvme1n1"): 3981224.0,
        ("disk_writes_total", "nvme0n1"): 287145219.0,
        ("disk_writes_total", "nvme1n1"): 915342.0,
        ("net_rx_bytes_total", "eno1"): 47119918937.0,
        ("net_rx_bytes_total", "eno2"): 0.0,
        ("net_rx_bytes_total", "ib0"): 31415926535000.0,
        ("net_tx_bytes_total", "eno1"): 9861337104.0,
        ("net_tx_bytes_total", "eno2"): 0.0,
        ("net_tx_bytes_total", "ib0"): 27182818284000.0,
        ("net_speed_bytes_per_s", "eno1"): 3125000000.0,
        ("net_speed_bytes_per_s", "ib0"): 25000000000.0,
    }
    assert {(s.node, s.card, s.ts, s.unit == METRICS[s.metric][0]) for s in result.samples} == {
        ("gpu01", None, TS, True)
    }
    assert result.samples[0].labels == (("device", "nvme0n1"),)
    assert result.events == [] and result.cards == []


@pytest.mark.parametrize("device", ["lo", "docker0", "veth5c1f2e9", "loop3", "dm-0", "br-1a2b", "cni0"])
def test_node_exporter_skips_loopback_and_virtual_devices(device):
    text = (
        "# TYPE node_network_receive_bytes_total counter\n"
        f'node_network_receive_bytes_total{{device="{device}"}} 1.5e+07\n'
        "# TYPE node_disk_reads_completed_total counter\n"
        f'node_disk_reads_completed_total{{device="{device}"}} 42\n'
    )
    assert parse_node_exporter(text, node="n", ts=TS).samples == []


def test_node_exporter_registered_as_format_and_sample_timestamps_kept():
    text = 'node_network_transmit_bytes_total{device="ib0"} 1.234567e+09 1777636800000\n'
    result = parse("node-exporter", text, node="n", ts=TS)
    assert "node-exporter" in FORMATS
    assert [(s.metric, s.value, s.ts) for s in result.samples] == [
        ("net_tx_bytes_total", 1234567000.0, datetime(2026, 5, 1, 12, 0, tzinfo=UTC))
    ]


def test_node_exporter_syntax_error_names_the_line():
    with pytest.raises(ParseError) as exc:
        parse_node_exporter('# TYPE x counter\nnode_disk_reads_completed_total{device="sda" 1\n', node="n")
    assert exc.value.line == 2
