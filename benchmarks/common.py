"""Helpers shared by the benchmarks: a separate database, timing and printing."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def bench_db_name(default: str) -> str:
    """The benchmark's database: ``TEST_DATABASE_NAME`` when set (so parallel runs and the test
    suites of one machine do not share one), else ``default``."""
    return os.environ.get("TEST_DATABASE_NAME") or default


def bench_parser(doc: str | None, default_db: str) -> argparse.ArgumentParser:
    """An argument parser whose ``--help`` prints the benchmark's docstring and the database it
    would use, and exits before anything is set up."""
    return argparse.ArgumentParser(
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"database: {bench_db_name(default_db)} (TEST_DATABASE_NAME overrides {default_db}); "
        "server: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432)",
    )


def bench_args(doc: str | None, default_db: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse a benchmark's command line that takes no options of its own (``--help`` only)."""
    return bench_parser(doc, default_db).parse_args(argv)


def plain_args(doc: str | None, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line of a benchmark without a database or options (``--help`` only)."""
    return argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter, epilog="No database."
    ).parse_args(argv)


def setup_django(db_name: str) -> None:
    """Point Django at a benchmark database (created and migrated if missing); callers name it
    with :func:`bench_db_name`."""
    sys.path.insert(0, str(ROOT))
    base = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432")
    os.environ["DATABASE_URL"] = f"{base.rstrip('/')}/{db_name}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
    import psycopg

    with psycopg.connect(f"{base.rstrip('/')}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [db_name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{db_name}"')
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    if os.environ.get("BENCH_GC_FREEZE", "1") == "1":
        from portal.gc import tune_gc

        tune_gc()  # as the servers and workers do after start-up


def measure(fn: Callable[[], Any], *, runs: int = 20, warmup: int = 2) -> dict[str, float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {
        "median_ms": statistics.median(times),
        "p95_ms": times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))],
        "min_ms": times[0],
    }


def row(label: str, figures: dict[str, float], extra: str = "") -> None:
    print(
        f"{label:<48} median {figures['median_ms']:8.1f} ms   p95 {figures['p95_ms']:8.1f} ms   {extra}",
        flush=True,
    )
