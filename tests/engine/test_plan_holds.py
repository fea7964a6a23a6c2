"""A node holds a pod's requests when every resource column has room: the planner's column-at-a-time check."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.engine.planning.problem import holds


def test_a_node_holds_the_requests_only_with_room_in_every_column() -> None:
    free = np.array([[4000, 8], [500, 16], [1000, -1], [1000, 0]], dtype=np.int64)  # cpu m, memory Gi
    # 1 cpu alone: 500 m is short, and the node overcommitted on memory (-1 Gi free) holds nothing
    assert holds(free, np.array([1000, 0])).tolist() == [True, False, False, True]
    assert holds(free, np.array([500, 8])).tolist() == [True, True, False, False]
    assert holds(free, np.zeros(2, dtype=np.int64)).tolist() == [True, True, False, True]  # -1 Gi free holds nothing
    assert holds(np.zeros((3, 0), dtype=np.int64), np.zeros(0, dtype=np.int64)).tolist() == [True] * 3  # no columns


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5).flatmap(lambda columns: st.tuples(
    st.lists(st.lists(st.integers(-3, 6), min_size=columns, max_size=columns), min_size=1, max_size=12),
    st.lists(st.integers(0, 6), min_size=columns, max_size=columns))))  # fmt: skip
def test_holds_is_every_column_at_least_the_request(instance: tuple[list[list[int]], list[int]]) -> None:
    rows, asked = instance
    expected = [all(have >= want for have, want in zip(row, asked, strict=True)) for row in rows]
    assert holds(np.array(rows, dtype=np.int64), np.array(asked, dtype=np.int64)).tolist() == expected
