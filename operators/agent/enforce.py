"""One enforcement pass and the meter (imperative shell): read what the kernel holds, plan from the snapshot with
the leaf ids the kernel has, apply the difference; and rates from the class counters of two passes.

A pass never tears down to rebuild and never removes the last good state: when the plan is empty (the node's
total unknown, an impossible NodeSLO), the kernel keeps what it has and the problems are reported. A device the
agent cannot own (a foreign root qdisc) is skipped with its reason; the other direction still goes ahead.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from operators.agent.kernel import KernelError
from operators.engine.enforcement.changes import (
    Change,
    DeleteClass,
    DeleteMember,
    DeviceState,
    MoveMember,
    SetClass,
    SetMember,
    changes,
    leaves_after,
)
from operators.engine.enforcement.plan import DIRECTIONS, HOST_LEAF, ROOT_MINOR, NodePlan
from operators.engine.enforcement.report import Rates

NodePlanner = Callable[[Mapping[str, Mapping[str, int]]], NodePlan]


@dataclass
class PassResult:
    plan: NodePlan
    operations: int  # netlink requests and nftables elements this pass changed
    problems: list[str]
    counters: dict[str, dict[int, int]] = field(default_factory=dict)  # direction -> class minor -> bytes sent
    applied: bool = False  # the plan is what the kernel now holds (both directions)
    # direction -> the monotonic clock when its counters were read (its rates divide by its steps): one time per
    # direction, since the reads are two `tc` calls and the second can be slow on a loaded node
    counted_at: dict[str, float] = field(default_factory=dict)


class KernelOps(Protocol):
    """What a pass asks of the kernel: :class:`~operators.agent.kernel.Kernel` (netlink, nftables) or, in tests,
    :class:`~operators.agent.fake.FakeKernel` (in memory, as strict)."""

    interface: str
    ifb: str
    operations: int

    def state(self, direction: str) -> tuple[DeviceState, dict[int, int]]: ...

    def ensure_root(self, device: str) -> int: ...

    def ensure_table(self) -> None: ...

    def ensure_ifb(self) -> int: ...

    def ensure_redirect(self, ifb_index: int) -> None: ...

    def apply_classes(self, index: int, changes: Iterable[Change]) -> None: ...

    def apply_filters(self, index: int, changes: Iterable[Change]) -> None: ...

    def apply_map(self, changes: Sequence[Change]) -> None: ...

    def cleanup(self) -> list[str]: ...

    def speed(self) -> int | None: ...


class Backend(Protocol):
    """How a plan is made true on the node: tc (:class:`TcBackend`) or terway-qos's files."""

    measures: bool  # its passes return the kernel's class counters (rates and usage come from them)

    def enforce(self, planner: NodePlanner, dry_run: bool) -> PassResult: ...

    def cleanup(self) -> list[str]: ...


class TcBackend:
    """HTB classes, nftables and u32 through the kernel (:class:`KernelOps`)."""

    measures = True

    def __init__(self, kernel: KernelOps):
        self.kernel = kernel
        self.owners: dict[str, dict[int, str]] = {}  # direction -> leaf minor -> the pod (uid) it was made for

    def enforce(self, planner: NodePlanner, dry_run: bool) -> PassResult:
        return enforce(self.kernel, planner, dry_run, self.owners)

    def cleanup(self) -> list[str]:
        return self.kernel.cleanup()


def enforce(
    kernel: KernelOps, planner: NodePlanner, dry_run: bool = False, owners: dict[str, dict[int, str]] | None = None
) -> PassResult:
    """One pass: the plan for what the kernel holds now, and (unless ``dry_run``) the kernel made to match it.
    ``owners``: which pod each leaf was made for, as this process last applied it (empty after a restart: the
    kernel does not know pods); updated here."""
    owners = owners if owners is not None else {}
    before = kernel.operations
    problems: list[str] = []
    states: dict[str, DeviceState] = {}
    counters: dict[str, dict[int, int]] = {}
    counted_at: dict[str, float] = {}
    for direction in DIRECTIONS:
        try:
            held, counters[direction] = kernel.state(direction)
        except KernelError as error:
            problems.append(f"{direction}: {error}")
            continue
        counted_at[direction] = time.monotonic()
        states[direction] = DeviceState(held.classes, held.members, owners.get(direction, {}))
    plan = planner({direction: state.members for direction, state in states.items()})
    problems += plan.problems
    if dry_run or not plan.directions:
        return PassResult(plan, 0, problems, counters, counted_at=counted_at)
    applied = True
    for direction in DIRECTIONS:
        if direction not in states:
            applied = False
            continue
        try:
            todo = _apply(kernel, direction, plan, states[direction])
        except KernelError as error:
            problems.append(f"{direction} not shaped: {error}")
            owners.pop(direction, None)  # what the kernel holds is no longer known for sure
            applied = False
            continue
        owners[direction] = leaves_after(plan.directions[direction], todo)
    return PassResult(plan, kernel.operations - before, problems, counters, applied, counted_at)


def _apply(kernel: KernelOps, direction: str, plan: NodePlan, state: DeviceState) -> list[Change]:
    """One direction's changes made, in their order (an address moved to a renewed leaf last, once that leaf
    exists); returns them."""
    if direction == "egress":
        index = kernel.ensure_root(kernel.interface)
        kernel.ensure_table()
    else:
        ifb = kernel.ensure_ifb()
        index = kernel.ensure_root(kernel.ifb)
        kernel.ensure_redirect(ifb)
    todo = changes(plan.directions[direction], state)
    gone = [c for c in todo if isinstance(c, DeleteMember)]
    added = [c for c in todo if isinstance(c, SetMember | MoveMember)]
    apply_members = kernel.apply_map if direction == "egress" else (lambda batch: kernel.apply_filters(index, batch))
    apply_members(gone)
    kernel.apply_classes(index, [c for c in todo if isinstance(c, SetClass | DeleteClass)])
    apply_members(added)
    return todo


class Meter:
    """Rates from the kernel's class counters between two passes (a counter that went back — a class made
    again — counts from zero)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._last: tuple[Mapping[str, float], Mapping[str, Mapping[int, int]]] | None = None

    def read(
        self, plan: NodePlan, counters: Mapping[str, Mapping[int, int]], at: Mapping[str, float] | None = None
    ) -> Rates | None:
        """Rates since the last read; ``at``: when each direction's ``counters`` were read (default: now). A pass
        posts Events and writes to the API between reading the counters and measuring, so the time of the read,
        not of the measurement, divides the bytes (a 1 s interval measured 7 % high once); and each direction's
        own read time, since the second read can come long after the first on a loaded node."""
        now = self._clock()
        times = {direction: (at or {}).get(direction, now) for direction in counters}
        last, self._last = self._last, (times, counters)
        if last is None or not plan.directions:
            return None
        seconds = {d: times[d] - last[0][d] for d in plan.directions if d in times and d in last[0]}
        if not seconds or min(seconds.values()) <= 0:
            return None
        window = max(seconds.values())  # a direction read only now (no counters before) counts 0 over it

        def rate(direction: str, minor: int) -> int:
            then, here = last[1].get(direction, {}).get(minor, 0), counters.get(direction, {}).get(minor, 0)
            return round((here - then if here >= then else here) * 8 / seconds.get(direction, window))

        node, classes, pods = {}, {}, {}
        for direction, directed in plan.directions.items():
            node[direction] = rate(direction, ROOT_MINOR)
            classes[direction] = {klass.name: rate(direction, klass.minor) for klass in directed.classes}
            classes[direction]["host"] = rate(direction, HOST_LEAF)
            pods[direction] = {pod.key: rate(direction, pod.minor) for pod in directed.pods}
        return Rates(node, classes, pods, window)
