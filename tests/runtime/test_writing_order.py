"""The AppGroup status writer's order within a pass (controllers/appgroup.py ``writing_order``): a new leader's
first pass recomputes every AppGroup, and the ones no replica has decided for their current spec go first."""

from __future__ import annotations

from typing import Any

from operators.controllers.appgroup import WritePace, writing_order


def body(generation: int, observed: int | None) -> dict[str, Any]:
    status = {} if observed is None else {"observedGeneration": observed, "conditions": []}
    return {"metadata": {"generation": generation}, "status": status}


def test_the_appgroups_waiting_for_a_decision_are_written_first_each_group_by_key() -> None:
    bodies = {
        ("a", "decided"): body(3, 3),
        ("b", "new"): body(1, None),  # created while no replica led
        ("c", "changed"): body(4, 3),  # its spec changed meanwhile
        ("a", "also-decided"): body(1, 1),
        ("d", "gone"): {},  # deleted since it was marked: no generation, nothing decided
    }
    assert writing_order(list(bodies), bodies) == [
        ("b", "new"),
        ("c", "changed"),
        ("a", "also-decided"),
        ("a", "decided"),
        ("d", "gone"),
    ]


def test_under_the_pace_the_longest_marked_go_first_and_the_undecided_before_them() -> None:
    bodies = {("a", "x"): body(1, 1), ("b", "y"): body(1, 1), ("c", "z"): body(1, 1), ("d", "new"): body(1, None)}
    marked_at = {("c", "z"): 1, ("a", "x"): 3, ("b", "y"): 2, ("d", "new"): 4}
    assert writing_order(list(bodies), bodies, marked_at) == [("d", "new"), ("c", "z"), ("b", "y"), ("a", "x")]


def test_the_pace_grants_a_second_s_worth_then_its_rate() -> None:
    pace = WritePace(rate=2.0)
    assert pace.take(5, now=10.0) == 2  # a full second's worth at first
    assert pace.take(5, now=10.25) == 0  # 0.5 of a write gathered
    assert pace.wait() == 0.25  # the other half at 2 a second
    assert pace.take(5, now=10.5) == 1
    assert pace.take(5, now=20.0) == 2  # a quiet spell gathers one second's worth, no more
    assert pace.take(1, now=20.0) == 0
    slow = WritePace(rate=0.5)
    assert slow.take(3, now=0.0) == 1  # below one a second: one at a time, every two seconds
    assert slow.take(3, now=1.0) == 0 and slow.wait() == 1.0
    assert slow.take(3, now=2.0) == 1
    assert WritePace(rate=0).take(1000, now=0.0) == 1000 and WritePace(rate=0).wait() == 0.0
