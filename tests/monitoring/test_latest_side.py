"""Latest values written behind their batch (monitoring.storage: "latest values, written behind the
batch"): a batch ingested outside any caller's transaction commits its samples, then this process's
writer commits its latest values from a PostgreSQL session of its own, and only then sends the
ingest signal; reads in this process wait for it. The batch's reads with its BEGIN and the side
connection for reads are here too. These tests commit for real (transaction=True): what one session
wrote is read back from another."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from monitoring import storage
from monitoring.models import LatestValue, Sample
from monitoring.services import IngestError, telemetry_ingest_samples
from tests.monitoring.conftest import H100_UUIDS

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("connection.vendor != 'postgresql'"),
]


def _batch(ts: dt.datetime, temp: float, power: float = 300.0) -> list[dict[str, Any]]:
    return [
        {
            "ts": ts.isoformat(),
            "node": "gpu01",
            "card": H100_UUIDS[0],
            "metric": "temperature_c",
            "value": temp,
        },
        {"ts": ts.isoformat(), "node": "gpu01", "card": H100_UUIDS[1], "metric": "power_w", "value": power},
    ]


def _params() -> dict[str, Any]:
    """How another session connects to the test database."""
    return {
        k: v for k, v in connection.get_connection_params().items() if k in ("dbname", "user", "host", "port")
    }


def _latest_elsewhere(*, flushed: bool = True) -> dict[str, float]:
    """Latest values as another session sees them (committed only); ``flushed``: once this
    process's writer has written what it was given."""
    if flushed:
        assert storage.latest_flush()
    with psycopg.connect(**_params()) as other:
        rows = other.execute(
            "SELECT s.metric, l.value FROM monitoring_latestvalue l JOIN monitoring_series s ON s.id = l.series_id"
        ).fetchall()
    return dict(rows)


def _samples_elsewhere() -> int:
    with psycopg.connect(**_params()) as other:
        return int(other.execute("SELECT count(*) FROM monitoring_sample").fetchone()[0])


def _writer_pid() -> int:
    (conn,) = storage._writer._conns.values()
    return int(conn.info.backend_pid)


@contextmanager
def _writer_held() -> Iterator[Callable[[], None]]:
    """Every latest-value row locked by another session, so that the writer waits; yields the
    function that releases them once the writer is seen waiting for them."""
    other = psycopg.connect(**_params())
    other.execute("SELECT series_id FROM monitoring_latestvalue FOR UPDATE").fetchall()

    def release() -> None:
        with psycopg.connect(**_params(), autocommit=True) as watcher:
            for _ in range(500):
                waiting = watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND query LIKE '%%UPDATE monitoring_latestvalue l%%'"
                ).fetchone()
                if waiting and waiting[0]:
                    break
                time.sleep(0.01)
            else:
                raise AssertionError("the writer never waited for the locked rows")
        other.rollback()

    try:
        yield release
    finally:
        other.close()


def _first_batch(inv: Any) -> dt.datetime:
    """gpu01 with its first batch (50 C, 300 W) written, latest values included; returns its time."""
    inv.node("gpu01")
    t0 = timezone.now().replace(microsecond=0) - dt.timedelta(minutes=1)
    telemetry_ingest_samples(_batch(t0, 50.0), now=t0)
    assert storage.latest_flush()
    return t0


@pytest.fixture(autouse=True)
def _fresh_side() -> Any:
    storage.latest_writer_close()
    storage.side_connection_close()
    yield
    storage.latest_writer_close()
    storage.side_connection_close()


def test_a_batch_commits_its_samples_and_its_latest_values_are_written_behind_it(inv: Any) -> None:
    inv.node("gpu01")
    t0 = timezone.now().replace(microsecond=0) - dt.timedelta(minutes=1)
    # first sight: the series are new, their latest rows are inserted by the writer
    telemetry_ingest_samples(_batch(t0, 50.0), now=t0)
    assert _latest_elsewhere() == {"temperature_c": 50.0, "power_w": 300.0}
    writer = _writer_pid()
    # while the writer is held up, the next batch returns with its samples committed and the
    # previous latest values still in place; they move once the writer could write
    with _writer_held() as release:
        telemetry_ingest_samples(_batch(t0 + dt.timedelta(seconds=10), 61.5, 310.0), now=t0)
        assert _samples_elsewhere() == 4
        assert _latest_elsewhere(flushed=False) == {"temperature_c": 50.0, "power_w": 300.0}
        assert storage.latest_flush(timeout=0.2) is False  # still pending
        release()
        assert storage.latest_flush()
    assert _latest_elsewhere(flushed=False) == {"temperature_c": 61.5, "power_w": 310.0}
    assert _writer_pid() == writer  # one connection of the writer's, kept
    # an older batch arriving late never moves a latest value back
    telemetry_ingest_samples(_batch(t0 - dt.timedelta(seconds=10), 40.0, 290.0), now=t0)
    assert _latest_elsewhere() == {"temperature_c": 61.5, "power_w": 310.0}


def test_this_process_reads_the_latest_values_it_ingested_at_once(inv: Any) -> None:
    from monitoring import selectors

    cluster = inv.cluster().pk
    inv.node("gpu01", cluster_id=cluster)
    t0 = timezone.now().replace(microsecond=0) - dt.timedelta(minutes=1)
    telemetry_ingest_samples(_batch(t0, 50.0), now=t0)
    assert storage.latest_flush()
    with _writer_held() as release:
        telemetry_ingest_samples(_batch(t0 + dt.timedelta(seconds=10), 62.0, 320.0), now=t0)
        # released from another thread once the writer waits for the rows: a read here waits
        # for the writer (LatestValue's manager) instead of returning the previous values
        threading.Thread(target=release).start()
        seen = dict(LatestValue.objects.values_list("series__metric", "value"))
    assert seen == {"temperature_c": 62.0, "power_w": 320.0}
    # raw SQL readers wait as well (the overview's power per cluster)
    with _writer_held() as release:
        telemetry_ingest_samples(_batch(t0 + dt.timedelta(seconds=20), 63.0, 330.0), now=t0)
        threading.Thread(target=release).start()
        power = storage.latest_power_by_cluster([cluster], "node_power_w", "power_w", t0)
    assert power == [(cluster, 330.0, t0 + dt.timedelta(seconds=20))]
    assert [v.value for v in selectors.latest_value_list(metric="temperature_c")] == [63.0]


def test_the_ingest_signal_is_sent_once_the_latest_values_are_committed(inv: Any) -> None:
    from monitoring.signals import telemetry_ingested

    t0 = _first_batch(inv)
    heard: list[dict[str, float]] = []

    def listener(**kwargs: Any) -> None:  # what a live frame rendered now would show
        heard.append(_latest_elsewhere(flushed=False))

    telemetry_ingested.connect(listener)
    try:
        with _writer_held() as release:
            telemetry_ingest_samples(_batch(t0 + dt.timedelta(seconds=10), 70.0, 340.0), now=t0)
            assert heard == []  # not at the samples' commit
            release()
            assert storage.latest_flush()
    finally:
        telemetry_ingested.disconnect(listener)
    assert heard == [{"temperature_c": 70.0, "power_w": 340.0}]


def test_a_batch_that_fails_before_its_commit_leaves_no_latest_value(
    inv: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    inv.node("gpu01")
    t0 = timezone.now().replace(microsecond=0) - dt.timedelta(minutes=1)
    telemetry_ingest_samples(_batch(t0, 50.0), now=t0)

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise IngestError(["the alert evaluation failed"])

    # the batch fails after its COPY, before its commit
    monkeypatch.setattr("monitoring.services.alerts.alerts_evaluate", boom)
    with pytest.raises(IngestError):
        telemetry_ingest_samples(_batch(t0 + dt.timedelta(seconds=10), 99.0, 500.0), now=t0)
    # neither the samples nor their latest values were committed, and the writer goes on
    assert Sample.objects.count() == 2
    assert _latest_elsewhere() == {"temperature_c": 50.0, "power_w": 300.0}
    monkeypatch.undo()
    telemetry_ingest_samples(_batch(t0 + dt.timedelta(seconds=20), 70.0, 320.0), now=t0)
    assert _latest_elsewhere() == {"temperature_c": 70.0, "power_w": 320.0}


def test_a_resent_batch_is_merged_and_its_latest_values_stay_right(inv: Any) -> None:
    inv.node("gpu01")
    t0 = timezone.now().replace(microsecond=0) - dt.timedelta(minutes=1)
    telemetry_ingest_samples(_batch(t0, 50.0), now=t0)
    telemetry_ingest_samples(_batch(t0 + dt.timedelta(seconds=10), 55.0), now=t0)
    # the first batch again, with one new sample: the COPY is refused, the merge stores the new
    # one only
    again = [*_batch(t0, 50.0), *_batch(t0 + dt.timedelta(seconds=20), 58.0)]
    report = telemetry_ingest_samples(again, now=t0)
    assert (report.stored, report.duplicates) == (2, 2)
    assert _latest_elsewhere() == {"temperature_c": 58.0, "power_w": 300.0}


def test_a_writer_connection_that_broke_loses_no_latest_value(
    inv: Any, caplog: pytest.LogCaptureFixture
) -> None:
    t0 = _first_batch(inv)
    writer = _writer_pid()
    # the server ends the writer's session (a restart, an idle timeout, an administrator)
    with connection.cursor() as cur:
        cur.execute("SELECT pg_terminate_backend(%s)", [writer])
    telemetry_ingest_samples(_batch(t0 + dt.timedelta(seconds=10), 66.0, 333.0), now=t0)
    assert _latest_elsewhere() == {"temperature_c": 66.0, "power_w": 333.0}
    assert "latest-value connection broke" in caplog.text  # noticed, and written again
    assert _writer_pid() != writer
    telemetry_ingest_samples(_batch(t0 + dt.timedelta(seconds=20), 67.0, 334.0), now=t0)
    assert _latest_elsewhere() == {"temperature_c": 67.0, "power_w": 334.0}


def test_a_writer_behind_by_its_backlog_holds_its_callers_back(
    inv: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    t0 = _first_batch(inv)
    monkeypatch.setattr(storage, "WRITER_BACKLOG", 1)
    with _writer_held() as release:
        # the first batch is being written (held), the second waits in the backlog
        for k in (1, 2):
            telemetry_ingest_samples(_batch(t0 + dt.timedelta(seconds=10 * k), 50.0 + k), now=t0)

        def ingest_third() -> None:
            try:
                telemetry_ingest_samples(_batch(t0 + dt.timedelta(seconds=30), 53.0), now=t0)
            finally:
                connection.close()  # this thread's own

        third = threading.Thread(target=ingest_third, daemon=True)
        third.start()
        third.join(0.5)
        assert third.is_alive()  # held back: the backlog is full
        release()
        third.join(10)
        assert not third.is_alive()
    assert _latest_elsewhere()["temperature_c"] == 53.0


def test_a_forked_child_gets_a_writer_of_its_own(inv: Any) -> None:
    import os

    t0 = _first_batch(inv)
    writer, pid = storage._writer, _writer_pid()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through its exit status only
        ok = storage._writer is not writer and not storage._writer._conns and storage.latest_flush()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # the parent's connection was closed before the fork (no socket shared with the child) and
    # its writer goes on with a new one
    assert writer._conns == {}
    telemetry_ingest_samples(_batch(t0 + dt.timedelta(seconds=10), 51.0, 301.0), now=t0)
    assert _latest_elsewhere() == {"temperature_c": 51.0, "power_w": 301.0}
    assert storage._writer is writer and _writer_pid() != pid


def test_inside_a_callers_transaction_latest_values_are_written_in_it(inv: Any) -> None:
    from django.db import transaction

    inv.node("gpu01")
    t0 = timezone.now().replace(microsecond=0) - dt.timedelta(minutes=1)
    with transaction.atomic():
        telemetry_ingest_samples(_batch(t0, 50.0), now=t0)
        # not visible elsewhere before the caller commits: nothing went around its transaction
        assert _latest_elsewhere() == {}
        assert LatestValue.objects.count() == 2
    assert storage._writer._conns == {}  # the writer was not involved
    assert _latest_elsewhere() == {"temperature_c": 50.0, "power_w": 300.0}


def test_alert_states_read_with_the_batchs_begin_fire_and_resolve(
    inv: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from monitoring.models import Alert, AlertRule, AlertState
    from monitoring.services import alerts

    first_reads: list[Any] = []
    real = storage.reads_first

    def spy(queries: Any, **kwargs: Any) -> Any:
        first_reads.append(out := real(queries, **kwargs))
        return out

    monkeypatch.setattr(storage, "reads_first", spy)

    # a rule of its own, held for 20 s
    rule = AlertRule.objects.create(
        name="hot", kind=AlertRule.Kind.THRESHOLD, metric="temperature_c", threshold=85, duration_s=20
    )
    alerts.alert_rules_forget()
    inv.node("gpu01")
    t0 = timezone.now().replace(microsecond=0) - dt.timedelta(minutes=1)
    # the condition starts holding: a state row, no alert yet
    telemetry_ingest_samples(_batch(t0, 90.0), now=t0)
    state = AlertState.objects.get(rule=rule)
    assert state.pending_since == t0 and not Alert.objects.filter(rule=rule).exists()
    assert first_reads[0] == [[]]  # no state row before the first batch
    # 20 s later the state (read with the batch's first statement) makes the alert fire
    telemetry_ingest_samples(_batch(t0 + dt.timedelta(seconds=20), 91.0), now=t0)
    alert = Alert.objects.get(rule=rule)
    assert alert.status == Alert.Status.FIRING and alert.started_at == t0
    assert (state.pk, rule.pk, state.series_id, t0) in first_reads[1][0]
    # and a cool reading resolves it and drops the state
    telemetry_ingest_samples(_batch(t0 + dt.timedelta(seconds=30), 60.0), now=t0)
    alert.refresh_from_db()
    assert alert.status == Alert.Status.RESOLVED and not AlertState.objects.filter(rule=rule).exists()
    assert _latest_elsewhere()["temperature_c"] == 60.0


def test_reads_first_run_in_the_transaction_they_begin(inv: Any) -> None:
    from django.db import transaction
    from django.test.utils import CaptureQueriesContext

    from inventory.models import Node

    node = inv.node("gpu01")

    def name_of(pk: int) -> Any:
        return Node.objects.filter(pk=pk).values_list("hostname")

    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        assert storage.reads_first([name_of(node.pk), name_of(-1)]) == [[("gpu01",)], []]
        # the reads opened the transaction (they went with its BEGIN) and it is still open
        assert connection.connection.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        # later reads in it see its own writes; the reads are counted like Django's own
        Node.objects.filter(pk=node.pk).update(hostname="gpu01b")
        assert storage.reads_first([name_of(node.pk)]) == [[("gpu01b",)]]
    read = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith('SELECT "inventory_node"."hostname"')
    ]
    assert len(read) == 3 and f'"id" = {node.pk} ' in read[0] and '"id" = -1 ' in read[1]


def test_reads_first_run_their_meanwhile_while_the_server_runs_the_reads(inv: Any) -> None:
    from django.db import transaction

    key = 424242
    seen: list[Any] = []
    with psycopg.connect(**_params(), autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [key])
        backend = connection.cursor().connection.info.backend_pid

        def meanwhile() -> None:
            # the read was sent: the server is running it (waiting for the lock held here)
            seen.append(
                other.execute(
                    "SELECT wait_event_type, query FROM pg_stat_activity WHERE pid = %s", [backend]
                ).fetchone()
            )
            other.execute("SELECT pg_advisory_unlock(%s)", [key])

        with transaction.atomic():
            read = ("SELECT pg_advisory_xact_lock_shared(%s)::text, %s", (key, 7))
            assert storage.reads_first([read], meanwhile=meanwhile) == [[("", 7)]]
    assert seen[0][0] == "Lock" and "pg_advisory_xact_lock_shared" in seen[0][1]


def test_alert_states_compiled_once_read_the_rows_the_queryset_reads(inv: Any) -> None:
    from django.db import transaction
    from django.test.utils import CaptureQueriesContext

    from monitoring.models import AlertRule, AlertState
    from monitoring.services import alerts

    inv.node("gpu01")
    t0 = timezone.now().replace(microsecond=0) - dt.timedelta(minutes=1)
    telemetry_ingest_samples(_batch(t0, 50.0), now=t0)
    rule = AlertRule.objects.create(
        name="hot", kind=AlertRule.Kind.THRESHOLD, metric="temperature_c", threshold=1
    )
    sids = sorted(LatestValue.objects.values_list("series_id", flat=True))
    AlertState.objects.create(rule=rule, series_id=sids[-1], pending_since=t0)
    lo, hi = sids[0], sids[-1]
    read = alerts.alert_states_read(lo, hi)
    assert isinstance(read, tuple) and read[1] == (lo, hi)
    assert alerts.alert_states_read(lo, lo)[0] is read[0]  # compiled once
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        rows = storage.reads_first([read, alerts.alert_states_read(hi + 1, hi + 9)])
    assert rows == [list(alerts.alert_states_between(lo, hi)), []]
    assert rows[0] and rows[0][0][1:] == (rule.pk, hi, t0)
    assert sum("monitoring_alertstate" in q["sql"] for q in queries.captured_queries) == 2


def test_latest_values_of_series_given_out_of_order_and_at_several_times(inv: Any) -> None:
    inv.node("gpu01")
    t0 = timezone.now().replace(microsecond=0) - dt.timedelta(minutes=1)
    telemetry_ingest_samples(_batch(t0, 50.0), now=t0)
    # the higher series id first (the side UPDATE takes its rows in id order), two times each
    later, earlier = (
        _batch(t0 + dt.timedelta(seconds=20), 52.0, 320.0),
        _batch(t0 + dt.timedelta(seconds=10), 51.0, 310.0),
    )
    telemetry_ingest_samples([later[1], earlier[1], earlier[0], later[0]], now=t0)
    assert _latest_elsewhere() == {"temperature_c": 52.0, "power_w": 320.0}
    # one time, the higher id first
    telemetry_ingest_samples(list(reversed(_batch(t0 + dt.timedelta(seconds=30), 53.0, 330.0))), now=t0)
    assert _latest_elsewhere() == {"temperature_c": 53.0, "power_w": 330.0}


def test_reads_first_failing_raise_a_database_error_and_roll_back(inv: Any) -> None:
    from django.db import DatabaseError, transaction
    from django.db.models.expressions import RawSQL

    from inventory.models import Node

    node = inv.node("gpu01")
    broken = Node.objects.annotate(x=RawSQL("no_such_column", [])).values_list("x")
    with pytest.raises(DatabaseError), transaction.atomic():
        Node.objects.filter(pk=node.pk).update(hostname="renamed")
        storage.reads_first([broken])
    node.refresh_from_db()
    assert node.hostname == "gpu01"
    # the connection is usable afterwards
    assert storage.reads_first([Node.objects.values_list("hostname")]) == [[("gpu01",)]]


# -- reads on the side connection (storage.reads_aside: the overview's costliest read) ------------
def _temperatures() -> Any:
    return LatestValue.objects.filter(series__metric="temperature_c").values_list("value")


def test_reads_aside_run_on_the_side_connection_and_see_committed_rows(inv: Any) -> None:
    inv.node("gpu01")
    t0 = timezone.now().replace(microsecond=0)
    telemetry_ingest_samples(_batch(t0, 50.0), now=t0)
    storage.side_connection_close()

    with storage.reads_aside([_temperatures()]) as collect:
        side = storage._side.conn
        rows = collect()
    # the read was sent on a second session, which is idle again (its read transaction ended)
    assert side is not None and not side.closed
    assert side.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert rows == [[(50.0,)]]
    assert collect() is rows  # collected once


def test_reads_aside_inside_a_transaction_read_its_uncommitted_rows_here(inv: Any) -> None:
    from django.db import transaction

    inv.node("gpu01")
    t0 = timezone.now().replace(microsecond=0)
    telemetry_ingest_samples(_batch(t0, 50.0), now=t0)
    storage.side_connection_close()
    with transaction.atomic():
        LatestValue.objects.update(value=77.0)  # not committed: the side session would not see it
        with storage.reads_aside([_temperatures()]) as collect:
            rows = collect()
        transaction.set_rollback(True)
    assert rows == [[(77.0,)]]
    assert getattr(storage._side, "conn", None) is None  # no side session was opened


def test_reads_aside_fall_back_to_this_connection_when_the_side_session_breaks(
    inv: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    inv.node("gpu01")
    t0 = timezone.now().replace(microsecond=0)
    telemetry_ingest_samples(_batch(t0, 50.0), now=t0)
    # given a side session whose server process is gone (a restart, an idle timeout)
    side = storage._side_connection()
    assert side is not None
    with psycopg.connect(**_params(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [side.info.backend_pid])

    with storage.reads_aside([_temperatures()]) as collect:
        rows = collect()

    assert rows == [[(50.0,)]]
    # the broken session was dropped; the next use opens a new one
    assert getattr(storage._side, "conn", None) is None or storage._side.conn is not side


def test_a_fork_closes_every_threads_side_session_first(inv: Any) -> None:
    import os

    from django.db import connections

    inv.node("gpu01")
    t0 = timezone.now().replace(microsecond=0)
    telemetry_ingest_samples(_batch(t0, 50.0), now=t0)
    # given another thread (a server's thread pool) that read aside and keeps its side session
    opened, forked = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def server_thread() -> None:
        try:
            with storage.reads_aside([_temperatures()]) as collect:
                collect()
            seen["side"] = storage._side.conn
            opened.set()
            forked.wait(10)
            with storage.reads_aside([_temperatures()]) as collect:
                seen["rows"] = collect()
            seen["again"] = storage._side.conn
        finally:
            opened.set()
            connections.close_all()

    thread = threading.Thread(target=server_thread)
    thread.start()
    assert opened.wait(10)
    pid = seen["side"].info.backend_pid
    # when the process forks (a Celery worker's child) and the child exits
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through its exit status only
        os._exit(0)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # then that session was closed by its own process before the fork (no socket shared with a
    # child, whose copy, collected, would end it), and the thread reads aside again on a new one
    assert seen["side"].closed
    forked.set()
    thread.join(10)
    assert seen["rows"] == [[(50.0,)]]
    assert seen["again"] is not seen["side"] and seen["again"].info.backend_pid != pid


def test_a_block_left_before_collecting_leaves_the_side_session_usable(inv: Any) -> None:
    inv.node("gpu01")
    t0 = timezone.now().replace(microsecond=0)
    telemetry_ingest_samples(_batch(t0, 50.0), now=t0)

    with pytest.raises(RuntimeError), storage.reads_aside([_temperatures()]):
        raise RuntimeError("the caller failed before collecting")

    side = storage._side.conn
    assert side is not None and side.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    # and the next batch's latest values still go through it
    telemetry_ingest_samples(_batch(t0 + dt.timedelta(seconds=10), 61.0), now=t0)
    assert storage._side.conn is side
    assert _latest_elsewhere()["temperature_c"] == 61.0
