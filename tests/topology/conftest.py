"""Topology, power and readiness tests reuse the inventory builders."""

from __future__ import annotations

from typing import Any

import pytest

from tests.inventory.conftest import Builder


@pytest.fixture
def build(db: Any) -> Builder:
    return Builder()
