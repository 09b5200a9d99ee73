"""Fixtures for the parser tests: pure Python, no Django, no database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def read_fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def _clear_cache() -> Iterator[None]:
    """Shadows the Django cache-clearing autouse fixture of tests/conftest.py: nothing to clear here."""
    yield
