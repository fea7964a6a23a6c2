"""The rebalancer's model of a cycle (pure): a move, what a cycle found, the free bandwidth as pods move, and the
cycle's shared state (the cluster as moved so far, the budgets, LowNodeLoad's ceilings). See :mod:`.rebalance`."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from operators.api import keys
from operators.api.config.descheduler import RebalanceArgs
from operators.api.config.scheduler import SchedulerConfig
from operators.api.errors import FieldError
from operators.engine.cluster.bandwidth import Accounting, pod_demand
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.descheduling.limits import EvictionLimits
from operators.engine.rebalancing.safety import History
from operators.engine.scheduling.index import ClusterIndex

UNIT = 100_000_000  # bits/s: the imbalance counts free bandwidth in units of 100 Mbit/s


Ceilings = dict[str, dict[str, int]]  # node -> resource -> room below its high threshold


Usage = Callable[[Pod], Mapping[str, int]]  # a pod's usage of the threshold resources


@dataclass(frozen=True)
class Move:
    pod: Pod
    workload: str
    source: str
    target: str
    appgroup: str  # namespace/name when moved through its plan, "" for a bandwidth move
    gain: float  # the objective's fall (leave-one-out within the cycle for AppGroup moves)
    cost: tuple[int, int] = (0, 0)  # the AppGroup's edge cost before and after this move (in the cycle's sequence)
    imbalance: tuple[float, float] = (0.0, 0.0)  # Σ free² before and after this move

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pod": self.pod.key,
            "workload": self.workload,
            "from": self.source,
            "to": self.target,
            "gain": round(self.gain, 3),
            "imbalance": {"before": round(self.imbalance[0], 3), "after": round(self.imbalance[1], 3)},
        }
        if self.appgroup:
            out["appGroup"] = self.appgroup
            out["cost"] = {"before": self.cost[0], "after": self.cost[1]}
        return out


@dataclass
class GroupCost:
    before: int  # the group's objective as placed
    after: int  # ... after this cycle's moves
    planned: int  # ... of the target layout (the planner's, from scratch)


@dataclass
class Rebalance:
    moves: list[Move] = field(default_factory=list)
    groups: dict[str, GroupCost] = field(default_factory=dict)
    layouts: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)  # group -> selector -> node -> n
    skipped: dict[str, str] = field(default_factory=dict)  # group or pod -> why not moved
    imbalance: tuple[float, float] = (0.0, 0.0)
    objective: tuple[float, float] = (0.0, 0.0)
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "moves": [move.to_json() for move in self.moves],
            "appGroups": {
                name: {"costBefore": cost.before, "costAfter": cost.after, "planned": cost.planned}
                for name, cost in sorted(self.groups.items())
            },
            "imbalance": {"before": round(self.imbalance[0], 3), "after": round(self.imbalance[1], 3)},
            "objective": {"before": round(self.objective[0], 3), "after": round(self.objective[1], 3)},
            "skipped": dict(sorted(self.skipped.items())),
            "note": self.note,
        }


class Balance:
    """Free bandwidth per node and direction (units of 100 Mbit/s), and Σ free² as pods move."""

    def __init__(self, index: ClusterIndex, config: SchedulerConfig):
        table = index.table(config.bandwidth.default_node_bandwidth)
        self.combined = Accounting(config.bandwidth.accounting_mode) == Accounting.COMBINED
        known = (table.capacity >= 0) & np.array([name not in table.usage_problems for name in table.names])
        capacity = table.capacity.astype(np.float64)
        if self.combined:
            free = (capacity - table.used_in - table.used_out)[:, None]
        else:
            free = np.stack([capacity - table.used_in, capacity - table.used_out], axis=1)
        self.free = np.where(known[:, None], free / UNIT, 0.0)
        self.known = known
        self.row = table.row_of

    def total(self) -> float:
        return float(np.sum(self.free[self.known] ** 2))

    def demand(self, pod: Pod) -> np.ndarray[Any, np.dtype[np.float64]]:
        try:
            ingress, egress = pod_demand(pod.annotations, pod.requests)
        except FieldError:
            ingress = egress = 0
        both = np.array([ingress + egress] if self.combined else [ingress, egress], dtype=np.float64)
        return both / UNIT

    def delta(self, pod: Pod, source: str, target: str) -> float:
        """How Σ free² changes when ``pod`` moves from ``source`` to ``target``."""
        want = self.demand(pod)
        change = 0.0
        for node, sign in ((source, 1.0), (target, -1.0)):
            row = self.row.get(node)
            if row is not None and self.known[row]:
                free = self.free[row]
                change += float(np.sum((free + sign * want) ** 2 - free**2))
        return change

    def copy(self) -> Balance:
        """The same free bandwidth, to move pods in without changing this one."""
        clone = copy.copy(self)
        clone.free = self.free.copy()
        return clone

    def move(self, pod: Pod, source: str, target: str) -> None:
        want = self.demand(pod)
        for node, sign in ((source, 1.0), (target, -1.0)):
            row = self.row.get(node)
            if row is not None:
                self.free[row] += sign * want


@dataclass
class Cycle:
    """The cycle's shared state: the cluster as moved so far, the budgets, the ceilings and the imbalance."""

    snapshot: Snapshot
    args: RebalanceArgs
    config: SchedulerConfig
    history: History
    now: float
    limits: EvictionLimits
    ceilings: Ceilings
    usage: Usage
    balance: Balance
    left: int  # moves this cycle may still make
    moves: list[Move] = field(default_factory=list)
    rollouts: dict[str, str] = field(default_factory=dict)  # workload -> why it is changing now (rule 1)

    def fits_ceiling(self, pod: Pod, target: str) -> bool:
        return under(self.ceilings, self.usage(pod), target)

    def allowed(self, pod: Pod, workload: str, source: str, used: set[str]) -> bool:
        return (
            workload not in used
            and not self.rollouts.get(workload)
            and not self.history.refusal(pod, workload, self.args, self.now)
            and not self.limits.refusal(pod.namespace, source)[0]
        )

    def apply(self, move: Move) -> None:
        pod = move.pod
        self.moves.append(move)
        self.left -= 1
        self.limits.record(pod.namespace, move.source)
        self.balance.move(pod, move.source, move.target)
        shift(self.ceilings, self.usage(pod), move.source, move.target)
        self.snapshot = moved(self.snapshot, pod, move.target)


def moved(snapshot: Snapshot, pod: Pod, node: str) -> Snapshot:
    """``snapshot`` with ``pod`` on ``node`` (its replacement, as far as placement goes)."""
    return replace(snapshot, pods=tuple(p.on_node(node) if p.key == pod.key else p for p in snapshot.pods))


def replacement(pod: Pod) -> Pod:
    """What the owner of ``pod`` would create in its place: unbound, without the node affinity term and the
    annotation a plan's release added to it (the template never had them)."""
    planned = pod.annotations.get(keys.PLANNED_NODE)
    raw = dict(pod.on_node("").raw)
    if not planned:
        return Pod.parse(raw)
    ours = {"key": "metadata.name", "operator": "In", "values": [planned]}
    spec = dict(raw["spec"])
    affinity = dict(spec.get("affinity") or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = []
    for term in required.get("nodeSelectorTerms") or ():
        fields = [entry for entry in term.get("matchFields") or () if entry != ours]
        kept = {**term, "matchFields": fields} if fields else {k: v for k, v in term.items() if k != "matchFields"}
        if kept:
            terms.append(kept)
    if terms:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
    else:
        node_affinity.pop("requiredDuringSchedulingIgnoredDuringExecution", None)
    if node_affinity:
        affinity["nodeAffinity"] = node_affinity
    else:
        affinity.pop("nodeAffinity", None)
    if affinity:
        spec["affinity"] = affinity
    else:
        spec.pop("affinity", None)
    metadata = dict(raw["metadata"])
    metadata["annotations"] = {k: v for k, v in pod.annotations.items() if k != keys.PLANNED_NODE}
    return Pod.parse({**raw, "metadata": metadata, "spec": spec})


def under(ceilings: Ceilings, used: Mapping[str, int], node: str) -> bool:
    room = ceilings.get(node)
    return room is None or all(used.get(resource, 0) <= left for resource, left in room.items())


def shift(ceilings: Ceilings, used: Mapping[str, int], source: str, target: str) -> None:
    for node, sign in ((source, 1), (target, -1)):
        for resource in ceilings.get(node, {}):
            ceilings[node][resource] += sign * used.get(resource, 0)
