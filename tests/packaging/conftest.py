from __future__ import annotations

import pytest

from tests.support.chart import helm_binary


@pytest.fixture(scope="module")
def helm() -> str:
    """The helm binary (tests/support/chart.py)."""
    return helm_binary()
