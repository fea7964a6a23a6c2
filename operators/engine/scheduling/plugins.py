"""Scheduling plugins as pure functions: NetworkOverhead, NetworkBandwidth, NodeResourcesAllocatable.

Each plugin has a ``filter`` (node -> None when it passes, else the reason) and a ``score``
(node -> raw score) over the candidate nodes, and a ``normalize`` (raw -> 0..100). Everything
that does not depend on the pod is computed once per snapshot in :class:`ClusterIndex`.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.api.errors import FieldError
from operators.api.networktopology import WeightInfo
from operators.api.quantity import Quantity
from operators.engine.cluster.appgroups import workload_namespaces
from operators.engine.cluster.bandwidth import (
    Accounting,
    capacity_or_problem,
    headroom_score,
    pod_demand,
    slo_network_totals,
)
from operators.engine.cluster.snapshot import Node, Pod, Snapshot

MAX_COST = 100  # a missing cost, upstream's MaxCost
# A node's used bandwidth is capped here (far above any capacity: the node is full either way), so the
# array arithmetic on it stays inside int64.
MAX_USED = 2**60
SAME_ZONE_COST = 1
NETWORK_OVERHEAD, NETWORK_BANDWIDTH, ALLOCATABLE = "NetworkOverhead", "NetworkBandwidth", "NodeResourcesAllocatable"


@dataclass(frozen=True)
class NetworkOverheadArgs:
    namespaces: tuple[str, ...] = ("default",)
    weights_name: str = keys.USER_DEFINED_WEIGHT
    network_topology_name: str = "nt-default"


@dataclass(frozen=True)
class NetworkBandwidthArgs:
    accounting_mode: Literal["duplex", "combined"] = "duplex"
    default_node_bandwidth: Quantity | None = None


@dataclass(frozen=True)
class NodeResourcesAllocatableArgs:
    mode: Literal["Least", "Most"] = "Least"
    resources: tuple[tuple[str, int], ...] = (("cpu", 1 << 20), ("memory", 1))  # upstream's defaults


# --- pod and node bandwidth (SPEC.md §3) ---------------------------------------------------------------


# --- what does not depend on the pod -------------------------------------------------------------------


@dataclass
class ClusterIndex:
    """Per-snapshot precomputation shared by every pod scheduled against it."""

    snapshot: Snapshot
    nodes: tuple[Node, ...]
    node_by_name: Mapping[str, Node]
    used: dict[str, tuple[int, int]]  # node -> (ingress, egress) requested by its pods
    slo_totals: dict[str, Quantity] = field(default_factory=dict)
    pod_count: dict[str, int] = field(default_factory=dict)
    # node -> why its used bandwidth is unknown (a pod on it with an unreadable bandwidth annotation)
    usage_problems: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(cls, snapshot: Snapshot) -> ClusterIndex:
        used: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        count: dict[str, int] = defaultdict(int)
        problems: dict[str, str] = {}
        for pod in snapshot.pods:
            if pod.node_name and not pod.is_terminal:
                try:
                    ingress, egress = pod_demand(pod.annotations)
                except FieldError as error:
                    problems.setdefault(pod.node_name, f"pod {pod.key} on node {pod.node_name}: {error}")
                    ingress = egress = 0
                entry = used[pod.node_name]
                entry[0] += ingress
                entry[1] += egress
                count[pod.node_name] += 1
        totals = slo_network_totals(snapshot)
        return cls(
            snapshot,
            snapshot.nodes,
            snapshot.node_by_name,
            {name: (min(values[0], MAX_USED), min(values[1], MAX_USED)) for name, values in used.items()},
            totals,
            dict(count),
            problems,
        )

    @functools.cached_property
    def place_of(self) -> dict[str, tuple[str, str]]:
        """Node name -> (region, zone)."""
        return {node.name: (node.region, node.zone) for node in self.nodes}

    @functools.cached_property
    def places(self) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(set(self.place_of.values())))

    @functools.cached_property
    def app_groups(self) -> dict[tuple[str, str], AppGroup]:
        return {
            (group.metadata.namespace or "default", group.metadata.name): group for group in self.snapshot.app_groups
        }

    @functools.cached_property
    def appgroup_pods(self) -> dict[str, list[Pod]]:
        """Pods by AppGroup label, all namespaces (filtered per AppGroup later)."""
        index: dict[str, list[Pod]] = defaultdict(list)
        for pod in self.snapshot.pods:
            label = pod.labels.get(keys.APPGROUP_LABEL)
            if label:
                index[label].append(pod)
        return index

    def capacities(self, default: Quantity | None) -> dict[str, int | None]:
        """Node -> capacity bits/s (None: unknown or unreadable), computed once per default."""
        return self._capacities(default)[0]

    def capacity_problems(self, default: Quantity | None) -> dict[str, str]:
        """Node -> why its capacity cannot be read (an annotation or NodeSLO total that is not a bandwidth)."""
        return self._capacities(default)[1]

    def _capacities(self, default: Quantity | None) -> tuple[dict[str, int | None], dict[str, str]]:
        key = default.nanos if default is not None else None
        cache: dict[int | None, tuple[dict[str, int | None], dict[str, str]]] = self.__dict__.setdefault(
            "_capacity_cache", {}
        )
        if key not in cache:
            values: dict[str, int | None] = {}
            problems: dict[str, str] = {}
            for node in self.nodes:
                values[node.name], problem = capacity_or_problem(node, self.slo_totals.get(node.name), default)
                if problem:
                    problems[node.name] = problem
            cache[key] = (values, problems)
        return cache[key]

    def allocatable(self, args: NodeResourcesAllocatableArgs) -> dict[str, int]:
        """Node -> NodeResourcesAllocatable raw score, computed once per args."""
        cache: dict[NodeResourcesAllocatableArgs, dict[str, int]] = self.__dict__.setdefault("_allocatable", {})
        if args not in cache:
            cache[args] = {node.name: allocatable_score(node, args) for node in self.nodes}
        return cache[args]

    def cost_map(self, args: NetworkOverheadArgs) -> dict[tuple[str, str], int] | None:
        """(origin, destination) -> cost, zones and regions in one map (upstream's costMap); None if no topology."""
        cache: dict[NetworkOverheadArgs, dict[tuple[str, str], int] | None] = self.__dict__.setdefault("_costs", {})
        if args not in cache:
            cache[args] = self._cost_map(args)
        return cache[args]

    def _cost_map(self, args: NetworkOverheadArgs) -> dict[tuple[str, str], int] | None:
        for namespace in args.namespaces:
            for topology in self.snapshot.network_topologies:
                if topology.metadata.name == args.network_topology_name and topology.metadata.namespace == namespace:
                    return _costs_of(topology.spec.weights, args.weights_name)
        return None


def _costs_of(weights: Sequence[WeightInfo], weights_name: str) -> dict[tuple[str, str], int]:
    costs: dict[tuple[str, str], int] = {}
    for weight in weights:
        if weight.name != weights_name:
            continue
        for topology in weight.topology_list:
            if topology.topology_key not in (keys.REGION_LABEL, keys.ZONE_LABEL):
                continue
            for origin in topology.origin_list:
                for cost in origin.cost_list or ():
                    costs[(origin.origin, cost.destination)] = cost.network_cost
    return costs


# --- NetworkOverhead -----------------------------------------------------------------------------------------


@dataclass
class OverheadResult:
    """Per node: (satisfied, violated, accumulated cost); or a reason every node fails with; or score equally.

    Computed per place (region, zone) plus the nodes that host dependency pods themselves; the
    per-node table is derived on first use (the array path reads the per-place form directly).
    """

    place_totals: dict[tuple[str, str], tuple[int, int, int]] | None = None
    on_host: dict[str, int] = field(default_factory=dict)
    place_of: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    error: str | None = None

    @property
    def score_equally(self) -> bool:
        return self.place_totals is None and self.error is None

    @functools.cached_property
    def per_node(self) -> dict[str, tuple[int, int, int]] | None:
        if self.place_totals is None:
            return None
        table = {name: self.place_totals[place] for name, place in self.place_of.items()}
        for host, count in self.on_host.items():
            table[host] = host_corrected(table[host], self.place_of[host], count)
        return table


def network_overhead(pod: Pod, index: ClusterIndex, args: NetworkOverheadArgs) -> OverheadResult:
    """Upstream's PreFilter, evaluated for every node at once.

    1. No AppGroup label: score equally. 2. The AppGroup (first of ``args.namespaces`` that has it)
    and the NetworkTopology must exist — else every node fails with that reason (upstream panics).
    3. The dependencies of every workload whose selector is the pod's; none: score equally.
    4. The AppGroup's scheduled pods (in the namespaces its workloads name); none: score equally.
    5. Per node and per (scheduled pod, dependency) pair: same node: satisfied, 0; host unlabelled:
       violated, 100; same zone: satisfied, 1; other zone of the region, or other region: the
       topology cost, satisfied when ``cost <= maxNetworkCost``; a missing cost is not counted and
       adds 100.
    """
    name = pod.labels.get(keys.APPGROUP_LABEL)
    if not name:
        return OverheadResult()
    group = next(
        (index.app_groups[(namespace, name)] for namespace in args.namespaces if (namespace, name) in index.app_groups),
        None,
    )
    if group is None:
        return OverheadResult(error=f"AppGroup {name} not found in namespaces {', '.join(args.namespaces)}")
    costs = index.cost_map(args)
    if costs is None:
        return OverheadResult(
            error=f"NetworkTopology {args.network_topology_name} not found in namespaces {', '.join(args.namespaces)}"
        )
    selector = pod.labels.get(keys.APPGROUP_WORKLOAD_LABEL, "")
    dependencies = [
        dependency
        for entry in group.spec.workloads
        if entry.workload.selector == selector
        for dependency in entry.dependencies or ()
    ]
    if not dependencies:
        return OverheadResult()
    covered = set(workload_namespaces(group))
    scheduled = [
        member for member in index.appgroup_pods.get(name, ()) if member.node_name and member.namespace in covered
    ]
    if not scheduled:
        return OverheadResult()
    # (host node, maxNetworkCost) -> number of pairs; every replica and every listed dependency counts.
    pairs: dict[tuple[str, int], int] = defaultdict(int)
    for member in scheduled:
        member_selector = member.labels.get(keys.APPGROUP_WORKLOAD_LABEL)
        for dependency in dependencies:
            if dependency.workload.selector == member_selector:
                if member.node_name not in index.node_by_name:
                    return OverheadResult(error=f"node {member.node_name} of pod {member.key} not found")
                pairs[(member.node_name, dependency.max_network_cost or 0)] += 1
    if not pairs:
        return OverheadResult(place_totals=dict.fromkeys(index.places, (0, 0, 0)), place_of=index.place_of)
    by_place: dict[tuple[str, str], list[tuple[str, int, int]]] = defaultdict(list)
    on_host: dict[str, int] = defaultdict(int)
    for (host, limit), count in pairs.items():
        on_host[host] += count
        host_node = index.node_by_name[host]
        by_place[(host_node.region, host_node.zone)].append((host, limit, count))
    per_place = {place: _place_totals(place, by_place, costs) for place in index.places}
    return OverheadResult(place_totals=per_place, on_host=dict(on_host), place_of=index.place_of)


def host_corrected(totals: tuple[int, int, int], place: tuple[str, str], count: int) -> tuple[int, int, int]:
    """Pairs on the very node were counted as same zone (or unlabelled); they are same node: satisfied, 0."""
    satisfied, violated, cost = totals
    if place[0] or place[1]:
        return satisfied, violated, cost - SAME_ZONE_COST * count
    return satisfied + count, violated - count, cost - MAX_COST * count


def _place_totals(
    place: tuple[str, str],
    by_place: Mapping[tuple[str, str], list[tuple[str, int, int]]],
    costs: Mapping[tuple[str, str], int],
) -> tuple[int, int, int]:
    region, zone = place
    satisfied = violated = total = 0
    for (host_region, host_zone), entries in by_place.items():
        for _host, limit, count in entries:
            if not host_region and not host_zone:
                violated += count
                total += MAX_COST * count
            elif region == host_region and zone == host_zone:
                satisfied += count
                total += SAME_ZONE_COST * count
            else:
                key = (zone, host_zone) if region == host_region else (region, host_region)
                cost = costs.get(key) if key[0] else None
                if cost is None:
                    total += MAX_COST * count
                else:
                    total += cost * count
                    if cost <= limit:
                        satisfied += count
                    else:
                        violated += count
    return satisfied, violated, total


def overhead_reason(node: str, satisfied: int, violated: int) -> str:
    """Upstream's Unschedulable message."""
    return f"Node {node} {overhead_shortfall(satisfied, violated)}"


def overhead_shortfall(satisfied: int, violated: int) -> str:
    """The message after the node's name (the same for every node with these counts)."""
    return (
        "does not meet several network requirements from Workload dependencies: "
        f"Satisfied: {satisfied} Violated: {violated}"
    )


# --- NetworkBandwidth ------------------------------------------------------------------------------------------


def _capacity(node: Node, index: ClusterIndex, args: NetworkBandwidthArgs) -> tuple[int | None, str]:
    if index.node_by_name.get(node.name) is node:  # the snapshot's own node: precomputed
        default = args.default_node_bandwidth
        return index.capacities(default)[node.name], index.capacity_problems(default).get(node.name, "")
    # as the scheduler sent it
    return capacity_or_problem(node, index.slo_totals.get(node.name), args.default_node_bandwidth)


def bandwidth_filter(
    demand: tuple[int, int], node: Node, index: ClusterIndex, args: NetworkBandwidthArgs
) -> str | None:
    """None when the node's free bandwidth holds the pod's request, else the reason."""
    if demand == (0, 0):
        return None
    capacity, problem = _capacity(node, index, args)
    if problem:
        return problem
    if capacity is None:
        return f"node {node.name} has no known bandwidth capacity"
    if node.name in index.usage_problems:
        return f"used bandwidth unknown: {index.usage_problems[node.name]}"
    used_in, used_out = index.used.get(node.name, (0, 0))
    return bandwidth_shortfall(Accounting(args.accounting_mode), capacity, used_in, used_out, demand)


def bandwidth_shortfall(
    accounting: Accounting, capacity: int, used_in: int, used_out: int, demand: tuple[int, int]
) -> str | None:
    """Why the demand does not fit (None when it does): the message of NetworkBandwidth's filter."""
    if accounting.fits(capacity, used_in, used_out, *demand):
        return None
    if accounting is Accounting.COMBINED:
        free = capacity - used_in - used_out
        return f"insufficient network bandwidth: requested {demand[0] + demand[1]} bits/s, free {max(free, 0)}"
    for direction, want, used in (("ingress", demand[0], used_in), ("egress", demand[1], used_out)):
        if want and want > capacity - used:
            return f"insufficient {direction} bandwidth: requested {want} bits/s, free {max(capacity - used, 0)}"
    return None


def bandwidth_score(demand: tuple[int, int], node: Node, index: ClusterIndex, args: NetworkBandwidthArgs) -> int:
    """``(total - used_after) * 100 // total`` (:func:`~operators.engine.cluster.bandwidth.headroom_score`)."""
    capacity = _capacity(node, index, args)[0] or 0
    used_in, used_out = index.used.get(node.name, (0, 0))
    total = Accounting(args.accounting_mode).total(capacity)
    return int(headroom_score(total, used_in + used_out + demand[0] + demand[1]))


def bandwidth_failures(
    demand: tuple[int, int], nodes: Sequence[Node], index: ClusterIndex, args: NetworkBandwidthArgs
) -> dict[str, str]:
    """:func:`bandwidth_filter` for many nodes; only the nodes that fail appear."""
    return {node.name: reason for node in nodes if (reason := bandwidth_filter(demand, node, index, args))}


def bandwidth_scores(
    demand: tuple[int, int], nodes: Sequence[Node], index: ClusterIndex, args: NetworkBandwidthArgs
) -> dict[str, int]:
    """:func:`bandwidth_score` for many nodes (the array path in :mod:`vectorized` handles the snapshot's own)."""
    return {node.name: bandwidth_score(demand, node, index, args) for node in nodes}


# --- NodeResourcesAllocatable --------------------------------------------------------------------------------


def allocatable_score(node: Node, args: NodeResourcesAllocatableArgs) -> int:
    """Seed 001: the weighted sum of the node's allocatable resources (cpu in millicores), negated for Least."""
    total = 0
    for resource, weight in args.resources:
        quantity = node.allocatable.get(resource)
        if quantity is None:
            continue
        total += weight * (quantity.milli_value() if resource == "cpu" else quantity.value())
    return -total if args.mode == "Least" else total
