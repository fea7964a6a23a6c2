"""The AppGroup status writer's order within a pass (controllers/appgroup.py ``writing_order``): a new leader's
first pass recomputes every AppGroup, and the ones no replica has decided for their current spec go first."""

from __future__ import annotations

from typing import Any

from operators.controllers.appgroup import writing_order


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
