"""Every long-running command runs with the collector netaware's servers need: a young collection every 50,000
allocations, not CPython's 700 (at 700, a burst of 1,000 AppGroups on 50,000 nodes started a full collection every
3-4 s in the operator, 0.3-0.9 s each; at 50,000, 50-120 ms: measured in bench_burst)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import pytest

from operators.cli.signals import run_until_signal


@pytest.fixture
def thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


@pytest.mark.usefixtures("thresholds")
def test_a_long_running_command_runs_with_a_first_generation_of_50000() -> None:
    seen: list[tuple[int, int, int]] = []

    async def body(stop: Any) -> None:
        seen.append(gc.get_threshold())
        await asyncio.sleep(0)

    run_until_signal(body)
    assert seen == [(50_000, 20, 20)]
