"""The README's API session, run as written against the one-command demo (a live server): the token
comes from `manage.py create_token` on the demo's settings, every curl must answer 2xx (`-f`), and the
answers are those the README promises (rig-01's nodes, a 202 submit action, the action's status).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.demo.test_demo_e2e import ROOT, demo  # noqa: F401  (the fixture: the demo from a fresh copy)

pytestmark = pytest.mark.browser


def readme_api_session() -> str:
    """The second sh block of the README's API section: the session with the demo running."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("\n## API\n") : text.index("\n## Benchmarks\n")]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    assert len(blocks) >= 2
    return blocks[1]


def test_the_readme_api_session_runs_as_written_against_the_demo(demo) -> None:  # noqa: F811
    base, proc, _log, copy = demo
    # given the README's block, with this interpreter for .venv/bin/python and the demo's address
    script = readme_api_session()
    assert script.startswith("export TOKEN=$(DJANGO_SETTINGS_MODULE=portal.settings.demo .venv/bin/python")
    script = script.replace(".venv/bin/python", sys.executable).replace("http://127.0.0.1:8000", base)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_", "TEST_DATABASE"))}
    # when bash runs it in the checkout, stopping at the first failing command
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # then every command succeeded and answered what the README says
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert '"hostname":"rig01"' in out
    assert re.search(r'"kind":"submit","cluster":\{"id":\d+,"url":"[^"]+","display":"h100-pod"\}', out)
    assert re.search(
        r'\{"id":"[0-9a-f-]{36}","kind":"submit","job":(null|\{[^}]*\}),"status":"succeeded"\}', out
    )
    assert proc.poll() is None  # the demo still serves
    assert Path(copy / ".demo" / "rackpilot.sqlite3").exists()
