"""What the scheduling cycle needs of a snapshot that does not depend on the pod, computed once per snapshot.

The index is immutable in meaning: its caches (the node table per default bandwidth, the cost map per
NetworkOverhead args) are explicit fields it owns, filled on first use; nothing else writes into it, and
per-request state lives in the cycle (:mod:`operators.engine.scheduling.framework`).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.api.config.scheduler import NetworkOverheadArgs
from operators.api.errors import FieldError
from operators.api.networktopology import WeightInfo
from operators.api.quantity import Quantity
from operators.engine.cluster.bandwidth import pod_demand, slo_network_totals
from operators.engine.cluster.objects import Node, Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.scheduling.table import Ints, NodeTable

# A node's used bandwidth is capped here (far above any capacity: the node is full either way), so the
# array arithmetic on it stays inside int64.
MAX_USED = 2**60


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
    _tables: dict[int | None, NodeTable] = field(default_factory=dict, repr=False)
    _costs: dict[NetworkOverheadArgs, dict[tuple[str, str], int] | None] = field(default_factory=dict, repr=False)

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
        return cls(
            snapshot,
            snapshot.nodes,
            snapshot.node_by_name,
            {name: (min(values[0], MAX_USED), min(values[1], MAX_USED)) for name, values in used.items()},
            slo_network_totals(snapshot),
            dict(count),
            problems,
        )

    # -- nodes as a table --

    def table(self, default: Quantity | None) -> NodeTable:
        """The snapshot's nodes as one table (per default node bandwidth)."""
        key = default.nanos if default is not None else None
        if key not in self._tables:
            self._tables[key] = NodeTable.of(self.nodes, self.used, self.usage_problems, self.slo_totals, default)
        return self._tables[key]

    @functools.cached_property
    def position(self) -> dict[str, int]:
        """Node name -> its row in :meth:`table`."""
        return {node.name: row for row, node in enumerate(self.nodes)}

    def rows_of(self, names: Sequence[str]) -> Ints:
        return np.array([self.position[name] for name in names], dtype=np.int64)

    def table_of(self, nodes: Sequence[Node], default: Quantity | None) -> NodeTable:
        """A table of nodes sent as objects (labels and annotations as sent; used bandwidth from the snapshot)."""
        return NodeTable.of(nodes, self.used, self.usage_problems, self.slo_totals, default)

    # -- AppGroups and costs --

    @functools.cached_property
    def app_groups(self) -> dict[tuple[str, str], AppGroup]:
        return {(group.metadata.namespace, group.metadata.name): group for group in self.snapshot.app_groups}

    @functools.cached_property
    def appgroup_pods(self) -> dict[str, list[Pod]]:
        """Pods by AppGroup label, all namespaces (filtered per AppGroup later)."""
        index: dict[str, list[Pod]] = defaultdict(list)
        for pod in self.snapshot.pods:
            label = pod.labels.get(keys.APPGROUP_LABEL)
            if label:
                index[label].append(pod)
        return index

    def cost_map(self, args: NetworkOverheadArgs) -> dict[tuple[str, str], int] | None:
        """(origin, destination) -> cost, zones and regions in one map (upstream's costMap); None if no topology."""
        if args not in self._costs:
            self._costs[args] = self._cost_map(args)
        return self._costs[args]

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
