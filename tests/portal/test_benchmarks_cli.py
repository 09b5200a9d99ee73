"""Every benchmark answers --help without starting a run, and those that use a database name it
from TEST_DATABASE_NAME (so parallel runs and the test suites of one machine never share one)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = sorted(
    p for p in (ROOT / "benchmarks").glob("*.py") if p.name not in ("__init__.py", "common.py")
)
#: the benchmarks that run without a database (parsers, the simulator's own clock)
WITHOUT_DATABASE = {"json_bounds.py", "simulator_restart.py", "telemetry_formats.py"}


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda p: p.name)
def test_help_names_the_database_from_the_environment_and_runs_nothing(script: Path) -> None:
    probe = f"rp_help_probe_{os.getpid()}"
    env = {**os.environ, "TEST_DATABASE_NAME": probe, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(script), "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.lstrip().startswith("usage:")
    if script.name in WITHOUT_DATABASE:
        return
    assert "TEST_DATABASE_NAME" in done.stdout and probe in done.stdout
    import psycopg
    from django.conf import settings

    # --help created no database (nothing was set up)
    db = settings.DATABASES["default"]
    server = {"host": db["HOST"] or None, "port": db["PORT"] or None, "user": db["USER"] or None}
    with psycopg.connect(dbname="postgres", **{k: v for k, v in server.items() if v}) as conn:
        assert conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [probe]).fetchone() is None
