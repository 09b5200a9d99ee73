"""The job report: efficiency and diagnosis from telemetry ingested in the tools' real formats
(tt-smi JSON, nvidia-smi CSV, node_exporter text, kernel log lines) through the ingest service,
rolled up as the periodic task does, on the seeded rig and pod inventories (tests/jobs/telemetry.py)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from inventory.models import Cluster, Node
from jobs.report.selectors import job_report_get
from monitoring.services import telemetry_ingest_text
from portal.demo.nodes import NodeSim
from tests.jobs.telemetry import NCCL_LOG, feed, make_job, sims, start_ago

pytestmark = pytest.mark.django_db

# -- NCCL timeout <-> a flapping QSFP cable ---------------------------------------------------------


def test_nccl_timeout_with_a_flapping_cable_names_the_cable_and_both_ends(rig: Cluster) -> None:
    start = start_ago()
    sim = sims("rig01")

    def flap(t: int, s: NodeSim) -> None:  # cards A and B lose their QSFP1 link for 30 s at 5 min
        for card in s.cards[:2]:
            if t == 300:
                card.links_down.add(0)
            if t == 330:
                card.links_down.discard(0)

    feed(sim, start, 600, at=flap)
    job = make_job(rig, "rig01", state="FAILED", start=start, minutes=10, exit_code=1, gpus=4)

    report = job_report_get(job, output=NCCL_LOG)

    top = report.diagnosis[0]
    assert top.code == "nccl_link"
    assert top.suspect is not None and top.suspect.kind == "cable" and top.suspect.label == "A1-B1"
    assert "rig01/A QSFP1 ↔ rig01/B QSFP1" in top.title
    assert any("Watchdog caught collective operation timeout" in e for e in top.evidence)
    assert any("link down" in e for e in top.evidence)
    assert report.suspect_node is not None and report.suspect_node.label == "rig01"


def test_nccl_timeout_without_link_trouble_says_so(rig: Cluster) -> None:
    start = start_ago()
    feed(sims("rig01"), start, 300)
    job = make_job(rig, "rig01", state="FAILED", start=start, minutes=5, exit_code=1, gpus=4)

    report = job_report_get(job, output=NCCL_LOG)

    assert [f.code for f in report.diagnosis] == ["nccl_timeout"]
    assert report.diagnosis[0].suspect is None
    assert not report.unexplained


# -- thermal ---------------------------------------------------------------------------------------


def test_an_overheating_card_is_noted_and_diagnosed(rig: Cluster) -> None:
    start = start_ago(40)
    sim = sims("rig01")
    sim.cards[2].fan_fault = True  # card C
    feed(sim, start, 1800)
    job = make_job(rig, "rig01", state="FAILED", start=start, minutes=30, exit_code=1, gpus=4)

    report = job_report_get(job, output="Traceback (most recent call last):\nRuntimeError: device hang\n")

    c = next(c for c in report.cards if c.label == "rig01/C")
    assert c.temp_peak is not None and c.temp_peak > 85
    assert c.hot_share > 0.1
    note = next(n for n in report.notes if n.code == "thermal_throttle")
    assert "rig01/C" in note.title
    assert report.diagnosis[0].code == "thermal"
    assert report.diagnosis[0].suspect is not None and report.diagnosis[0].suspect.label == "rig01/C"
    others = [x for x in report.cards if x.label != "rig01/C"]
    assert all((x.temp_peak or 0) < 85 for x in others)


# -- NVIDIA: Xid, out of memory, idle GPUs --------------------------------------------------------


def test_xid_79_names_the_card_that_fell_off_the_bus(pod: Cluster) -> None:
    start = start_ago()
    sim = sims("gpu01")

    def xid(t: int, ts: dt.datetime) -> None:
        if t == 200:
            line = (
                f"{ts.isoformat()} gpu01 kernel: NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', "
                "name=<unknown>, GPU has fallen off the bus."
            )
            telemetry_ingest_text("kernel-log", line, node_hostname="gpu01", ts=ts)

    feed(sim, start, 300, extra=xid)
    job = make_job(pod, "gpu01", state="FAILED", start=start, minutes=5, exit_code=1, gpus=8)

    report = job_report_get(job, output="RuntimeError: CUDA error: unspecified launch failure\n")

    top = report.diagnosis[0]
    assert top.code == "xid_bus"
    assert top.title.startswith("Xid 79 on gpu01/0")
    assert top.suspect is not None and top.suspect.kind == "card"
    assert report.suspect_node is not None and report.suspect_node.label == "gpu01"


def test_cuda_out_of_memory_shows_the_peak_memory(pod: Cluster) -> None:
    start = start_ago()
    feed(sims("gpu01"), start, 300)
    job = make_job(pod, "gpu01", state="FAILED", start=start, minutes=5, exit_code=1, gpus=8)
    output = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.10 GiB total)\n"
    )

    report = job_report_get(job, output=output)

    top = report.diagnosis[0]
    assert top.code == "card_oom" and top.title == "CUDA out of memory"
    assert top.evidence[0] == f"output: {output.strip()}"
    assert top.evidence[1].startswith("gpu01/0: memory peak 73.5 GiB of 79.6 GiB")


def test_tenstorrent_allocation_failure(rig: Cluster) -> None:
    start = start_ago()
    feed(sims("rig01"), start, 120)
    job = make_job(rig, "rig01", state="FAILED", start=start, minutes=2, exit_code=1, gpus=4)
    output = (
        "TT_THROW @ tt_metal/impl/allocator/bank_manager.cpp:130: tt::exception\n"
        "Out of Memory: Not enough space to allocate 2147483648 B DRAM buffer across 8 banks\n"
    )

    report = job_report_get(job, output=output)

    assert report.diagnosis[0].code == "card_oom"
    assert "Tenstorrent" in report.diagnosis[0].title


def test_two_idle_gpus_of_eight_are_noted(pod: Cluster) -> None:
    start = start_ago()
    sim = sims("gpu01")

    def idle_two(t: int, s: NodeSim) -> None:
        for card in s.cards[6:]:
            card.load = 0.0

    feed(sim, start, 300, at=idle_two)
    job = make_job(pod, "gpu01", state="COMPLETED", start=start, minutes=5, exit_code=0, gpus=8)

    report = job_report_get(job)

    note = next(n for n in report.notes if n.code == "idle_cards")
    assert note.title == "2 of 8 cards were idle the whole job"
    assert [c.label for c in report.cards if c.idle] == ["gpu01/6", "gpu01/7"]
    assert report.diagnosis == [] and not report.failed


def test_short_use_of_a_long_limit_is_noted(pod: Cluster) -> None:
    start = start_ago(40)
    feed(sims("gpu01"), start, 1800)
    job = make_job(pod, "gpu01", state="COMPLETED", start=start, minutes=30, exit_code=0, gpus=8,
                   time_limit=24 * 60)  # fmt: skip

    report = job_report_get(job)

    note = next(n for n in report.notes if n.code == "time_limit")
    assert note.title == "Used 2 % of the 24 h limit"
    c = report.cards[0]
    assert c.util_mean is not None and 85 < c.util_mean < 100
    assert c.power_mean is not None and c.energy_kwh == pytest.approx(c.power_mean * 0.5 / 1000)


def test_io_bound_job_is_told_data_loading_is_the_bottleneck(pod: Cluster) -> None:
    start = start_ago()
    sim = sims("gpu01")

    def disks(t: int, ts: dt.datetime) -> None:
        n = t * 3000  # 3,000 reads/s + 100 writes/s, the whole job
        text = (
            f'node_disk_reads_completed_total{{device="nvme0n1"}} {n}\n'
            f'node_disk_writes_completed_total{{device="nvme0n1"}} {t * 100}\n'
        )
        telemetry_ingest_text("node-exporter", text, node_hostname="gpu01", ts=ts)

    feed(sim, start, 300, load=0.03, extra=disks)
    job = make_job(pod, "gpu01", state="COMPLETED", start=start, minutes=5, exit_code=0, gpus=8)

    report = job_report_get(job)

    note = next(n for n in report.notes if n.code == "io_bound")
    assert "data loading is the bottleneck" in note.title
    assert any("3,100 operations/s" in e for e in note.evidence)


# -- node down, time limit, start-up timeout, nothing ----------------------------------------------


def test_node_fail_names_the_node_slurm_set_down(pod: Cluster) -> None:
    start = start_ago()
    feed(sims("gpu03"), start, 120)
    Node.objects.filter(hostname="gpu03").update(
        slurm_state="down", slurm_reason="Not responding", slurm_state_since=start + dt.timedelta(minutes=1)
    )
    job = make_job(pod, "gpu03", state="NODE_FAIL", start=start, minutes=2, gpus=8)

    report = job_report_get(job)

    top = report.diagnosis[0]
    assert top.code == "node_down" and top.suspect is not None and top.suspect.label == "gpu03"
    assert "Not responding" in top.evidence[0]


def test_timeout_says_the_limit_and_how_to_resume(pod: Cluster) -> None:
    start = start_ago(70)
    job = make_job(pod, "gpu01", state="TIMEOUT", start=start, minutes=61, gpus=8)

    report = job_report_get(job)

    assert report.diagnosis[0].code == "time_limit"
    assert report.diagnosis[0].title == "The job ran into its time limit (60 min)"


def test_init_process_group_timeout(pod: Cluster) -> None:
    start = start_ago()
    job = make_job(pod, "gpu01,gpu02", state="FAILED", start=start, minutes=10, exit_code=1, gpus=8)
    output = (
        "torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 1/2 clients joined.\n"
        "  File \"train.py\", line 12, in <module>\n    dist.init_process_group(backend='nccl', timeout=timeout)\n"
    )

    report = job_report_get(job, output=output)

    assert report.diagnosis[0].code == "init_timeout"
    assert any("no network link went down" in e for e in report.diagnosis[0].evidence)


def test_a_failure_nothing_explains_is_said_plainly(pod: Cluster) -> None:
    start = start_ago()
    feed(sims("gpu01"), start, 120)
    job = make_job(pod, "gpu01", state="FAILED", start=start, minutes=2, exit_code=1, gpus=8)

    report = job_report_get(job, output="Traceback (most recent call last):\nKeyError: 'lr'\n")

    assert report.failed and report.unexplained and report.diagnosis == []


def test_the_report_reads_a_constant_number_of_queries(pod: Cluster) -> None:
    start = start_ago()
    for host in ("gpu01", "gpu02"):
        feed(sims(host), start, 60)
    one = make_job(pod, "gpu01", state="FAILED", start=start, minutes=1, exit_code=1, gpus=8)
    two = make_job(pod, "gpu01,gpu02", state="FAILED", start=start, minutes=1, exit_code=1, gpus=8)

    with CaptureQueriesContext(connection) as q1:
        job_report_get(one)
    with CaptureQueriesContext(connection) as q2:
        report = job_report_get(two)

    assert len(report.cards) == 16
    assert len(q1.captured_queries) == len(q2.captured_queries) <= 10
