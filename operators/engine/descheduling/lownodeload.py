"""LowNodeLoad with netBandwidth: classify nodes, pick pods to evict from the hot ones (pure).

Follows Koordinator's LowNodeLoad descheduling plugin for one node pool, with these
choices: the fit check runs per candidate in eviction order and reserves room on the target only
for pods actually evicted (Koordinator reserves for every pod that fits, in list order, evicted or
not); the threshold reservation on a target always applies and ``nodeFit`` adds kube-scheduler's
default filters (the engine's one pipeline: unschedulable, taints, node affinity, host ports, volumes, topology
spread, inter-pod affinity over the cluster as it stands; the requests against the target as this plan's
evictions leave it) — so no plan pushes a target above its high threshold nor sends a pod where kube-scheduler
would refuse it; there is no prod tier and no node pools.

``EvictionPlanner.steps()`` is a generator: it yields each eviction it wants and is sent back whether the
eviction happened (the live shell calls the Eviction API; a 429 sends ``False`` and the planner
carries on with the next pod). ``plan()`` drives it with "yes" for an offline plan or a dry run.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from operators.api.config.descheduler import DeschedulerPolicy
from operators.api.selectors import Selector, from_label_selector, parse_selector
from operators.engine.cluster.kube import filters as kube_filters
from operators.engine.cluster.kube.view import PlacedPods, placed_pods
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.descheduling.evictability import order_key, protection, usage_score
from operators.engine.descheduling.limits import NAMESPACE, NODE, TOTAL, EvictionLimits
from operators.engine.descheduling.usage import Amounts, Loads, NodeLoad, node_loads, requested

LOW, HIGH, NORMAL = "low", "high", "normal"
# nodeFit's filters from the pipeline: all of kube-scheduler's but NodeResourcesFit, counted against the plan's room
NODE_FIT_FILTERS = tuple(name for name in kube_filters.DEFAULT_FILTERS if name != kube_filters.RESOURCES_FIT)


@dataclass(frozen=True)
class Eviction:
    pod: Pod
    node: str
    target: str
    reason: str


@dataclass
class EvictionPlan:
    classes: dict[str, str] = field(default_factory=dict)
    usage: dict[str, dict[str, float]] = field(default_factory=dict)  # percent, as first observed
    thresholds: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)  # percent (low, high)
    skipped: dict[str, str] = field(default_factory=dict)
    evictions: list[Eviction] = field(default_factory=list)
    refused: list[Eviction] = field(default_factory=list)  # wanted, but the API said no
    observations: dict[str, int] = field(default_factory=dict)  # consecutive high observations per node
    note: str = ""  # why nothing was planned, when nothing was

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": {
                name: {"class": self.classes[name], "usage": {r: round(v, 2) for r, v in self.usage[name].items()}}
                for name in sorted(self.classes)
            },
            "evictions": [
                {"pod": e.pod.key, "node": e.node, "target": e.target, "reason": e.reason} for e in self.evictions
            ],
            "skipped": dict(sorted(self.skipped.items())),
            "note": self.note,
        }


def _absolute(percent: float, capacity: int) -> int:
    # Koordinator: int64(float64(pct) * 0.01 * float64(capacity)), left to right.
    return int(percent * 0.01 * capacity)


class Targets:
    """The low nodes taking evicted pods, roomiest first (by the smallest share of capacity left below
    high over the threshold resources), with the exact largest room per resource so that a pod that
    fits nowhere is rejected without a scan. Rooms only shrink as pods are placed."""

    def __init__(self, loads: list[NodeLoad], high: Mapping[str, Mapping[str, int]], resources: tuple[str, ...]):
        self.resources = resources
        self.by_name = {load.node.name: load for load in loads}
        self.room = {name: {r: high[name][r] - load.usage[r] for r in resources} for name, load in self.by_name.items()}
        self.order = sorted((self._key(name), name) for name in self.by_name)
        self._version = dict.fromkeys(self.by_name, 0)
        self._largest = {r: [(-room[r], name, 0) for name, room in self.room.items()] for r in resources}
        for heap in self._largest.values():
            heapq.heapify(heap)

    def _key(self, name: str) -> float:
        capacity = self.by_name[name].capacity
        return -min(self.room[name][r] / capacity[r] for r in self.resources)

    def largest_room(self, resource: str) -> int:
        heap = self._largest[resource]
        while heap and heap[0][2] != self._version[heap[0][1]]:
            heapq.heappop(heap)  # an entry from before the node took a pod
        return -heap[0][0] if heap else 0

    def __iter__(self) -> Iterator[NodeLoad]:
        return (self.by_name[name] for _, name in self.order)

    def place(self, name: str, used: Mapping[str, int]) -> None:
        """Take ``used`` from the node's room (its usage is updated by the caller)."""
        del self.order[bisect.bisect_left(self.order, (self._key(name), name))]
        room = self.room[name]
        for r in self.resources:
            room[r] -= used[r]
        version = self._version[name] = self._version[name] + 1
        for r in self.resources:
            heapq.heappush(self._largest[r], (-room[r], name, version))
        bisect.insort(self.order, (self._key(name), name))


class EvictionPlanner:
    def __init__(
        self,
        snapshot: Snapshot,
        policy: DeschedulerPolicy,
        now: datetime,
        observations: Mapping[str, int] | None = None,
        prometheus: Mapping[str, tuple[float, float]] | None = None,
        limits: EvictionLimits | None = None,
        protected: Callable[[Pod], bool] = lambda pod: False,
    ) -> None:
        self.policy = policy
        self.limits = limits if limits is not None else EvictionLimits.of(policy)
        self._protected = protected  # pods another plugin placed and LowNodeLoad must leave be (the rebalancer's)
        self.args = policy.args
        self.plan = EvictionPlan()
        self._previous = dict(observations or {})
        self._loads: Loads = node_loads(snapshot, self.args, now, prometheus)
        self._snapshot = snapshot
        self._placed: PlacedPods | None = None  # kube-scheduler's view of the placed pods, made for nodeFit
        self._pool = self._pool_nodes(snapshot)
        self._pod_selectors = [from_label_selector(s.selector, "podSelectors") for s in self.args.pod_selectors]

    def _pool_nodes(self, snapshot: Snapshot) -> list[NodeLoad]:
        """The nodes the policy's nodeSelector picks (all without one); reports the skipped ones among them."""
        raw = self.args.node_selector
        selector: Selector | None = None
        if isinstance(raw, str):
            selector = parse_selector(raw, "nodeSelector")
        elif raw:
            selector = from_label_selector(raw, "nodeSelector")
        nodes = snapshot.node_by_name
        self.plan.skipped = {
            name: why
            for name, why in self._loads.skipped.items()
            if selector is None or selector.matches(nodes[name].labels)
        }
        return [load for load in self._loads.nodes.values() if selector is None or selector.matches(load.node.labels)]

    # --- classification --------------------------------------------------------------------------

    def _percent_thresholds(self) -> dict[str, dict[str, tuple[float, float]]]:
        """node -> resource -> (low, high) percent: as configured, or (deviation mode) the band around the pool's
        mean utilisation, the same for every node of the pool (Koordinator: low 0 means "no band": 100, 100)."""
        args = self.args
        low_pct, high_pct = args.low_thresholds, args.high_thresholds
        if not args.use_deviation_thresholds:
            band = {r: (low_pct[r], high_pct[r]) for r in args.resources}
        else:
            pool = self._pool
            mean = {r: sum(load.percent(r) for load in pool) / len(pool) if pool else 0.0 for r in args.resources}
            band = {
                r: (100.0, 100.0)
                if low_pct[r] == 0
                else (min(100.0, max(0.0, mean[r] - low_pct[r])), min(100.0, max(0.0, mean[r] + high_pct[r])))
                for r in args.resources
            }
        return {load.name: dict(band) for load in self._pool}

    def _thresholds(
        self, percents: Mapping[str, Mapping[str, tuple[float, float]]]
    ) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
        """node -> (low, high) absolute amounts per threshold resource, from the percentages."""
        result = {}
        for load in self._pool:
            bands = percents[load.name]
            result[load.name] = (
                {r: _absolute(low, load.capacity[r]) for r, (low, _) in bands.items()},
                {r: _absolute(high, load.capacity[r]) for r, (_, high) in bands.items()},
            )
        return result

    def ceilings(self) -> dict[str, dict[str, int]]:
        """node -> resource -> how much more usage the node takes before it is above its high threshold (the pool's
        nodes; what another plugin checks so that it never makes work for LowNodeLoad)."""
        high = {name: limits[1] for name, limits in self._thresholds(self._percent_thresholds()).items()}
        return {load.name: {r: high[load.name][r] - load.usage[r] for r in high[load.name]} for load in self._pool}

    def pod_usage(self, pod: Pod) -> Amounts:
        return self._loads.pod_usage(pod)

    def _classify(self, thresholds: Mapping[str, tuple[dict[str, int], dict[str, int]]]) -> None:
        plan = self.plan
        for load in self._pool:
            low, high = thresholds[load.name]
            if not load.node.unschedulable and all(load.usage[r] <= low[r] for r in low):
                plan.classes[load.name] = LOW
            elif any(load.usage[r] > high[r] for r in high):
                plan.classes[load.name] = HIGH
            else:
                plan.classes[load.name] = NORMAL
            plan.usage[load.name] = {r: load.percent(r) for r in self.args.resources}
            if plan.classes[load.name] == HIGH:
                plan.observations[load.name] = self._previous.get(load.name, 0) + 1

    def _source_score(self, load: NodeLoad) -> int:
        weights = {r: self.args.weight(r) for r in self.args.resources}
        total = sum(weights[r] * min(load.usage[r], load.capacity[r]) * 1000 // load.capacity[r] for r in weights)
        return total // sum(weights.values())

    # --- the eviction loop -----------------------------------------------------------------------

    def steps(self) -> Generator[Eviction, bool, EvictionPlan]:
        """Yield evictions one by one; send back whether each happened. Returns the finished plan."""
        plan = self.plan
        plan.thresholds = self._percent_thresholds()
        thresholds = self._thresholds(plan.thresholds)
        self._classify(thresholds)
        sources, targets = self._sources_and_targets()
        if not sources or not targets:
            return plan
        resources = self.args.resources
        available = {r: sum(thresholds[t.name][1][r] - t.usage[r] for t in targets) for r in resources}
        room = Targets(targets, {t.name: thresholds[t.name][1] for t in targets}, resources)
        sources.sort(key=lambda s: (-self._source_score(s), s.name))
        for source in sources:
            evicted_here = yield from self._drain(source, thresholds[source.name][1], room, available)
            if evicted_here is None:
                return plan  # the total limit is reached
            if evicted_here:
                plan.observations[source.name] = 0  # acted on: observe it afresh (Koordinator's Mark(true))
        return plan

    def _sources_and_targets(self) -> tuple[list[NodeLoad], list[NodeLoad]]:
        """The high nodes seen high often enough, and the low nodes; both empty (and the plan's note saying why)
        when there is nothing to do."""
        plan = self.plan
        needed = self.args.anomaly_condition.consecutive_abnormalities
        sources = [
            load for load in self._pool if plan.classes[load.name] == HIGH and plan.observations[load.name] >= needed
        ]
        targets = [load for load in self._pool if plan.classes[load.name] == LOW]
        acting = {load.name for load in sources}
        for load in self._pool:
            if plan.classes[load.name] == HIGH and load.name not in acting:
                plan.note = f"{load.name} high {plan.observations[load.name]} of {needed} consecutive times"
        if not sources:
            plan.note = plan.note or "no node above its high thresholds"
        elif not targets:
            plan.note = "no node below its low thresholds to take pods"
        elif len(targets) <= self.args.number_of_nodes:
            plan.note = f"{len(targets)} low nodes, not more than numberOfNodes {self.args.number_of_nodes}"
        else:
            return sources, targets
        return [], []

    def _drain(
        self, source: NodeLoad, high: Mapping[str, int], room: Targets, available: dict[str, int]
    ) -> Generator[Eviction, bool, bool | None]:
        """Evict from one high node, cheapest pods first, until it is no longer high (or the targets are full):
        whether a pod was evicted, None when the total limit stopped the plan."""
        resources = self.args.resources
        excess = {r: source.usage[r] - high[r] for r in resources}
        weights = {r: self.args.weight(r) for r in resources}
        usage_of = {pod.key: self._loads.pod_usage(pod) for pod in source.pods if self._candidate(pod)}
        candidates = sorted(
            (pod for pod in source.pods if pod.key in usage_of),
            key=lambda pod: order_key(pod, usage_score(usage_of[pod.key], excess, weights)),
        )
        evicted_here = False
        for pod in candidates:
            if all(source.usage[r] <= high[r] for r in resources) or any(available[r] <= 0 for r in resources):
                break  # no longer high, or no room left anywhere
            limit, message = self.limits.refusal(pod.namespace, source.name)
            if limit == TOTAL:
                self.plan.note = message
                return None
            if limit == NODE:
                break
            target = None if limit == NAMESPACE else self._target(pod, usage_of[pod.key], room)
            if target is None:
                continue
            eviction = Eviction(pod, source.name, target.name, self._reason(source, high))
            if not (yield eviction):
                self.plan.refused.append(eviction)
                continue
            self._moved(eviction, source, target, usage_of[pod.key], room, available)
            evicted_here = True
        return evicted_here

    def _moved(
        self,
        eviction: Eviction,
        source: NodeLoad,
        target: NodeLoad,
        used: Amounts,
        room: Targets,
        available: dict[str, int],
    ) -> None:
        """Account an eviction that happened: the limits, the targets' room, both nodes' usage and requests."""
        pod = eviction.pod
        self.plan.evictions.append(eviction)
        self.limits.record(pod.namespace, source.name)
        room.place(target.name, used)
        for r in self.args.resources:
            available[r] -= used[r]
            source.usage[r] -= used[r]
            target.usage[r] += used[r]
        for r, amount in requested(pod).items():
            source.requested[r] = source.requested_of(r) - amount
            target.requested[r] = target.requested_of(r) + amount

    def _candidate(self, pod: Pod) -> bool:
        if protection(pod, self.args.evict_local_storage_pods) or self._protected(pod):
            return False
        if not self.args.evictable_namespaces.allows(pod.namespace):
            return False
        return not self._pod_selectors or any(s.matches(pod.labels) for s in self._pod_selectors)

    def _target(self, pod: Pod, used: Amounts, targets: Targets) -> NodeLoad | None:
        """The roomiest target that stays at or below its high thresholds with the pod (and, with nodeFit,
        that kube-scheduler would accept it on)."""
        if any(used[r] > targets.largest_room(r) for r in targets.resources):
            return None  # fits nowhere
        asked = requested(pod) if self.args.node_fit else {}
        cycle = self._cycle(pod) if self.args.node_fit else None
        for target in targets:
            room = targets.room[target.node.name]
            if any(used[r] > room[r] for r in targets.resources):
                continue
            if self.args.node_fit and not self._fits(pod, asked, target, cycle):
                continue
            return target
        return None

    def _cycle(self, pod: Pod) -> kube_filters.Cycle:
        """kube-scheduler's PreFilter for ``pod``'s replacement: the cluster as it stands, the pod off its node."""
        placed = self._placed = self._placed or placed_pods(self._snapshot)
        cycle = kube_filters.prefilter(pod, placed, lambda node: ({}, 0))
        node = self._snapshot.node_by_name.get(pod.node_name)
        if node is not None:
            kube_filters.add_pod(cycle, pod, node, sign=-1)
        return cycle

    @staticmethod
    def _fits(pod: Pod, asked: Amounts, target: NodeLoad, cycle: kube_filters.Cycle | None) -> bool:
        """kube-scheduler's filters but NodeResourcesFit over the cluster as it stands (``cycle``), and the
        requests against the target's allocatable as this plan's evictions leave it."""
        if cycle is not None and kube_filters.failure(cycle, target.node, NODE_FIT_FILTERS)[1]:
            return False
        limits = ((r, amount, target.allocatable_of(r)) for r, amount in asked.items())
        return all(limit is None or target.requested_of(r) + amount <= limit for r, amount, limit in limits)

    def _reason(self, source: NodeLoad, high: Mapping[str, int]) -> str:
        over = [
            # the percentage as configured (or the deviation band's edge), not the truncated absolute read back
            f"node {r} usage({source.percent(r):.2f}%)>threshold({self.plan.thresholds[source.name][r][1]:.2f}%)"
            for r in sorted(high)
            if source.usage[r] > high[r]
        ]
        return "node is overutilized, " + ", ".join(over)


def plan(
    snapshot: Snapshot,
    policy: DeschedulerPolicy,
    now: datetime,
    observations: Mapping[str, int] | None = None,
    prometheus: Mapping[str, tuple[float, float]] | None = None,
) -> EvictionPlan:
    """The whole plan, every wanted eviction taken as done (offline plans and dry runs)."""
    return carried_out(EvictionPlanner(snapshot, policy, now, observations, prometheus))


def carried_out(planner: EvictionPlanner) -> EvictionPlan:
    """``planner``'s plan with every wanted eviction taken as done."""
    steps = planner.steps()
    try:
        next(steps)
        while True:
            steps.send(True)
    except StopIteration as finished:
        result: EvictionPlan = finished.value
        return result
