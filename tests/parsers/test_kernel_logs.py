from datetime import UTC, datetime

from monitoring.parsers import parse, parse_log_events
from tests.parsers.conftest import read_fixture


def _summary(events):
    return [(e.kind, e.severity, e.card) for e in events]


def test_dmesg_events():
    events = parse_log_events(read_fixture("kernel_dmesg.log"), node="gpu07")
    assert _summary(events) == [
        ("pcie_downgrade", "warning", "0000:3b:00.0"),
        ("xid", "critical", "0000:3b:00.0"),
        ("gpu_fell_off_bus", "critical", "0000:3b:00.0"),
        ("xid", "warning", "0000:5e:00.0"),
        ("xid", "critical", "0000:86:00.0"),
        ("pcie_aer", "info", "0000:3b:00.0"),
        ("pcie_aer", "warning", "0000:86:00.0"),
        ("pcie_aer", "info", "0000:c0:01.1"),
        ("pcie_aer", "critical", "0000:c1:00.0"),
        ("link_down", "warning", "0000:5e:00.0"),
        ("link_down", "warning", "0000:5e:00.0"),
        ("link_up", "info", "0000:5e:00.0"),
        ("link_up", "info", "0000:03:00.0"),
    ]
    assert all(e.node == "gpu07" and e.ts is None for e in events)


def test_xid_details_and_uptime():
    events = parse_log_events(read_fixture("kernel_dmesg.log"))
    xid79 = events[1]
    assert xid79.data["xid"] == 79
    assert xid79.data["pid"] == 2211
    assert xid79.data["process"] == "python"
    assert xid79.data["uptime_s"] == 12345.678950
    assert xid79.data["description"] == "GPU has fallen off the bus"
    assert (
        xid79.message == "NVRM: Xid (PCI:0000:3b:00): 79, pid=2211, name=python, GPU has fallen off the bus."
    )
    assert events[4].data["xid"] == 74 and events[4].data["pid"] is None


def test_pcie_downgrade_data():
    e = parse_log_events(read_fixture("kernel_dmesg.log"))[0]
    assert e.data == {
        "line": 2,
        "uptime_s": 4.123456,
        "speed_gts": 8.0,
        "width": 8,
        "capable_speed_gts": 16.0,
        "capable_width": 16,
        "limited_at": "0000:3a:00.0",
    }


def test_aer_received_and_bus_error_lines_merge():
    events = [e for e in parse_log_events(read_fixture("kernel_dmesg.log")) if e.kind == "pcie_aer"]
    corrected, nonfatal, correctable, fatal = events
    assert corrected.data["class"] == "correctable"
    assert corrected.data["type"] == "Physical Layer"
    assert corrected.data["agent"] == "Receiver ID"
    assert corrected.data["port"] == "0000:00:03.1"
    assert nonfatal.data["class"] == "nonfatal" and nonfatal.data["type"] == "Transaction Layer"
    assert correctable.data["class"] == "correctable" and correctable.data["type"] == "Data Link Layer"
    assert fatal.data["class"] == "fatal"


def test_boot_time_gives_timestamps_to_uptime_lines():
    boot = datetime(2026, 6, 1, 6, 0, tzinfo=UTC)
    e = parse_log_events(
        "[   10.500000] NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=x, DBE\n", boot_time=boot
    )[0]
    assert e.ts == datetime(2026, 6, 1, 6, 0, 10, 500000, tzinfo=UTC)


def test_journal_syslog_and_dmesg_t_timestamps():
    events = parse_log_events(read_fixture("kernel_journal.log"), year=2026)
    assert [(e.kind, e.data.get("xid"), e.node, e.ts) for e in events] == [
        ("xid", 48, "gpu07", datetime(2026, 6, 1, 10, 15, 2, tzinfo=UTC)),
        ("xid", 94, "gpu07", datetime(2026, 6, 1, 10, 16, 3, tzinfo=UTC)),
        ("pcie_aer", None, "gpu08", datetime(2026, 6, 1, 10, 17, 4, 123456, tzinfo=UTC)),
        ("xid", 145, None, datetime(2026, 6, 1, 10, 18, 5, tzinfo=UTC)),
    ]
    assert events[1].data["uptime_s"] == 12345.678901
    assert [e.severity for e in events] == ["critical", "critical", "info", "critical"]
    assert events[3].data["description"] == "NVLink error"


def test_nccl_job_log():
    events = parse_log_events(read_fixture("job_nccl.log"))
    assert _summary(events) == [("nccl_net_error", "critical", None), ("nccl_timeout", "critical", None)]
    net, timeout = events
    assert net.node == "gpu07"
    assert net.data["status"] == 12 and net.data["peer"] == "10.1.2.3" and net.data["device"] == 0
    assert timeout.data == {
        "line": 3,
        "rank": 3,
        "seq": 808,
        "op": "ALLREDUCE",
        "timeout_ms": 600000,
        "ran_ms": 600020,
    }


def test_newer_kernel_aer_spellings():
    text = (
        "pcieport 0000:00:01.0: AER: Correctable error message received from 0000:01:00.0\n"
        "nvidia 0000:01:00.0: PCIe Bus Error: severity=Correctable, type=Physical Layer, (Receiver ID)\n"
        "pcieport 0000:00:02.0: AER: Uncorrectable (Non-Fatal) error message received from 0000:02:00.0\n"
    )
    events = parse_log_events(text)
    assert _summary(events) == [("pcie_aer", "info", "0000:01:00.0"), ("pcie_aer", "warning", "0000:02:00.0")]
    assert events[0].data["type"] == "Physical Layer"


def test_link_retrain_and_unrelated_lines():
    text = "tenstorrent 0000:01:00.0: link retraining on eth port 3\nrandom noise\n\n"
    events = parse_log_events(text)
    assert _summary(events) == [("link_retrain", "warning", "0000:01:00.0")]
    assert parse_log_events("hello\nworld\n") == []


def test_dispatch_kernel_log():
    r = parse("kernel-log", read_fixture("job_nccl.log"), node="n1")
    assert [e.node for e in r.events] == ["n1", "n1"]
