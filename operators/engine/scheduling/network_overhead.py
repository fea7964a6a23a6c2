"""NetworkOverhead (scheduler-plugins' networkaware), upstream semantics, over a node table.

**PreFilter** (:func:`prefilter`, once per pod):

1. No AppGroup label: score equally. 2. The AppGroup (first of ``args.namespaces`` that has it) and the
   NetworkTopology must exist — else every node fails with that reason (upstream panics).
3. The dependencies of every workload whose selector is the pod's; none: score equally.
4. The AppGroup's scheduled pods (in the namespaces its workloads name); none: score equally.
5. Per (scheduled pod, dependency) pair, grouped by the host's place (region, zone) and maxNetworkCost.

**Filter** (:func:`filter_nodes`): per node and pair: same node: satisfied, 0; host unlabelled: violated,
100; same zone: satisfied, 1; other zone of the region, or other region: the topology cost, satisfied when
``cost <= maxNetworkCost``; a missing cost is not counted and adds 100. A node fails when violated >
satisfied, with upstream's message.

**Score** (:func:`score`): the accumulated cost. **NormalizeScore** (:func:`normalize`):
``100 - int(100*(s-min)/(max-min))``; all zero stays 0; all equal non-zero becomes 100.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from operators.api import keys
from operators.api.config.scheduler import NetworkOverheadArgs
from operators.engine.cluster.appgroups import workload_namespaces
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.table import Ints, NodeTable, Place
from operators.memo import remember

NAME = "NetworkOverhead"
MAX_COST = 100  # a missing cost, upstream's MaxCost
SAME_NODE_COST = 0
SAME_ZONE_COST = 1


@dataclass
class OverheadState:
    """What PreFilter found for one pod: the dependency pairs by host place, or a reason every node fails
    with, or nothing (score equally). Per-place totals are computed on first use, for any place."""

    by_place: dict[Place, list[tuple[str, int, int]]] | None = None  # place -> (host, maxNetworkCost, pairs)
    on_host: dict[str, int] = field(default_factory=dict)  # host node -> pairs it hosts
    host_place: dict[str, Place] = field(default_factory=dict)
    costs: Mapping[tuple[str, str], int] = field(default_factory=dict)
    error: str | None = None
    _per_place: dict[tuple[Place, ...], Ints] = field(default_factory=dict, repr=False)

    @property
    def score_equally(self) -> bool:
        return self.by_place is None and self.error is None

    @functools.cached_property
    def _entries(self) -> tuple[list[Place], Ints, Ints]:
        """The pairs as (host place, maxNetworkCost, pairs), the hosts of one place and one limit added up (a
        node elsewhere sees only the place): places, limits, counts."""
        merged: dict[tuple[Place, int], int] = {}
        for place, entries in (self.by_place or {}).items():
            for _host, limit, count in entries:
                merged[(place, limit)] = merged.get((place, limit), 0) + count
        places = [place for place, _ in merged]
        limits = np.array([limit for _, limit in merged], dtype=np.int64)
        return places, limits, np.array(list(merged.values()), dtype=np.int64)

    def totals(self, table: NodeTable) -> tuple[Ints, Ints, Ints]:
        """(satisfied, violated, cost) per row of ``table``."""
        if self.by_place is None:
            zeros = np.zeros(len(table), dtype=np.int64)
            return zeros, zeros, zeros
        per_place = self._per_place.get(table.places)
        if per_place is None:  # /filter and /prioritize of one pod share it
            per_place = self._per_place[table.places] = place_totals(table.places, *self._entries, self.costs)
        rows = per_place[table.place] if len(table) else np.zeros((0, 3), dtype=np.int64)
        for host, count in self.on_host.items():  # a few hosts: their own rows are corrected
            row = table.row_of.get(host)
            if row is not None:
                rows[row] = host_corrected(tuple(rows[row].tolist()), self.host_place[host], count)
        return rows[:, 0], rows[:, 1], rows[:, 2]


def prefilter(labels: Mapping[str, str], index: ClusterIndex, args: NetworkOverheadArgs) -> OverheadState:
    """Upstream's PreFilter for a pod with these ``labels``, all it reads of a pod (see the module docstring)."""
    name = labels.get(keys.APPGROUP_LABEL)
    if not name:
        return OverheadState()
    group = next(
        (index.app_groups[(namespace, name)] for namespace in args.namespaces if (namespace, name) in index.app_groups),
        None,
    )
    if group is None:
        return OverheadState(error=f"AppGroup {name} not found in namespaces {', '.join(args.namespaces)}")
    costs = index.cost_map(args)
    if costs is None:
        return OverheadState(
            error=f"NetworkTopology {args.network_topology_name} not found in namespaces {', '.join(args.namespaces)}"
        )
    selector = labels.get(keys.APPGROUP_WORKLOAD_LABEL, "")
    dependencies = [
        dependency
        for entry in group.spec.workloads
        if entry.workload.selector == selector
        for dependency in entry.dependencies or ()
    ]
    if not dependencies:
        return OverheadState()
    covered = set(workload_namespaces(group))
    scheduled = [
        member
        for member in index.appgroup_pods.get(name, {}).values()
        if member.node_name and member.namespace in covered
    ]
    if not scheduled:
        return OverheadState()
    # (host node, maxNetworkCost) -> number of pairs; every replica and every listed dependency counts.
    pairs: dict[tuple[str, int], int] = defaultdict(int)
    for member in scheduled:
        member_selector = member.labels.get(keys.APPGROUP_WORKLOAD_LABEL)
        for dependency in dependencies:
            if dependency.workload.selector == member_selector:
                if member.node_name not in index.node_by_name:
                    return OverheadState(error=f"node {member.node_name} of pod {member.key} not found")
                pairs[(member.node_name, dependency.max_network_cost or 0)] += 1
    by_place: dict[Place, list[tuple[str, int, int]]] = defaultdict(list)
    on_host: dict[str, int] = defaultdict(int)
    host_place: dict[str, Place] = {}
    for (host, limit), count in pairs.items():
        on_host[host] += count
        host_node = index.node_by_name[host]
        host_place[host] = (host_node.region, host_node.zone)
        by_place[host_place[host]].append((host, limit, count))
    return OverheadState(dict(by_place), dict(on_host), host_place, costs)


def host_corrected(totals: tuple[int, ...], place: Place, count: int) -> tuple[int, int, int]:
    """Pairs on the very node were counted as same zone (or unlabelled); they are same node: satisfied, 0."""
    satisfied, violated, cost = totals
    if place[0] or place[1]:
        return satisfied, violated, cost - SAME_ZONE_COST * count
    return satisfied + count, violated - count, cost - MAX_COST * count


def place_totals(
    places: tuple[Place, ...], hosts: list[Place], limits: Ints, counts: Ints, costs: Mapping[tuple[str, str], int]
) -> Ints:
    """(satisfied, violated, cost) per place of a node hosting none of the pairs itself (one row per place), for
    pairs whose dependency runs in ``hosts[i]`` with ``maxNetworkCost`` ``limits[i]``, ``counts[i]`` times:

    1. a dependency on an unlabelled node: violated, cost 100 (upstream's MaxCost);
    2. in the same zone: satisfied, cost 1 (upstream's SameZone);
    3. otherwise the zone pair's cost (same region) or the region pair's, from the NetworkTopology: satisfied if
       it is at most the limit, else violated; a pair with no cost costs 100 and counts as neither.
    """
    if not places or not hosts:
        return np.zeros((len(places), 3), dtype=np.int64)
    cost, rule = _pair_rules(places, tuple(dict.fromkeys(hosts)), costs)
    columns = {host: j for j, host in enumerate(dict.fromkeys(hosts))}
    picked = [columns[host] for host in hosts]
    cost, rule = cost[:, picked], rule[:, picked]
    within = (rule == 2) & (cost <= limits)
    satisfied = ((rule == 1) | within) @ counts
    violated = ((rule == 0) | ((rule == 2) & ~within)) @ counts
    return np.stack([satisfied, violated, cost @ counts], axis=1).astype(np.int64)


# (places, costs) -> per pair of places, the cost and the rule that applies; a cluster has one set of places
# and one cost map per topology, and every pod asks about the same pairs.
_RULES: dict[
    tuple[int, int], tuple[tuple[Place, ...], Mapping[tuple[str, str], int], dict[Place, tuple[Ints, Ints]]]
] = {}


def _pair_rules(
    places: tuple[Place, ...], hosts: tuple[Place, ...], costs: Mapping[tuple[str, str], int]
) -> tuple[Ints, Ints]:
    """Columns per host place: the cost of a pair (``MAX_COST`` when unknown) and its rule (0: unlabelled host,
    1: same zone, 2: a cost from the topology, 3: no cost known), one row per place."""
    key = (id(places), id(costs))
    held = _RULES.get(key)
    if held is None or held[0] is not places or held[1] is not costs:
        held = remember(_RULES, key, (places, costs, {}), 16)
    columns = held[2]
    for host in hosts:
        if host not in columns:
            columns[host] = _column(places, host, costs)
    return (
        np.stack([columns[host][0] for host in hosts], axis=1),
        np.stack([columns[host][1] for host in hosts], axis=1),
    )


def place_costs(places: tuple[Place, ...], costs: Mapping[tuple[str, str], int]) -> Ints:
    """The cost between two nodes on different hosts, per (place, place) of ``places``: NetworkOverhead's rules
    (1 in one zone, the topology's zone or region cost, ``MAX_COST`` unknown or unlabelled). Two pods on one
    node cost 0 (``SAME_NODE_COST``), whatever their place."""
    return _pair_rules(places, places, costs)[0]


def _column(places: tuple[Place, ...], host: Place, costs: Mapping[tuple[str, str], int]) -> tuple[Ints, Ints]:
    host_region, host_zone = host
    cost = np.full(len(places), MAX_COST, dtype=np.int64)
    rule = np.full(len(places), 3, dtype=np.int64)
    for i, (region, zone) in enumerate(places):
        if not host_region and not host_zone:
            rule[i] = 0
        elif region == host_region and zone == host_zone:
            rule[i], cost[i] = 1, SAME_ZONE_COST
        else:
            key = (zone, host_zone) if region == host_region else (region, host_region)
            known = costs.get(key) if key[0] else None
            if known is not None:
                rule[i], cost[i] = 2, known
    return cost, rule


def overhead_reason(node: str, satisfied: int, violated: int) -> str:
    """Upstream's Unschedulable message."""
    return f"Node {node} {overhead_shortfall(satisfied, violated)}"


def overhead_shortfall(satisfied: int, violated: int) -> str:
    """The message after the node's name (the same for every node with these counts)."""
    return (
        "does not meet several network requirements from Workload dependencies: "
        f"Satisfied: {satisfied} Violated: {violated}"
    )


def filter_nodes(state: OverheadState, table: NodeTable) -> dict[str, str]:
    """The rows that fail, with upstream's message."""
    if state.error:
        return dict.fromkeys(table.names, state.error)
    if state.by_place is None or not len(table):
        return {}
    satisfied, violated = state.totals(table)[:2]
    rows = np.nonzero(violated > satisfied)[0]
    if rows.size == 0:
        return {}
    # Thousands of rejected nodes share a handful of (satisfied, violated) pairs: each pair's message for every
    # row is formatted once per table and looked up.
    span = int(violated[rows].max()) + 1
    codes, which = np.unique(satisfied[rows] * span + violated[rows], return_inverse=True)
    messages = np.stack(
        [
            table.messages((NAME, *pair), functools.partial(_message, " " + overhead_shortfall(*pair)))
            for pair in ((code // span, code % span) for code in codes.tolist())
        ]
    )
    chosen = messages[which.ravel(), rows]
    return dict(zip(table.name_array[rows].tolist(), chosen.tolist(), strict=True))


def _message(tail: str, name: str) -> str:
    return "Node " + name + tail


def score(state: OverheadState, table: NodeTable) -> Ints:
    return state.totals(table)[2]


def normalize(raw: Ints) -> Ints:
    if raw.size == 0:
        return raw
    low, high = int(raw.min()), int(raw.max())
    if low == 0 and high == 0:
        return raw
    if high == low:
        return 100 - (raw - low)
    return 100 - np.trunc(100 * (raw - low) / (high - low)).astype(np.int64)
