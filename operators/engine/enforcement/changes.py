"""What one device's HTB tree and classifier need to become the plan: the difference between a direction's plan
and what the kernel holds, as the fewest netlink changes, in an order the kernel accepts (pure).

The agent reads the kernel (its own classes under :data:`MAJOR`, its classifier's address -> leaf entries),
calls :func:`changes`, and applies the result. Equal inputs give no changes: a second pass is silent. A pod's
arrival is one class and one classifier entry; its departure the same two removed; a NodeSLO change is one
``change`` per class whose numbers moved.

A pod's leaf is never changed in place: HTB keeps a class's tokens across ``tc class change``, so a leaf that
overran (borrowed) at its old rate would start its new one in debt — measured: a request raised from none to
40M gave 10M for 8-9 s, a removed 40M request 0 bits/s for 20 s. A leaf whose rate or ceil changes, or that
another pod held (a reused address, as the agent remembers it: :attr:`DeviceState.owners`), is made anew under
a free id (a new class starts with full buckets) and its address moved to it in one step (:class:`MoveMember`).
The old leaf is left to drain and goes at the next pass (the plan then keeps the pod on its new id). Deleting
the leaf and adding it again under the same id left a gap in which the pod's packets fell to the default (host)
leaf, at HTB's minimum rate once the requests take the whole node: its TCP stalled at 0 bits/s for 2 s or more
in about one run of four. Nothing else is torn down.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from operators.engine.enforcement.plan import FIRST_LEAF, HOST_LEAF, LAST_LEAF, MIN_RATE, ROOT_MINOR, DirectionPlan

MAJOR = 0x4E41  # "NA": the qdisc handle the agent's trees use on every device (a root with another handle is not ours)
QUANTUM = 1514  # bytes a leaf sends per round when leaves of one priority share what they borrow (one full frame)


def kernel_rate(bits: int) -> int:
    """What HTB stores of a rate: bytes/s. Plans are compared at this precision, so a rate that is not a whole
    number of bytes does not look changed on every pass."""
    return bits // 8


@dataclass(frozen=True)
class HtbClass:
    minor: int
    parent: int  # minor of the parent class; 0: the qdisc itself
    rate: int  # bytes/s, as the kernel holds it
    ceil: int
    prio: int


@dataclass(frozen=True)
class DeviceState:
    """The agent's own objects on one device, as read back: classes by minor, classifier entries IP -> minor."""

    classes: Mapping[int, HtbClass]
    members: Mapping[str, int]
    owners: Mapping[int, str] = dataclasses.field(default_factory=dict)  # leaf minor -> the pod (uid) it was made for


@dataclass(frozen=True)
class SetClass:
    klass: HtbClass
    new: bool  # add (else change in place)


@dataclass(frozen=True)
class DeleteClass:
    minor: int


@dataclass(frozen=True)
class SetMember:
    ip: str
    minor: int


@dataclass(frozen=True)
class DeleteMember:
    ip: str
    minor: int


@dataclass(frozen=True)
class MoveMember:
    """An address moved from one leaf to another in one step: its packets never fall to the default leaf."""

    ip: str
    old: int
    new: int


Change = SetClass | DeleteClass | SetMember | DeleteMember | MoveMember


def wanted_classes(plan: DirectionPlan) -> dict[int, HtbClass]:
    """The tree for ``plan``: the root at the total, the four classes, the host leaf, one leaf per pod."""
    total = kernel_rate(plan.total)
    tree = {ROOT_MINOR: HtbClass(ROOT_MINOR, 0, total, total, 0)}
    for klass in plan.classes:
        tree[klass.minor] = HtbClass(
            klass.minor, ROOT_MINOR, kernel_rate(klass.rate), kernel_rate(klass.ceil), klass.priority
        )
    system = plan.klass("system")
    host = max(plan.host_rate, MIN_RATE)
    tree[HOST_LEAF] = HtbClass(
        HOST_LEAF, system.minor, kernel_rate(host), kernel_rate(max(system.ceil, host)), system.priority
    )
    for pod in plan.pods:
        parent = plan.klass(pod.qos_class)
        tree[pod.minor] = HtbClass(
            pod.minor, parent.minor, kernel_rate(pod.rate), kernel_rate(pod.ceil), parent.priority
        )
    return tree


def changes(plan: DirectionPlan, state: DeviceState) -> list[Change]:
    """The changes that make ``state`` the plan, in the order to apply them: classifier entries that go first (a
    class still referenced cannot be deleted), then classes that go (leaves before their parents), then classes
    set (parents before leaves), then classifier entries set or moved to a renewed leaf."""
    tree = wanted_classes(plan)
    members = {pod.ip: pod.minor for pod in plan.pods}
    held_by = {minor: ip for ip, minor in state.members.items()}
    moved = {  # a class whose parent changes (a pod relabelled) is deleted and added again
        minor for minor, klass in tree.items() if minor in state.classes and state.classes[minor].parent != klass.parent
    }
    renewed = {  # a pod's leaf that would inherit another rate's or another pod's tokens (see the module docstring)
        pod.minor
        for pod in plan.pods
        if pod.minor in state.classes
        and pod.minor not in moved
        and (
            state.classes[pod.minor] != tree[pod.minor]
            or held_by.get(pod.minor, pod.ip) != pod.ip
            or state.owners.get(pod.minor, pod.uid) != pod.uid
        )
    }
    taken = set(state.classes) | set(tree)
    spare = (minor for minor in range(FIRST_LEAF, LAST_LEAF + 1) if minor not in taken)
    draining: set[int] = set()
    for minor in sorted(renewed):
        fresh = next(spare, None)
        if fresh is None:  # no id to spare: deleted and added again, as a moved class
            moved.add(minor)
            continue
        tree[fresh] = dataclasses.replace(tree.pop(minor), minor=fresh)
        members = {ip: fresh if held == minor else held for ip, held in members.items()}
        draining.add(minor)
    gone = (set(state.classes) - set(tree) - draining) | moved
    out: list[Change] = []
    movable = {ip for ip, minor in state.members.items() if minor in draining and ip in members}
    for ip, minor in sorted(state.members.items()):
        if ip not in movable and (members.get(ip) != minor or minor in gone):
            out.append(DeleteMember(ip, minor))
    out += [DeleteClass(minor) for minor in sorted(gone, key=lambda m: _depth(m, state.classes), reverse=True)]
    for minor in sorted(tree, key=lambda m: _depth(m, tree)):
        klass, held = tree[minor], state.classes.get(minor)
        if held is None or minor in moved:
            out.append(SetClass(klass, new=True))
        elif held != klass:
            out.append(SetClass(klass, new=False))
    for ip, minor in sorted(members.items()):
        held_minor = state.members.get(ip)
        if ip in movable and held_minor is not None:
            out.append(MoveMember(ip, held_minor, minor))
        elif held_minor != minor or minor in moved:
            out.append(SetMember(ip, minor))
    return out


def leaves_after(plan: DirectionPlan, todo: list[Change]) -> dict[int, str]:
    """Leaf id -> the pod (uid) it holds once ``todo`` is applied: a renewed leaf's pod is on its new id."""
    renewed = {change.old: change.new for change in todo if isinstance(change, MoveMember)}
    return {renewed.get(pod.minor, pod.minor): pod.uid for pod in plan.pods}


def _depth(minor: int, tree: Mapping[int, HtbClass]) -> int:
    depth, seen = 0, set()
    while minor in tree and tree[minor].parent and minor not in seen:
        seen.add(minor)
        minor, depth = tree[minor].parent, depth + 1
    return depth
