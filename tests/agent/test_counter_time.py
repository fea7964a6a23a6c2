"""A pass stamps its class counters right after :meth:`Kernel.state` returns, so the counters must be the last
thing that method reads: the egress map is listed by a subprocess whose time varies from pass to pass on a loaded
node, and a rate divides the bytes between two reads by the time between two stamps."""

from __future__ import annotations

import time
from typing import Any

import pytest

from operators.agent.kernel import Kernel

SLOW_LISTING = 0.25  # s: an `ip netns exec nft -j list table` on a loaded node


@pytest.mark.parametrize("direction", ["egress", "ingress"])
def test_the_counters_are_read_after_the_slow_listing_so_their_stamp_is_theirs(
    direction: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = Kernel("lo", "lo")  # both directions find a device: the loopback, read through the patched readers
    read_at: list[float] = []

    def slow_members(*_: Any) -> dict[str, int]:
        time.sleep(SLOW_LISTING)
        return {"10.244.9.2": 0x10}

    def classes(index: int) -> tuple[dict[int, Any], dict[int, int]]:
        read_at.append(time.monotonic())
        return {}, {0x10: 12_500_000}

    monkeypatch.setattr(kernel, "read_map", slow_members)
    monkeypatch.setattr(kernel, "read_filters", slow_members)
    monkeypatch.setattr(kernel, "read_classes", classes)
    try:
        state, counted = kernel.state(direction)
        stamped = time.monotonic()
    finally:
        kernel.close()
    assert counted == {0x10: 12_500_000} and state.members == {"10.244.9.2": 0x10}
    # read first, the counters would be SLOW_LISTING older than their stamp
    assert stamped - read_at[0] < SLOW_LISTING / 5
