"""One cycle of the rebalancer (pure): the moves of running pods that lower the objective, within every rule of
:mod:`.safety`.

**Objective** (lower is better): ``weights.networkCost`` x the sum over the AppGroups released by plan of their
dependency-edge cost (the planner's: every pod pair's NetworkOverhead cost, plus its penalty above
``maxNetworkCost``), + ``weights.bandwidthBalance`` x the thesis' imbalance Σ free²: over the nodes with a known
bandwidth and each direction (one with ``combined`` accounting), the free bandwidth in units of 100 Mbit/s,
squared. For a given total, Σ free² is lowest when the free bandwidth is spread evenly.

**A move** evicts one running pod; it is proposed only where its replacement will land:

1. *AppGroups released by plan* (``netaware.io/ordered-scheduling: plan``, every member bound and settled): the
   planner places the whole group afresh on the cluster (:func:`~operators.engine.planning.plan.plan_appgroup`
   with its members unbound): the *target layout*. A move takes a pod of a workload from a node holding more of
   the workload than the target to one holding fewer (a deficit node) that kube-scheduler's filters accept; the
   layout is written on the AppGroup before the eviction and the release plans the replacement on the deficit
   nodes (:mod:`operators.engine.planning.layout`). Moves are chosen greedily, best first, at most one per
   workload; the cycle keeps the prefix of that sequence with the lowest objective, then drops any move that
   gains less than ``minGainPerMove`` against the others (its leave-one-out gain).
2. *Other pods asking for bandwidth* (not AppGroup members) on the ``breadth`` nodes with the least free bandwidth:
   the replacement's node is the one the simulated kube-scheduler + extender picks for it
   (:func:`~operators.engine.scheduling.schedule.schedule` on the cluster without the pod); moves are taken best
   first while one gains at least ``minGainPerMove``, one per workload.

A move never takes a node above LowNodeLoad's high thresholds (``ceilings``); the cycle proposes nothing when its
moves together gain less than ``minGainPerCycle``, so the objective never rises.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.api.config.descheduler import DeschedulerPolicy, RebalanceArgs
from operators.api.config.scheduler import RESOURCES_FIT, SchedulerConfig
from operators.api.errors import FieldError
from operators.engine.cluster.bandwidth import Accounting, pod_demand
from operators.engine.cluster.fit import placement_reasons
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.descheduling.limits import EvictionLimits
from operators.engine.descheduling.lownodeload import Plan as LowNodeLoadPlan
from operators.engine.descheduling.lownodeload import Planner
from operators.engine.planning.plan import Plan, describe
from operators.engine.planning.problem import Problem, build_problem, members
from operators.engine.planning.release import plans_by_whole_group
from operators.engine.planning.search import Search, search
from operators.engine.rebalancing.safety import History, in_rollout, workload_of
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.schedule import schedule
from operators.engine.status.dependencies import validate

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
        room = self.ceilings.get(target)
        if room is None:
            return True
        used = self.usage(pod)
        return all(used.get(resource, 0) <= left for resource, left in room.items())

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
        used = self.usage(pod)
        for node, sign in ((move.source, 1), (move.target, -1)):
            if node in self.ceilings:
                for resource in self.ceilings[node]:
                    self.ceilings[node][resource] += sign * used.get(resource, 0)
        self.snapshot = _moved(self.snapshot, pod, move.target)


def _moved(snapshot: Snapshot, pod: Pod, node: str) -> Snapshot:
    """``snapshot`` with ``pod`` on ``node`` (its replacement, as far as placement goes)."""
    return replace(snapshot, pods=tuple(_on(p, node) if p.key == pod.key else p for p in snapshot.pods))


def _replacement(pod: Pod) -> Pod:
    """What the owner of ``pod`` would create in its place: unbound, without the node affinity term and the
    annotation a plan's release added to it (the template never had them)."""
    planned = pod.annotations.get(keys.PLANNED_NODE)
    raw = dict(_on(pod, "").raw)
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


def _on(pod: Pod, node: str) -> Pod:
    spec = {key: value for key, value in (pod.raw.get("spec") or {}).items() if key != "nodeName"}
    if node:
        spec["nodeName"] = node
    return Pod.parse({**pod.raw, "spec": spec})


def rebalance(
    snapshot: Snapshot,
    args: RebalanceArgs,
    config: SchedulerConfig,
    history: History,
    now: float,
    ceilings: Ceilings,
    usage: Usage,
    limits: EvictionLimits | None = None,
    evicting: Sequence[Pod] = (),
) -> Rebalance:
    """The cycle's moves on ``snapshot`` (see the module docstring). ``ceilings``/``usage``: LowNodeLoad's room
    below the high thresholds and a pod's usage of them; ``limits``: the eviction limits this cycle shares with
    LowNodeLoad; ``evicting``: pods LowNodeLoad evicts this cycle (their workloads are in flight). ``history`` is
    read, not changed: the shell records the moves it makes."""
    index = ClusterIndex.build(snapshot)
    balance = Balance(index, config)
    result = Rebalance()
    before_imbalance = balance.total()
    result.imbalance = (before_imbalance, before_imbalance)
    in_flight = len(history.in_flight) + len(evicting)
    left = min(args.max_moves_per_cycle, history.hourly_left(args, now))
    if in_flight:
        result.note = f"{in_flight} moves in flight: waiting for them to land"
        return result
    if left <= 0:
        result.note = "no moves left in this cycle's or this hour's budget"
        return result
    cycle = Cycle(snapshot, args, config, history, now, limits or EvictionLimits(), dict(ceilings), usage, balance,
                  left)  # fmt: skip
    cycle.ceilings = {node: dict(room) for node, room in ceilings.items()}
    cycle.rollouts = _rollouts(snapshot)
    weight = args.weights
    if weight.network_cost > 0:
        for group in sorted(snapshot.app_groups, key=lambda g: (g.metadata.namespace, g.metadata.name)):
            if plans_by_whole_group(group):
                _group_moves(cycle, group, result)
    if weight.bandwidth_balance > 0:
        _bandwidth_moves(cycle, result)
    gained = sum(move.gain for move in cycle.moves)
    if cycle.moves and gained < args.min_gain_per_cycle:
        result.note = f"the moves gain {gained:.3f} together, less than minGainPerCycle {args.min_gain_per_cycle:g}"
        result.layouts = {}
        for cost in result.groups.values():
            cost.after = cost.before
        return result
    result.moves = cycle.moves
    result.imbalance = (before_imbalance, cycle.balance.total())
    network = sum(cost.before for cost in result.groups.values()), sum(cost.after for cost in result.groups.values())
    result.objective = tuple(  # type: ignore[assignment]
        weight.network_cost * cost + weight.bandwidth_balance * imbalance
        for cost, imbalance in zip(network, result.imbalance, strict=True)
    )
    if not result.moves and not result.note:
        result.note = "no move gains at least minGainPerMove"
    return result


def _rollouts(snapshot: Snapshot) -> dict[str, str]:
    """workload -> why its pods are changing now (only those that are)."""
    by_workload: dict[str, list[Pod]] = {}
    for pod in snapshot.pods:
        if not pod.is_terminal:
            by_workload.setdefault(workload_of(pod), []).append(pod)
    found = {workload: in_rollout(pods) for workload, pods in by_workload.items() if workload}
    return {workload: why for workload, why in found.items() if why}


def after_low_node_load(
    snapshot: Snapshot,
    policy: DeschedulerPolicy,
    config: SchedulerConfig,
    history: History,
    now: float,
    planner: Planner,
    plan: LowNodeLoadPlan,
) -> Rebalance:
    """The rebalancer's part of a descheduling cycle, after LowNodeLoad's ``plan`` by ``planner``: its ceilings,
    its pods' usage, the eviction limits it has counted into, its evictions in flight."""
    assert policy.rebalance is not None
    return rebalance(snapshot, policy.rebalance, config, history, now, planner.ceilings(), planner.pod_usage,
                     planner.limits, [eviction.pod for eviction in plan.evictions])  # fmt: skip


# ---- 1. AppGroups released by plan -------------------------------------------------------------------------


def _group_moves(cycle: Cycle, group: AppGroup, result: Rebalance) -> None:
    name = f"{group.metadata.namespace}/{group.metadata.name}"
    if validate(group.spec):
        result.skipped[name] = "its spec is invalid"
        return
    selectors = [entry.workload.selector for entry in group.spec.workloads]
    pods = [p for p in members(group, cycle.snapshot.pods) if p.labels.get(keys.APPGROUP_WORKLOAD_LABEL) in selectors]
    if not pods:
        return
    by_workload: dict[str, list[Pod]] = {}
    for pod in pods:
        by_workload.setdefault(workload_of(pod), []).append(pod)
    for workload, owned in sorted(by_workload.items()):
        why = in_rollout(owned)
        if why:
            result.skipped[name] = f"{workload or 'a pod without a controller'}: {why}"
            return
    problem, current = _afresh(cycle.snapshot, group, pods, cycle.config)
    if problem.unplaceable:
        result.skipped[name] = f"{len(problem.unplaceable)} pods fit nowhere as the cluster stands"
        return
    found = search(problem, cycle.args.seed, cycle.args.plan_budget_seconds)
    if (found.assignment < 0).any():
        result.skipped[name] = "the planner places not every pod"
        return
    engine = Search(problem, cycle.args.seed)
    start = _objective(engine, current)
    planned = int(found.cost.objective)
    result.groups[name] = GroupCost(start, start, planned)
    target, goal_cost = _nearer(engine, current, cycle.args.plan_budget_seconds)
    if goal_cost > planned:  # the search from where the pods are ends worse than the planner's from scratch
        target = found.assignment.tolist()
    workload_count = len(selectors)
    goal = np.zeros((workload_count, len(problem.nodes)), dtype=np.int64)
    for row, node in enumerate(target):
        goal[int(problem.pod_workload[row]), int(node)] += 1
    result.layouts[name] = {
        selectors[w]: {problem.nodes[n]: int(goal[w, n]) for n in np.nonzero(goal[w])[0].tolist()}
        for w in range(workload_count)
    }
    if start - planned < cycle.args.min_gain_per_move:
        return
    sequence = _greedy(cycle, problem, engine, current, goal)
    chosen = _best_subset(cycle, engine, problem, current, sequence)
    placed = list(current)
    cost = start
    # every gain against the cycle's state before any of its moves is applied (applying changes the ceilings)
    gains = [_gain(cycle, engine, problem, current, [m for m in chosen if m != move], chosen) for move in chosen]
    for (row, node), gain in zip(chosen, gains, strict=True):
        source = placed[row]
        placed[row] = node
        after = _objective(engine, placed)
        member = problem.pods[row]
        imbalance = cycle.balance.total()
        change = cycle.balance.delta(member, problem.nodes[source], problem.nodes[node])
        cycle.apply(
            Move(member, workload_of(member), problem.nodes[source], problem.nodes[node], name, gain, (cost, after),
                 (imbalance, imbalance + change))
        )  # fmt: skip
        cost = after
    result.groups[name].after = cost


def _afresh(
    snapshot: Snapshot, group: AppGroup, pods: Sequence[Pod], config: SchedulerConfig
) -> tuple[Problem, list[int]]:
    """The problem of placing ``group``'s bound members ``pods`` afresh (all unbound), and where they are."""
    moving = {pod.key for pod in pods}
    unbound = replace(snapshot, pods=tuple(_replacement(p) if p.key in moving else p for p in snapshot.pods))
    problem = build_problem(ClusterIndex.build(unbound), group, config)
    position = {node: row for row, node in enumerate(problem.nodes)}
    bound = {pod.key: pod.node_name for pod in pods}
    return problem, [position[bound[pod.key]] for pod in problem.pods]


def placed_and_planned(
    snapshot: Snapshot, group: AppGroup, config: SchedulerConfig, seed: int = 0, budget_seconds: float = 0.2
) -> tuple[Plan, Plan]:
    """``group`` as its bound members are placed, and as the planner places them afresh on the same cluster (both
    as plans: per-edge costs, the objective); what the rebalancer's convergence is measured by."""
    pods = [pod for pod in members(group, snapshot.pods) if pod.node_name]
    problem, current = _afresh(snapshot, group, pods, config)
    engine = Search(problem, seed)
    state = engine.empty()
    for row, node in enumerate(current):
        engine.put(state, row, node)
    cost = engine.objective(state)
    placed = describe(problem, current, cost, cost, {}, seed)
    found = search(problem, seed, budget_seconds)
    planned = describe(problem, found.assignment, found.cost, found.greedy, found.unplaceable, seed)
    return placed, planned


def _nearer(engine: Search, current: list[int], budget: float) -> tuple[list[int], int]:
    """The planner's search started from where the pods are (its local moves and tabu steps): a layout as good as
    the one from scratch needs fewer moves when it is near the current one."""
    started = time.perf_counter()
    state = engine.empty()
    for pod, node in enumerate(current):
        engine.put(state, pod, node)

    def deadline() -> bool:
        return time.perf_counter() - started > budget

    engine.improve(state, deadline)
    state, _ = engine.tabu(state, deadline)
    return [int(node) for node in state.node.tolist()], int(engine.objective(state).objective)


def _objective(engine: Search, placed: Sequence[int]) -> int:
    state = engine.empty()
    for pod, node in enumerate(placed):
        engine.put(state, pod, int(node))
    return int(engine.objective(state).objective)


def _greedy(
    cycle: Cycle, problem: Problem, engine: Search, current: list[int], goal: np.ndarray[Any, Any]
) -> list[tuple[int, int]]:
    """Moves toward ``goal``, best (combined objective) first, at most one per workload, while the budget lasts."""
    weight = cycle.args.weights
    state = engine.empty()
    for pod, node in enumerate(current):
        engine.put(state, pod, node)
    placed = list(current)
    balance = _copy_balance(cycle.balance)
    ceilings = {node: dict(room) for node, room in cycle.ceilings.items()}
    used_workloads: set[int] = set()
    sequence: list[tuple[int, int]] = []
    objective = int(engine.objective(state).objective)
    limits = replace(cycle.limits, nodes=dict(cycle.limits.nodes), namespaces=dict(cycle.limits.namespaces))
    while len(sequence) < cycle.left:
        best: tuple[float, str, str, int, int, int] | None = None
        for pod, member in enumerate(problem.pods):
            w = int(problem.pod_workload[pod])
            source = placed[pod]
            if w in used_workloads or state.count_node[w, source] <= goal[w, source]:
                continue
            if cycle.history.refusal(member, workload_of(member), cycle.args, cycle.now):
                continue
            if limits.refusal(member.namespace, problem.nodes[source])[0]:
                continue
            deficits = np.nonzero(goal[w] > state.count_node[w])[0].tolist()
            if not deficits:
                continue
            engine.take(state, pod)
            fits = engine.fits(state, pod)
            for node in deficits:
                name = problem.nodes[node]
                if not fits[node] or (workload_of(member), name) in cycle.history.missed:
                    continue
                if not _under(ceilings, cycle.usage(member), name):
                    continue
                engine.put(state, pod, node)
                value = int(engine.objective(state).objective)
                engine.take(state, pod)
                delta = weight.network_cost * (value - objective) + weight.bandwidth_balance * balance.delta(
                    member, problem.nodes[source], name
                )
                key = (delta, member.key, name, pod, node, value)
                if best is None or key[:3] < best[:3]:
                    best = key
            engine.put(state, pod, source)
        if best is None:
            break
        _, _, name, pod, node, objective = best
        member = problem.pods[pod]
        engine.take(state, pod)
        engine.put(state, pod, node)
        balance.move(member, problem.nodes[placed[pod]], name)
        _shift(ceilings, cycle.usage(member), problem.nodes[placed[pod]], name)
        limits.record(member.namespace, problem.nodes[placed[pod]])
        placed[pod] = node
        used_workloads.add(int(problem.pod_workload[pod]))
        sequence.append((pod, node))
    return sequence


def _under(ceilings: Ceilings, used: Mapping[str, int], node: str) -> bool:
    room = ceilings.get(node)
    return room is None or all(used.get(resource, 0) <= left for resource, left in room.items())


def _shift(ceilings: Ceilings, used: Mapping[str, int], source: str, target: str) -> None:
    for node, sign in ((source, 1), (target, -1)):
        for resource in ceilings.get(node, {}):
            ceilings[node][resource] += sign * used.get(resource, 0)


def _copy_balance(balance: Balance) -> Balance:
    copy = object.__new__(Balance)
    copy.__dict__.update(balance.__dict__)
    copy.free = balance.free.copy()
    return copy


def _replay(
    cycle: Cycle, engine: Search, problem: Problem, current: list[int], moves: Sequence[tuple[int, int]]
) -> float | None:
    """The combined objective after ``moves`` in order from ``current`` (None: one of them no longer fits)."""
    weight = cycle.args.weights
    state = engine.empty()
    for pod, node in enumerate(current):
        engine.put(state, pod, node)
    balance = _copy_balance(cycle.balance)
    ceilings = {node: dict(room) for node, room in cycle.ceilings.items()}
    for pod, node in moves:
        member, source = problem.pods[pod], int(state.node[pod])
        engine.take(state, pod)
        name = problem.nodes[node]
        if not engine.fits(state, pod)[node] or not _under(ceilings, cycle.usage(member), name):
            return None
        engine.put(state, pod, node)
        balance.move(member, problem.nodes[source], name)
        _shift(ceilings, cycle.usage(member), problem.nodes[source], name)
    return weight.network_cost * int(engine.objective(state).objective) + weight.bandwidth_balance * balance.total()


def _gain(
    cycle: Cycle,
    engine: Search,
    problem: Problem,
    current: list[int],
    without: Sequence[tuple[int, int]],
    chosen: Sequence[tuple[int, int]],
) -> float:
    """What the moves ``chosen`` gain over ``without`` (one of them left out)."""
    rest = _replay(cycle, engine, problem, current, without)
    full = _replay(cycle, engine, problem, current, chosen)
    if rest is None or full is None:
        return float("inf") if full is not None else float("-inf")  # the others need it: it is part of the gain
    return rest - full


def _best_subset(
    cycle: Cycle, engine: Search, problem: Problem, current: list[int], sequence: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """The prefix of ``sequence`` with the lowest objective, then without the moves whose leave-one-out gain is
    below ``minGainPerMove`` (the worst first, until none is)."""
    start = _replay(cycle, engine, problem, current, [])
    assert start is not None
    values = [_replay(cycle, engine, problem, current, sequence[:k]) for k in range(len(sequence) + 1)]
    best = min(range(len(values)), key=lambda k: (values[k] if values[k] is not None else float("inf"), k))
    chosen = sequence[:best]
    while chosen:
        gains = [
            _gain(cycle, engine, problem, current, chosen[:i] + chosen[i + 1 :], chosen) for i in range(len(chosen))
        ]
        worst = min(range(len(chosen)), key=lambda i: gains[i])
        if gains[worst] >= cycle.args.min_gain_per_move:
            break
        del chosen[worst]
    end = _replay(cycle, engine, problem, current, chosen)
    if end is None or start - end < cycle.args.min_gain_per_move:
        return []
    return chosen


# ---- 2. pods asking for bandwidth ------------------------------------------------------------------------


def _bandwidth_moves(cycle: Cycle, result: Rebalance) -> None:
    weight = cycle.args.weights.bandwidth_balance
    used_workloads = {move.workload for move in cycle.moves}
    while cycle.left > 0:
        balance = cycle.balance
        fullest = sorted(
            (node for node, row in balance.row.items() if balance.known[row]),
            key=lambda node: (float(np.sum(balance.free[balance.row[node]])), node),
        )[: cycle.args.breadth]
        best: tuple[float, str, Move] | None = None
        seen: set[tuple[str, str]] = set()
        for source in fullest:
            for pod in sorted(cycle.snapshot.pods_by_node.get(source, ()), key=lambda p: p.key):
                workload = workload_of(pod)
                if (workload, source) in seen or keys.APPGROUP_LABEL in pod.labels:
                    continue
                seen.add((workload, source))
                if not np.any(balance.demand(pod)) or not cycle.allowed(pod, workload, source, used_workloads):
                    continue
                target = _scheduled(cycle, pod)
                if target is None or target == source or (workload, target) in cycle.history.missed:
                    continue
                if not cycle.fits_ceiling(pod, target):
                    continue
                change = balance.delta(pod, source, target)
                gain = -weight * change
                if gain < cycle.args.min_gain_per_move:
                    continue
                total = balance.total()
                move = Move(pod, workload, source, target, "", gain, imbalance=(total, total + change))
                if best is None or (-gain, pod.key) < (-best[0], best[1]):
                    best = (gain, pod.key, move)
        if best is None:
            return
        cycle.apply(best[2])
        used_workloads.add(best[2].workload)
    if not cycle.left:
        result.note = result.note or "the cycle's move budget is spent"


def _scheduled(cycle: Cycle, pod: Pod) -> str | None:
    """Where the simulated kube-scheduler + extender puts ``pod``'s replacement on the cluster without it:
    kube-scheduler's own filters (unschedulable, taints, node affinity, NodeResourcesFit) and the extender's
    filters and scores as ``config`` has them."""
    replacement = _on(pod, "")
    others = replace(cycle.snapshot, pods=tuple(p for p in cycle.snapshot.pods if p.key != pod.key))
    index = ClusterIndex.build(others)
    allowed = [node for node in others.nodes if not placement_reasons(replacement, node)]
    if not allowed:
        return None
    config = cycle.config
    if RESOURCES_FIT not in config.filters:
        config = replace(config, filters=(*config.filters, RESOURCES_FIT))
    table = index.table_of(allowed, config.bandwidth.default_node_bandwidth)
    return schedule(replacement, index, config, table=table, detail=False).selected
