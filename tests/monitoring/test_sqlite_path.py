"""The telemetry store's generic path (SQLite, the demo's database) under the tests written for
PostgreSQL: ingest, alert states and rules, counter rates. storage.py is the only module that
branches on the database; what it returns must mean the same on both (times aware, rows as
tuples), or alert evaluation breaks in the demo while every PostgreSQL test passes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERIC = [
    "tests/monitoring/test_alerts.py",
    "tests/monitoring/test_ingest.py",
    "tests/monitoring/test_rates.py",
]


def test_ingest_alerts_and_rates_pass_on_sqlite(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TEST_DATABASE_NAME"}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'demo.sqlite3'}"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *GENERIC, "-q", "-p", "no:cacheprovider", "-o", "addopts=",
         "--import-mode=importlib", "-W", "ignore::pytest.PytestAssertRewriteWarning"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    passed = re.search(r"^(\d+) passed", proc.stdout, re.M)
    assert passed and int(passed.group(1)) >= 25, proc.stdout[-1000:]
