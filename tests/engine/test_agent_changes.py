"""The agent's kernel diff (pure): from nothing, the whole tree parents first; the same input twice, nothing; one
pod, one class and one classifier entry; a relabelled pod moves; a NodeSLO change is a change in place. Expected
lists written out by hand from the tree in each test."""

from __future__ import annotations

from dataclasses import replace

from operators.engine.enforcement.changes import (
    DeleteClass,
    DeleteMember,
    DeviceState,
    HtbClass,
    MoveMember,
    SetClass,
    SetMember,
    changes,
    leaves_after,
    wanted_classes,
)
from operators.engine.enforcement.plan import DirectionPlan, PodTraffic, TrafficClass

M = 1_000_000
CLASSES = (
    TrafficClass("system", 0x10, 0, 20 * M, 100 * M, 20 * M),
    TrafficClass("lsr", 0x20, 1, 8_000, 100 * M, 0),
    TrafficClass("ls", 0x30, 2, 60 * M, 100 * M, 60 * M),
    TrafficClass("be", 0x40, 3, 20 * M, 100 * M, 20 * M),
)
WEB = PodTraffic("ns/web", "10.0.0.2", "ls", 0x100, 8_000, 100 * M)
BATCH = PodTraffic("ns/batch", "10.0.0.3", "be", 0x101, 8_000, 30 * M, limited=True)


def plan(*pods: PodTraffic, classes: tuple[TrafficClass, ...] = CLASSES) -> DirectionPlan:
    return DirectionPlan(100 * M, classes, pods)


def applied(direction: DirectionPlan) -> DeviceState:
    """The state the kernel holds once ``direction`` is applied."""
    return DeviceState(wanted_classes(direction), {pod.ip: pod.minor for pod in direction.pods})


def test_from_nothing_the_whole_tree_parents_first_then_the_addresses() -> None:
    out = changes(plan(WEB, BATCH), DeviceState({}, {}))
    assert out == [
        SetClass(HtbClass(0x1, 0, 12_500_000, 12_500_000, 0), new=True),  # 100M bits/s = 12.5M bytes/s
        SetClass(HtbClass(0x10, 0x1, 2_500_000, 12_500_000, 0), new=True),
        SetClass(HtbClass(0x20, 0x1, 1_000, 12_500_000, 1), new=True),
        SetClass(HtbClass(0x30, 0x1, 7_500_000, 12_500_000, 2), new=True),
        SetClass(HtbClass(0x40, 0x1, 2_500_000, 12_500_000, 3), new=True),
        SetClass(HtbClass(0x11, 0x10, 1_000, 12_500_000, 0), new=True),  # the host leaf under system
        SetClass(HtbClass(0x100, 0x30, 1_000, 12_500_000, 2), new=True),  # web: ls's priority
        SetClass(HtbClass(0x101, 0x40, 1_000, 3_750_000, 3), new=True),  # batch: its own 30M
        SetMember("10.0.0.2", 0x100),
        SetMember("10.0.0.3", 0x101),
    ]


def test_the_same_input_twice_changes_nothing_even_with_rates_that_are_not_whole_bytes() -> None:
    odd = replace(WEB, rate=8_005, ceil=99_999_999)
    assert changes(plan(odd, BATCH), applied(plan(odd, BATCH))) == []


def test_a_pod_arriving_or_leaving_is_one_class_and_one_address() -> None:
    assert changes(plan(WEB, BATCH), applied(plan(WEB))) == [
        SetClass(HtbClass(0x101, 0x40, 1_000, 3_750_000, 3), new=True),
        SetMember("10.0.0.3", 0x101),
    ]
    assert changes(plan(WEB), applied(plan(WEB, BATCH))) == [DeleteMember("10.0.0.3", 0x101), DeleteClass(0x101)]


def test_a_relabelled_pod_moves_its_leaf_and_a_reused_id_takes_the_new_address() -> None:
    moved = replace(WEB, qos_class="be")
    assert changes(plan(moved), applied(plan(WEB))) == [
        DeleteMember("10.0.0.2", 0x100),
        DeleteClass(0x100),
        SetClass(HtbClass(0x100, 0x40, 1_000, 12_500_000, 3), new=True),
        SetMember("10.0.0.2", 0x100),
    ]
    newcomer = replace(WEB, key="ns/other", ip="10.0.0.9")  # web left, the next pod took its id: a new leaf
    assert changes(plan(newcomer), applied(plan(WEB))) == [  # under a free id; the old one drains, goes next pass
        DeleteMember("10.0.0.2", 0x100),
        SetClass(HtbClass(0x101, 0x30, 1_000, 12_500_000, 2), new=True),
        SetMember("10.0.0.9", 0x101),
    ]


def test_a_leaf_whose_rate_changes_is_made_anew_and_its_address_moved_in_one_step() -> None:
    """HTB keeps a class's tokens across a change: a leaf raised from none to 40M (or lowered back) would start in
    the old rate's debt. A new leaf under a free id (full buckets), the address moved to it in one step (never
    unmapped: its packets would fall to the host leaf), the old leaf deleted at the next pass, once drained."""
    raised = replace(WEB, rate=40 * M)
    assert changes(plan(raised), applied(plan(WEB))) == [
        SetClass(HtbClass(0x101, 0x30, 5_000_000, 12_500_000, 2), new=True),
        MoveMember("10.0.0.2", 0x100, 0x101),
    ]
    after = DeviceState({**applied(plan(WEB)).classes, 0x101: HtbClass(0x101, 0x30, 5_000_000, 12_500_000, 2)},
                        {"10.0.0.2": 0x101})  # fmt: skip
    assert changes(plan(replace(raised, minor=0x101)), after) == [DeleteClass(0x100)]  # the plan keeps its new id
    assert changes(plan(WEB), applied(plan(raised))) == [
        SetClass(HtbClass(0x101, 0x30, 1_000, 12_500_000, 2), new=True),
        MoveMember("10.0.0.2", 0x100, 0x101),
    ]


def test_a_reused_address_of_another_pod_gets_a_new_leaf() -> None:
    """Same address, same numbers, another pod (the agent remembers which pod a leaf was made for): a new leaf, so
    the newcomer does not inherit the old pod's debt. Without that memory (a restart) the leaf is kept. The agent
    then remembers the new pod on the new id."""
    first, second = replace(WEB, uid="u-1"), replace(WEB, key="ns/web-2", uid="u-2")
    held = applied(plan(first))
    remembered = DeviceState(held.classes, held.members, {0x100: "u-1"})
    todo = changes(plan(second), remembered)
    assert todo == [
        SetClass(HtbClass(0x101, 0x30, 1_000, 12_500_000, 2), new=True),
        MoveMember("10.0.0.2", 0x100, 0x101),
    ]
    assert leaves_after(plan(second), todo) == {0x101: "u-2"}
    assert changes(plan(first), remembered) == []
    assert changes(plan(second), held) == []


def test_without_a_free_id_a_leaf_is_deleted_and_made_again() -> None:
    crowded = [replace(WEB, key=f"ns/p{i}", ip=f"10.1.{i // 250}.{i % 250}", minor=0x100 + i) for i in range(0xF00)]
    raised = [replace(crowded[0], rate=40 * M), *crowded[1:]]
    todo = changes(plan(*raised), applied(plan(*crowded)))
    assert todo == [
        DeleteMember("10.1.0.0", 0x100),
        DeleteClass(0x100),
        SetClass(HtbClass(0x100, 0x30, 5_000_000, 12_500_000, 2), new=True),
        SetMember("10.1.0.0", 0x100),
    ]


def test_a_nodeslo_change_is_one_change_in_place_per_class_that_moved() -> None:
    tighter = tuple(replace(c, rate=70 * M) if c.name == "ls" else c for c in CLASSES)
    assert changes(plan(WEB, classes=tighter), applied(plan(WEB))) == [
        SetClass(HtbClass(0x30, 0x1, 8_750_000, 12_500_000, 2), new=False)
    ]


def test_objects_the_plan_no_longer_has_go_leaves_before_their_parents() -> None:
    stray = DeviceState(
        {**applied(plan()).classes, 0x200: HtbClass(0x200, 0x300, 1, 1, 0), 0x300: HtbClass(0x300, 0x1, 1, 1, 0)}, {}
    )
    assert changes(plan(), stray) == [DeleteClass(0x200), DeleteClass(0x300)]
