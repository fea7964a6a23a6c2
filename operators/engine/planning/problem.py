"""One AppGroup's placement as a problem (pure): which pods to place, where each may go, what each node has left,
and what every dependency edge costs between two places.

1. **Members**: the AppGroup's pods (its label, in the namespaces its workloads name) whose workload is one of
   its workloads; the bound ones are fixed where they are, the unbound ones (gated or not) are to be placed.
2. **Edges**: per dependency ``A -> B`` of the spec, every (pod of A, pod of B) pair, with the dependency's
   ``maxNetworkCost``. A pair costs what NetworkOverhead counts: 0 on one node, 1 in one zone, the
   NetworkTopology's zone cost within a region, its region cost across, 100 when unknown or unlabelled.
3. **Where a pod may go**: kube-scheduler's default filters for that pod on that node, as the engine writes them
   once (:mod:`operators.engine.cluster.kube.filters`): what the plan cannot change per shape and node (the static
   mask: NodeUnschedulable, TaintToleration, NodeAffinity, host ports of bound pods, volumes, the topology keys the
   pod's rules need), NodeResourcesFit (the pods limit and every requested resource against what the node's pods
   and the plan's leave), NetworkBandwidth (the pod's demand against the node's free bandwidth, under the
   accounting), and the rules between pods — inter-pod affinity and anti-affinity, topology spread, host ports —
   counted with the plan's own pods (:mod:`.constraints`; their soft counterparts are the objective's
   ``spreadPenalty``, :mod:`.soft`).
4. **Objective**: the sum over pairs of their cost, plus :data:`OVER_LIMIT_PENALTY` per pair above its
   ``maxNetworkCost`` (where the dependency sets one): ``maxNetworkCost`` is met wherever it can be.

Everything the search needs is columns: node x resource free amounts, per-place pair costs, per pod its
workload, its demand and its eligible nodes (pods of one spec shape share one mask).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.api.config.scheduler import SchedulerConfig
from operators.api.errors import FieldError
from operators.engine.cluster.appgroups import workload_namespaces
from operators.engine.cluster.bandwidth import Accounting, pod_demand
from operators.engine.cluster.fit import amount, placement_reasons
from operators.engine.cluster.kube import filters as kube_filters
from operators.engine.cluster.objects import Node, Pod
from operators.engine.planning.constraints import PlanConstraints, build_constraints, needs_static, static_failure
from operators.engine.planning.layout import Layout, deficits
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.network_bandwidth import passes, passing
from operators.engine.scheduling.network_overhead import MAX_COST, place_costs
from operators.memo import remember

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
NOT_IN_LAYOUT = "node(s) not among the workload's deficit nodes"  # a rebalancer's layout narrowed the pod's nodes
OVER_LIMIT_PENALTY = 1000  # per pod pair above its maxNetworkCost: far above any cost a pair can have (<= 10000)


@dataclass(frozen=True)
class Edge:
    """A dependency ``source -> target`` between two workloads (indexes), with its ``maxNetworkCost`` (None: none)."""

    source: int
    target: int
    max_cost: int | None


@dataclass
class Problem:
    """The placement of one AppGroup's unbound pods (see the module docstring)."""

    group: str  # namespace/name
    workloads: list[str]  # selectors, in spec order
    edges: list[Edge]
    nodes: Sequence[str]  # shared with the index: read-only
    place_of: Ints  # node -> place index
    places: list[tuple[str, str]]  # (region, zone)
    place_cost: Ints  # place x place: a pair's cost on two nodes of these places (same node: 0)
    pods: list[Pod]  # to place
    pod_workload: Ints  # pod -> workload index
    eligible: list[Bools]  # pod -> node mask (taints, affinity, unschedulable)
    requests: Ints  # pod x resource (kube-scheduler's units)
    resources: list[str]
    demand: Ints  # pod x (ingress, egress) bits/s
    free: Ints  # node x resource still free
    pods_free: Ints  # node -> pods it may still take
    capacity: Ints  # node -> bandwidth capacity (-1 unknown)
    used: Ints  # node x (ingress, egress) used bandwidth
    bandwidth_unknown: Bools  # node -> its used bandwidth is unknown (a pod on it is unreadable)
    accounting: Accounting
    fixed: list[tuple[Pod, int, int]]  # (pod, workload, node) of the bound members
    unplaceable: dict[str, str] = field(default_factory=dict)  # pod key -> why it fits no node, as it stands
    notes: list[str] = field(default_factory=list)
    constraints: PlanConstraints | None = None  # the rules between pods (None: no pod has one)
    shapes: Ints | None = None  # pod -> its shape of the pod rules (:mod:`.domains`)
    cycles: list[kube_filters.Cycle] = field(default_factory=list)  # per shape: kube-scheduler's, over the bound pods
    where: Sequence[Node] = ()  # the nodes (the index's: read-only)

    def static_reason(self, pod: int, node: int) -> tuple[tuple[str, ...], bool]:
        """Why the static mask refuses ``node`` for ``pod``, in kube-scheduler's words, and whether that filter
        runs before NodeResourcesFit (:func:`~.constraints.static_failure`; a layout's narrowing when none does)."""
        if self.shapes is None or not self.cycles or not self.where:
            return (NOT_IN_LAYOUT,), True
        reasons, early = static_failure(self.cycles[int(self.shapes[pod])], self.where[node])
        return (reasons, early) if reasons else ((NOT_IN_LAYOUT,), True)

    def pair_cost(self, node_a: int, node_b: int) -> int:
        return 0 if node_a == node_b else int(self.place_cost[self.place_of[node_a], self.place_of[node_b]])

    def fits(self, pod: int, used: Ints, free: Ints, pods_free: Ints) -> Bools:
        """The nodes pod ``pod`` fits on with ``free`` resources, ``pods_free`` and ``used`` bandwidth left."""
        ok = self.eligible[pod] & (pods_free > 0) & holds(free, self.requests[pod])
        want = (int(self.demand[pod, 0]), int(self.demand[pod, 1]))
        if want != (0, 0):
            ok &= ~self.bandwidth_unknown & passing(want, self.capacity, used[:, 0], used[:, 1], self.accounting)
        return np.asarray(ok)

    def fits_instead(self, pod: int, node: int, leaving: int, used: Ints, free: Ints) -> bool:
        """Whether ``pod`` fits on ``node`` in the place of ``leaving`` (a pod there now): :meth:`fits` for one
        node with ``leaving``'s requests and bandwidth given back (the pods limit is unchanged by a trade)."""
        return self._fits_one(pod, node, free[node] + self.requests[leaving], used[node] - self.demand[leaving])

    def fits_on(self, pod: int, node: int, used: Ints, free: Ints, pods_free: Ints) -> bool:
        """:meth:`fits` for one node."""
        return bool(pods_free[node] > 0) and self._fits_one(pod, node, free[node], used[node])

    def _fits_one(self, pod: int, node: int, free: Ints, used: Ints) -> bool:
        """Whether ``pod`` fits on ``node`` with ``free`` resources and ``used`` (ingress, egress) bandwidth there."""
        if not (self.eligible[pod][node] and bool((free >= self.requests[pod]).all())):
            return False
        want = (int(self.demand[pod, 0]), int(self.demand[pod, 1]))
        if want == (0, 0):
            return True
        if self.bandwidth_unknown[node]:
            return False
        return bool(passes(want, int(self.capacity[node]), int(used[0]), int(used[1]), self.accounting))


def holds(free: Ints, asked: Ints) -> Bools:
    """The rows of ``free`` (node x resource) that hold ``asked`` in every column: ``np.all(free >= asked, axis=1)``,
    a column at a time. numpy reduces a short row slowly: on 5,000 nodes and 3 resources the reduction took 114 us
    a call against 11 us, and it was a fifth of a plan's search (``Problem.fits`` under ``GroupMoves``)."""
    ok = np.ones(len(free), dtype=np.bool_)
    for column, needed in enumerate(asked):
        ok &= free[:, column] >= needed
    return ok


def members(group: AppGroup, pods: Iterable[Pod]) -> list[Pod]:
    """The AppGroup's pods (rule 1): its label, in its workloads' namespaces, not terminal."""
    covered = set(workload_namespaces(group))
    name = group.metadata.name
    return [
        pod
        for pod in pods
        if pod.labels.get(keys.APPGROUP_LABEL) == name and pod.namespace in covered and not pod.is_terminal
    ]


def build_problem(
    index: ClusterIndex,
    group: AppGroup,
    config: SchedulerConfig,
    layout: Layout | None = None,
    only: Collection[str] | None = None,
    allowed: Collection[str] | None = None,
) -> Problem:
    """The problem of placing ``group``'s unbound pods on ``index``'s cluster (see the module docstring); with a
    rebalancer's ``layout``, a workload's pending pods go to its deficit nodes (:mod:`.layout`); ``only``: the keys
    of the unbound pods to plan (the others are left out), when not all; ``allowed``: the only nodes a pod may be
    placed on, when not all (the others still count for the pairs of the members bound there). The members are
    read from the index's AppGroup members (what the AppGroup touches), never from every pod."""
    selectors = [entry.workload.selector for entry in group.spec.workloads]
    by_selector = {selector: position for position, selector in enumerate(selectors)}
    edges = [
        Edge(
            by_selector[entry.workload.selector], by_selector[dependency.workload.selector], dependency.max_network_cost
        )
        for entry in group.spec.workloads
        for dependency in entry.dependencies or ()
        if dependency.workload.selector in by_selector
    ]
    nodes = index.nodes
    position = index.position
    table = index.table(config.bandwidth.default_node_bandwidth)  # its rows are the snapshot's nodes, in order
    places = list(table.places)
    notes = []
    costs = index.cost_map(config.overhead)
    if costs is None:
        notes.append(
            f"NetworkTopology {config.overhead.network_topology_name} not found in namespaces "
            f"{', '.join(config.overhead.namespaces)}: every pair across zones costs {MAX_COST}"
        )
        costs = {}
    grid = place_costs(table.places, costs) if places else np.zeros((0, 0), dtype=np.int64)
    labelled = index.appgroup_pods.get(group.metadata.name, {}).values()
    belongs = [pod for pod in members(group, labelled) if pod.labels.get(keys.APPGROUP_WORKLOAD_LABEL) in by_selector]
    fixed = [
        (pod, by_selector[pod.labels[keys.APPGROUP_WORKLOAD_LABEL]], position[pod.node_name])
        for pod in belongs
        if pod.node_name in position
    ]
    pending = sorted(
        (pod for pod in belongs if not pod.node_name and (only is None or pod.key in only)), key=lambda pod: pod.key
    )
    resources = sorted({name for pod in pending for name in pod.requests})
    free, pods_free = index.headroom(tuple(resources))
    capacity = np.asarray(table.capacity, dtype=np.int64)
    used = np.stack([table.used_in, table.used_out], axis=1).astype(np.int64)
    unknown = np.asarray(table.usage_unknown, dtype=np.bool_)
    requests = np.array(
        [[amount(name, pod.requests[name]) if name in pod.requests else 0 for name in resources] for pod in pending],
        dtype=np.int64,
    ).reshape(len(pending), len(resources))
    demand = np.zeros((len(pending), 2), dtype=np.int64)
    unplaceable: dict[str, str] = {}
    for row, pod in enumerate(pending):
        try:
            demand[row] = pod_demand(pod.annotations, pod.requests)
        except FieldError as error:
            unplaceable[pod.key] = f"bandwidth unreadable: {error}"
    constraints, cycles = build_constraints(pending, nodes, index.placed, config)
    eligible = _static_masks(index, pending, constraints, cycles, unplaceable)
    if allowed is not None:  # before the layout: its narrowing falls back to these when none of its nodes is one
        offered = np.zeros(len(nodes), dtype=np.bool_)
        offered[np.array([position[name] for name in allowed if name in position], dtype=np.intp)] = True
        eligible = [mask & offered for mask in eligible]
    if layout:
        eligible = _follow(layout, selectors, position, fixed, pending, eligible)
    return Problem(
        group=f"{group.metadata.namespace}/{group.metadata.name}",
        workloads=selectors,
        edges=edges,
        nodes=index.node_names,
        place_of=table.place,
        places=places,
        place_cost=np.asarray(grid, dtype=np.int64),
        pods=pending,
        pod_workload=np.array(
            [by_selector[pod.labels[keys.APPGROUP_WORKLOAD_LABEL]] for pod in pending], dtype=np.int64
        ),
        eligible=eligible,
        requests=requests,
        resources=resources,
        demand=demand,
        free=free,
        pods_free=pods_free,
        capacity=capacity,
        used=used,
        bandwidth_unknown=unknown,
        accounting=Accounting(config.bandwidth.accounting_mode),
        fixed=fixed,
        unplaceable=unplaceable,
        notes=notes,
        constraints=constraints if constraints.counted else None,
        shapes=constraints.shape_of,
        cycles=cycles,
        where=nodes,
    )


def _static_masks(index: ClusterIndex, pending: Sequence[Pod], constraints: PlanConstraints,
                  cycles: Sequence[kube_filters.Cycle], unplaceable: dict[str, str]) -> list[Bools]:  # fmt: skip
    """Per pod, the nodes the static mask lets it on (rule 3): its node affinity, taints and the unschedulable mark
    per placement shape (kept by the index while its nodes stay the same), the rest of
    :data:`~.constraints.STATIC_FILTERS` per shape of the constraints where the pod has more (host ports, volumes,
    affinity or spread keys). A pod whose spec cannot be read is unplaceable, with why."""
    nodes = index.nodes
    extra: dict[tuple[int, str], Bools] = {}
    nothing = np.zeros(len(nodes), dtype=np.bool_)
    out = []
    for row, pod in enumerate(pending):
        shape, placement = int(constraints.shape_of[row]), _shape(pod)
        cycle = cycles[shape]
        if cycle.problem and pod.key not in unplaceable:
            unplaceable[pod.key] = cycle.problem
        if pod.key in unplaceable:
            out.append(nothing)
            continue
        mask = index.mask(placement, functools.partial(_placeable_on, placement, pod, nodes))
        if needs_static(cycle):
            both = (shape, placement)
            if both not in extra:
                extra[both] = np.array([ok and not static_failure(cycle, node)[0]
                                        for ok, node in zip(mask, nodes, strict=True)], dtype=np.bool_)  # fmt: skip
            mask = extra[both]
        out.append(mask)
    return out


def _follow(
    layout: Layout,
    selectors: list[str],
    position: Mapping[str, int],
    fixed: list[tuple[Pod, int, int]],
    pending: list[Pod],
    eligible: list[Bools],
) -> list[Bools]:
    """``eligible`` narrowed to each workload's deficit nodes under ``layout`` (where one fits), while the workload
    has no more pending pods than deficits."""
    out = list(eligible)
    for workload, nodes in layout.items():
        if workload not in selectors:
            continue
        w = selectors.index(workload)
        here: dict[int, int] = {}
        for _, fixed_workload, node in fixed:
            if fixed_workload == w:
                here[node] = here.get(node, 0) + 1
        gaps = deficits({position[name]: count for name, count in nodes.items() if name in position}, here)
        deficit = np.zeros(len(position), dtype=np.bool_)
        deficit[list(gaps)] = True
        missing = sum(gaps.values())
        rows = [row for row, pod in enumerate(pending) if pod.labels.get(keys.APPGROUP_WORKLOAD_LABEL) == workload]
        if not rows or len(rows) > missing:
            continue
        for row in rows:
            narrowed = eligible[row] & deficit
            if narrowed.any():
                out[row] = narrowed
    return out


def _placeable_on(shape: str, pod: Pod, nodes: Sequence[Node]) -> Bools:
    """Per node of ``nodes``, whether ``pod`` (of ``shape``) may go there (:func:`_placeable`)."""
    return np.array([_placeable(shape, pod, node) for node in nodes], dtype=np.bool_)


def _placeable(shape: str, pod: Pod, node: Node) -> bool:
    """No placement reason keeps ``pod`` (of ``shape``) off ``node``; kept per shape and node object (a node's
    object is replaced when it changes), as the extender plans pod after pod on the same nodes."""
    key = (shape, id(node.raw), node.unschedulable)
    held = _PLACEABLE.get(key)
    if held is None or held[0] is not node.raw:
        held = remember(_PLACEABLE, key, (node.raw, not placement_reasons(pod, node)), _PLACEABLE_KEPT)
    return held[1]


_PLACEABLE: dict[tuple[str, int, bool], tuple[Mapping[str, Any], bool]] = {}
_PLACEABLE_KEPT = 200_000  # four shapes on 50,000 nodes (the two of :func:`warm_masks` and two more)


def _evicted_if(taint: str) -> dict[str, Any]:
    return {"key": taint, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}


# What most pods ask of their node: nothing, or nothing but the two tolerations the API server's
# DefaultTolerationSeconds admission adds to a pod that has none for these taints (in this order).
_COMMON_SPECS: tuple[dict[str, Any], ...] = (
    {},
    {"tolerations": [_evicted_if("node.kubernetes.io/not-ready"), _evicted_if("node.kubernetes.io/unreachable")]},
)


def warm_masks(index: ClusterIndex) -> None:
    """The masks of the commonest placement shapes computed on ``index`` now, off any plan's path: 0.8 s each at
    50,000 nodes, which the first plan after a start (or a failover) would otherwise spend."""
    for spec in _COMMON_SPECS:
        pod = Pod.parse({"metadata": {"name": "warm", "namespace": "default"}, "spec": {"containers": [], **spec}})
        shape = _shape(pod)
        index.mask(shape, functools.partial(_placeable_on, shape, pod, index.nodes))


def _shape(pod: Pod) -> str:
    """What kube-scheduler's placement filters read of a pod's spec: pods of one shape share a mask."""
    spec = pod.raw.get("spec") or {}
    return json.dumps(
        [spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations")], sort_keys=True, default=str
    )


def penalized_costs(problem: Problem, edge: Edge) -> Ints:
    """Place x place cost of a pair of ``edge`` with the penalty of rule 4 where it exceeds ``maxNetworkCost``."""
    grid = problem.place_cost
    if edge.max_cost is None:
        return grid
    return np.asarray(grid + OVER_LIMIT_PENALTY * (grid > edge.max_cost), dtype=np.int64)


def incident(problem: Problem) -> Mapping[int, list[tuple[Edge, int]]]:
    """workload -> (edge, the workload at its other end) for every edge touching it, both directions."""
    out: dict[int, list[tuple[Edge, int]]] = {w: [] for w in range(len(problem.workloads))}
    for edge in problem.edges:
        out[edge.source].append((edge, edge.target))
        out[edge.target].append((edge, edge.source))
    return out
