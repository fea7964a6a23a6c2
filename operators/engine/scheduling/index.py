"""What the scheduling cycle needs of a snapshot that does not depend on the pod, computed once per snapshot.

The index is immutable in meaning: its caches (the node table per default bandwidth, the cost map per
NetworkOverhead args) are explicit fields it owns, filled on first use; nothing else writes into it, and
per-request state lives in the cycle (:mod:`operators.engine.scheduling.framework`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.api.config.scheduler import NetworkOverheadArgs
from operators.api.networktopology import WeightInfo
from operators.api.quantity import Quantity
from operators.engine.cluster.bandwidth import slo_network_totals
from operators.engine.cluster.fit import DEFAULT_PODS, amount
from operators.engine.cluster.kube.view import PlacedPods, placed_pods
from operators.engine.cluster.objects import Node, Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.cluster.usage import PodUsage
from operators.engine.scheduling.table import Bools, Ints, NodeTable

HEADROOM_KEPT = 8  # resource tuples whose headroom a kept index keeps up to date (the latest asked)


@dataclass
class ClusterIndex:
    """Per-snapshot precomputation shared by every pod scheduled against it.

    ``snapshot`` gives the nodes and the custom resources; the pods are read through ``usage`` (the pods of
    the snapshot folded into a :class:`PodUsage` by :meth:`build`, or kept by delta by a live extender, whose
    snapshot then carries no pods). :meth:`with_usage` is the next index after pod changes: the same nodes,
    the used columns of the touched nodes updated in copies of its tables."""

    snapshot: Snapshot
    usage: PodUsage
    _tables: dict[int | None, NodeTable] = field(default_factory=dict, repr=False)
    _costs: dict[NetworkOverheadArgs, dict[tuple[str, str], int] | None] = field(default_factory=dict, repr=False)
    _headroom: dict[tuple[str, ...], tuple[Ints, Ints]] = field(default_factory=dict, repr=False)
    # the resource tuples any index of this lineage was asked the headroom of, the latest last (shared by every
    # derived index; at most HEADROOM_KEPT): what :meth:`keep_headroom` computes on a kept index before a pass
    # changes its usage, and what :meth:`with_usage` carries
    _headroom_asked: dict[tuple[str, ...], None] = field(default_factory=dict, repr=False)
    _masks: dict[str, Bools] = field(default_factory=dict, repr=False)  # per pod shape: the nodes it may go on

    @classmethod
    def build(cls, snapshot: Snapshot) -> ClusterIndex:
        return cls(snapshot, PodUsage.of(snapshot.pods))

    @property
    def nodes(self) -> tuple[Node, ...]:
        return self.snapshot.nodes

    @property
    def node_by_name(self) -> Mapping[str, Node]:
        return self.snapshot.node_by_name

    @functools.cached_property
    def placed(self) -> PlacedPods:
        """The placed pods as kube-scheduler's default plugins read them (by namespace, with affinity terms, with
        host ports), over the snapshot's nodes and namespaces; a pod's default spread selector from its Services and
        controller; the snapshot's storage for the volume filters."""
        return placed_pods(self.snapshot, self.usage)

    def requested(self, node: str) -> tuple[Mapping[str, int], int]:
        """What the pods on ``node`` request per resource, and how many they are (NodeResourcesFit's counts, kept
        by :class:`PodUsage`)."""
        return self.usage.requested.get(node, {}), self.usage.count.get(node, 0)

    @functools.cached_property
    def used(self) -> dict[str, tuple[int, int]]:
        """node -> (ingress, egress) requested by its pods."""
        return {name: self.usage.used(name) for name in self.usage.sums}

    @functools.cached_property
    def usage_problems(self) -> dict[str, str]:
        """node -> why its used bandwidth is unknown (a pod on it with an unreadable bandwidth annotation)."""
        return {name: problem for name in self.usage.problems if (problem := self.usage.problem(name))}

    @functools.cached_property
    def slo_totals(self) -> dict[str, Quantity]:
        return slo_network_totals(self.snapshot)

    def with_usage(self, touched: set[str]) -> ClusterIndex:
        """The index after ``usage`` changed on the ``touched`` nodes (same nodes, same custom resources): its
        tables' used columns are copied and those rows updated; costs and messages carry over."""
        index = ClusterIndex(self.snapshot, self.usage, _costs=self._costs, _masks=self._masks,
                             _headroom_asked=self._headroom_asked)  # fmt: skip
        for name in ("position", "node_names", "slo_totals", "app_groups"):
            if name in self.__dict__:
                index.__dict__[name] = self.__dict__[name]
        for key, table in self._tables.items():
            index._tables[key] = table.with_used(
                {name: self.usage.used(name) for name in touched}, index.usage_problems
            )
        rows = [self.position[name] for name in touched if name in self.position]
        for resources, (free, pods) in self._headroom.items():
            if resources in self._headroom_asked:  # else asked of no plan lately: not carried on every change
                index._headroom[resources] = self._headroom_rows(resources, rows, free.copy(), pods.copy())
        return index

    def with_nodes(self, snapshot: Snapshot, names: set[str], default: Quantity | None) -> ClusterIndex:
        """The index for ``snapshot`` (without pods) after the nodes ``names`` were added, deleted or changed in
        place, or their NodeSLOs — every other kind as held: the table of ``default`` is derived from this one
        (:meth:`NodeTable.with_nodes`: only those nodes' rows computed; another default's table is built again when
        asked for); usage and costs carry over, and the positions while the node names stay the same."""
        index = ClusterIndex(snapshot, self.usage, _costs=self._costs, _headroom_asked=self._headroom_asked)
        for name in ("usage_problems", "app_groups"):
            if name in self.__dict__:
                index.__dict__[name] = self.__dict__[name]
        if snapshot.node_slos is self.snapshot.node_slos and "slo_totals" in self.__dict__:
            index.__dict__["slo_totals"] = self.slo_totals
        key = default.nanos if default is not None else None
        if key in self._tables:
            table = self._tables[key].with_nodes(
                snapshot.nodes, names, self.usage.used, index.usage_problems, index.slo_totals, default
            )
            index._tables[key] = table
            index.__dict__["position"] = table.row_of  # the table's rows are the snapshot's nodes, in order
        return index

    def with_snapshot(self, snapshot: Snapshot) -> ClusterIndex:
        """The index for ``snapshot`` when only AppGroups or NetworkTopologies changed (same nodes and NodeSLOs):
        the tables carry over, the costs are computed again."""
        index = ClusterIndex(snapshot, self.usage, _tables=self._tables, _headroom=self._headroom, _masks=self._masks,
                             _headroom_asked=self._headroom_asked)  # fmt: skip
        for name in ("position", "node_names", "slo_totals", "used", "usage_problems"):
            if name in self.__dict__:
                index.__dict__[name] = self.__dict__[name]
        return index

    # -- nodes as a table --

    def table(self, default: Quantity | None) -> NodeTable:
        """The snapshot's nodes as one table (per default node bandwidth)."""
        key = default.nanos if default is not None else None
        if key not in self._tables:
            self._tables[key] = NodeTable.of(self.nodes, self.used, self.usage_problems, self.slo_totals, default)
        return self._tables[key]

    @functools.cached_property
    def node_names(self) -> list[str]:
        """The names of :attr:`nodes`, in order (shared by every plan on this index's nodes: read-only)."""
        return [node.name for node in self.nodes]

    @functools.cached_property
    def position(self) -> dict[str, int]:
        """Node name -> its row in :meth:`table`."""
        return {node.name: row for row, node in enumerate(self.nodes)}

    def headroom(self, resources: tuple[str, ...]) -> tuple[Ints, Ints]:
        """Per node (rows of :attr:`nodes`), what is left of each of ``resources`` (kube-scheduler's unit; a
        resource the node does not advertise has 0) and of its pods limit once its pods' requests are counted;
        kept per resource tuple, as every plan on this snapshot reads the same columns."""
        self._headroom_asked.pop(resources, None)
        self._headroom_asked[resources] = None
        while len(self._headroom_asked) > HEADROOM_KEPT:  # pods may ask any extended resource: keep the latest
            del self._headroom_asked[next(iter(self._headroom_asked))]
        if resources not in self._headroom:
            free = np.zeros((len(self.nodes), len(resources)), dtype=np.int64)
            pods = np.zeros(len(self.nodes), dtype=np.int64)
            self._headroom[resources] = self._headroom_rows(resources, range(len(self.nodes)), free, pods)
        return self._headroom[resources]

    @property
    def headroom_held(self) -> tuple[tuple[str, ...], ...]:
        """The resource tuples whose headroom this index holds."""
        return tuple(self._headroom)

    def keep_headroom(self) -> None:
        """The headroom of every resource tuple asked of this lineage, computed now (a kept index, before a pass of
        plans changes its usage in place): an index derived by :meth:`with_usage` then updates only its touched
        rows. Computed on the pass's derived index instead, it was thrown away with it, and every plan built it
        again from all the nodes (measured: 46 % of a plan's time at 5,000 nodes)."""
        for resources in tuple(self._headroom_asked):
            self.headroom(resources)

    def _headroom_rows(
        self, resources: tuple[str, ...], rows: Iterable[int], free: Ints, pods: Ints
    ) -> tuple[Ints, Ints]:
        """``free`` and ``pods`` (what is left per node) with ``rows`` computed from the nodes and their pods' requests,
        made read-only: shared by every plan on this index (a plan's state copies them)."""
        for row in rows:
            node = self.nodes[row]
            requested, count = self.requested(node.name)
            for column, resource in enumerate(resources):
                offered = node.allocatable.get(resource)
                have = amount(resource, offered) if offered is not None else 0
                free[row, column] = have - requested.get(resource, 0)
            allowed = node.allocatable.get("pods")
            pods[row] = (allowed.value() if allowed is not None else DEFAULT_PODS) - count
        free.flags.writeable = pods.flags.writeable = False
        return free, pods

    def mask(self, shape: str, compute: Callable[[], Bools]) -> Bools:
        """The nodes pods of ``shape`` may go on (rows of :attr:`nodes`): computed once per shape and kept while the
        nodes stay the same (pod and custom-resource changes carry it over)."""
        if shape not in self._masks:
            mask = compute()
            mask.flags.writeable = False
            self._masks[shape] = mask
        return self._masks[shape]

    def rows_of(self, names: Sequence[str]) -> Ints:
        return np.array([self.position[name] for name in names], dtype=np.int64)

    def table_of(self, nodes: Sequence[Node], default: Quantity | None) -> NodeTable:
        """A table of nodes sent as objects (labels and annotations as sent; used bandwidth from the snapshot)."""
        return NodeTable.of(nodes, self.used, self.usage_problems, self.slo_totals, default)

    # -- AppGroups and costs --

    @functools.cached_property
    def app_groups(self) -> dict[tuple[str, str], AppGroup]:
        return {(group.metadata.namespace, group.metadata.name): group for group in self.snapshot.app_groups}

    @property
    def appgroup_pods(self) -> Mapping[str, Mapping[str, Pod]]:
        """Pods by AppGroup label, all namespaces (filtered per AppGroup later), keyed by pod."""
        return self.usage.members

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
