"""The candidates of one scheduling cycle as columns (numpy): one row per node, in the order they were sent.

Every plugin filters and scores over a :class:`NodeTable`. The snapshot's own nodes form one table per
snapshot (:meth:`ClusterIndex.table`), and the extender's ``NodeNames`` become rows taken from it; nodes sent
as objects (``nodeCacheCapable: false``) become a small table of their own, read from the objects as sent.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from operators.api.config.scheduler import NodeResourcesAllocatableArgs
from operators.api.quantity import Quantity
from operators.engine.cluster.bandwidth import capacity_or_problem
from operators.engine.cluster.fit import amount
from operators.engine.cluster.objects import Node

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
Place = tuple[str, str]  # (region, zone)


def allocatable_score(node: Node, args: NodeResourcesAllocatableArgs) -> int:
    """Seed 001, as upstream's integer arithmetic: the sum over the configured resources of the node's allocatable
    amount (cpu in millicores; a resource kube-scheduler does not count, such as ``pods``, is 0), negated for
    Least, times its weight; divided by the sum of the weights, truncated toward zero (Go's division)."""
    total = weights = 0
    for resource, weight in args.resources:
        quantity = node.allocatable.get(resource)
        counted = quantity is not None and _counted_by_allocatable(resource)
        total += weight * (amount(resource, quantity) if counted and quantity is not None else 0)
        weights += weight
    signed = -total if args.mode == "Least" else total
    quotient = abs(signed) // weights if weights else 0
    return quotient if signed >= 0 else -quotient


def _counted_by_allocatable(resource: str) -> bool:
    """The resources upstream's allocatable reads: cpu, memory, ephemeral-storage and scalar resources (extended,
    hugepages, attachable volumes, prefixed native ones); any other counts 0."""
    return (
        resource in ("cpu", "memory", "ephemeral-storage")
        or "/" in resource
        or resource.startswith(("hugepages-", "attachable-volumes-"))
    )


@dataclass(frozen=True)
class NodeTable:
    """Columns of candidate nodes: place, bandwidth capacity (-1: unknown or unreadable, with the reason in
    ``capacity_problems``), used bandwidth per direction (with ``usage_problems`` where a pod's is unreadable)."""

    nodes: tuple[Node, ...]
    names: list[str]
    places: tuple[Place, ...]
    place: Ints  # row -> index into ``places``
    capacity: Ints
    used_in: Ints
    used_out: Ints
    capacity_problems: Mapping[str, str]
    usage_problems: Mapping[str, str]
    _allocatable: dict[NodeResourcesAllocatableArgs, Ints] = field(default_factory=dict, repr=False, compare=False)
    _messages: dict[object, npt.NDArray[np.object_]] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(
        cls,
        nodes: Sequence[Node],
        used: Mapping[str, tuple[int, int]],
        usage_problems: Mapping[str, str],
        slo_totals: Mapping[str, Quantity],
        default: Quantity | None,
    ) -> NodeTable:
        """A table of ``nodes`` as given (their labels and annotations as sent), with the used bandwidth of the
        snapshot's pods on them."""
        places = sorted({(node.region, node.zone) for node in nodes})
        place_id = {place: i for i, place in enumerate(places)}
        capacity: list[int] = []
        problems: dict[str, str] = {}
        for node in nodes:
            bits, problem = capacity_or_problem(node, slo_totals.get(node.name), default)
            capacity.append(-1 if bits is None else bits)
            if problem:
                problems[node.name] = problem
        names = [node.name for node in nodes]
        pairs = [used.get(name, (0, 0)) for name in names]
        return cls(
            tuple(nodes),
            names,
            tuple(places),
            np.array([place_id[(node.region, node.zone)] for node in nodes], dtype=np.int64),
            np.array(capacity, dtype=np.int64),
            np.array([pair[0] for pair in pairs], dtype=np.int64),
            np.array([pair[1] for pair in pairs], dtype=np.int64),
            problems,
            {name: usage_problems[name] for name in names if name in usage_problems},
        )

    def rows(self, positions: Ints) -> NodeTable:
        """The rows at ``positions``, in that order (the allocatable columns computed so far come along)."""
        return NodeTable(
            tuple(self.nodes[i] for i in positions.tolist()),
            [self.names[i] for i in positions.tolist()],
            self.places,
            self.place[positions],
            self.capacity[positions],
            self.used_in[positions],
            self.used_out[positions],
            self.capacity_problems,
            self.usage_problems,
            {args: values[positions] for args, values in self._allocatable.items()},
        )

    def with_used(self, used: Mapping[str, tuple[int, int]], usage_problems: Mapping[str, str]) -> NodeTable:
        """This table with the used bandwidth of the nodes in ``used`` replaced (copies of the two columns; the
        other columns, and the messages and allocatable scores computed so far, are shared)."""
        used_in, used_out = self.used_in.copy(), self.used_out.copy()
        row_of = self.row_of
        for name, (ingress, egress) in used.items():
            row = row_of.get(name)
            if row is not None:
                used_in[row], used_out[row] = ingress, egress
        table = NodeTable(
            self.nodes,
            self.names,
            self.places,
            self.place,
            self.capacity,
            used_in,
            used_out,
            self.capacity_problems,
            {name: usage_problems[name] for name in self.names if name in usage_problems}
            if usage_problems or self.usage_problems
            else {},
            self._allocatable,
            self._messages,
        )
        table.__dict__["row_of"] = row_of
        if "name_array" in self.__dict__:
            table.__dict__["name_array"] = self.name_array
        return table

    def with_nodes(
        self,
        nodes: Sequence[Node],
        changed: Collection[str],
        used: Callable[[str], tuple[int, int]],
        usage_problems: Mapping[str, str],
        slo_totals: Mapping[str, Quantity],
        default: Quantity | None,
    ) -> NodeTable:
        """The table of ``nodes`` derived from this one, equal to :meth:`of` them: a node this table holds and not
        in ``changed`` keeps its row's values, taken by one gather per column whatever was added or deleted around
        it; the nodes in ``changed`` (modified in place, or their NodeSLO) and the new ones are computed (``used``:
        a new node's used bandwidth). A pass over the names and numpy gathers, where :meth:`of` does Python work per
        node."""
        row_of = self.row_of
        names = [node.name for node in nodes]
        same = names == self.names
        held = np.fromiter((row_of.get(name, -1) for name in names), np.int64, len(names))  # the row it had
        source = held.copy()  # the row it keeps: none for a node changed
        new_row_of = row_of if same else {name: row for row, name in enumerate(names)}
        for name in changed:
            if (row := new_row_of.get(name)) is not None:
                source[row] = -1
        kept, known = source >= 0, held >= 0
        fresh = np.flatnonzero(~kept).tolist()
        places = tuple(sorted({self.places[i] for i in np.unique(self.place[source[kept]]).tolist()}
                              | {(nodes[row].region, nodes[row].zone) for row in fresh}))  # fmt: skip
        place_id = {found: i for i, found in enumerate(places)}
        renumbered = np.array([place_id.get(found, -1) for found in self.places], dtype=np.int64)
        place = np.empty(len(names), dtype=np.int64)
        place[kept] = renumbered[self.place[source[kept]]]
        capacity = np.empty(len(names), dtype=np.int64)
        capacity[kept] = self.capacity[source[kept]]
        used_in, used_out = np.empty(len(names), dtype=np.int64), np.empty(len(names), dtype=np.int64)
        used_in[known], used_out[known] = self.used_in[held[known]], self.used_out[held[known]]  # pods, not node
        problems = {name: problem for name, problem in self.capacity_problems.items()
                    if name not in changed and name in new_row_of}  # fmt: skip
        allocatable = {args: np.empty(len(names), dtype=np.int64) for args in self._allocatable}
        for args, values in allocatable.items():
            values[kept] = self._allocatable[args][source[kept]]
        for row in fresh:
            node = nodes[row]
            place[row] = place_id[(node.region, node.zone)]
            bits, problem = capacity_or_problem(node, slo_totals.get(node.name), default)
            capacity[row] = -1 if bits is None else bits
            if problem:
                problems[node.name] = problem
            if not known[row]:
                used_in[row], used_out[row] = used(node.name)
            for args, values in allocatable.items():
                values[row] = allocatable_score(node, args)
        table = NodeTable(tuple(nodes), self.names if same else names, places, place, capacity, used_in, used_out,
                          problems, {name: problem for name, problem in usage_problems.items() if name in new_row_of},
                          allocatable, self._messages if same else {})  # fmt: skip
        table.__dict__["row_of"] = new_row_of
        if same and "name_array" in self.__dict__:
            table.__dict__["name_array"] = self.name_array
        return table

    def __len__(self) -> int:
        return len(self.names)

    @functools.cached_property
    def row_of(self) -> dict[str, int]:
        return {name: row for row, name in enumerate(self.names)}

    def messages(self, key: object, message: Callable[[str], str]) -> npt.NDArray[np.object_]:
        """``message(name)`` for every row (an array of strings), kept per ``key`` for the table's lifetime (the
        snapshot's table lives as long as the snapshot): thousands of rejected nodes per pod share a handful of
        messages, and formatting them anew for every pod was the largest cost of a /filter at 5,000 nodes."""
        if key not in self._messages:
            if len(self._messages) >= 64:
                self._messages.pop(next(iter(self._messages)))
            self._messages[key] = np.array([message(name) for name in self.names], dtype=object)
        return self._messages[key]

    @functools.cached_property
    def name_array(self) -> npt.NDArray[np.object_]:
        return np.array(self.names, dtype=object)

    @property
    def usage_unknown(self) -> npt.NDArray[np.bool_]:
        if not self.usage_problems:
            return np.zeros(len(self.names), dtype=np.bool_)
        return np.array([name in self.usage_problems for name in self.names], dtype=np.bool_)

    def allocatable(self, args: NodeResourcesAllocatableArgs) -> Ints:
        """NodeResourcesAllocatable's raw score per row, computed once per args."""
        if args not in self._allocatable:
            self._allocatable[args] = np.array([allocatable_score(node, args) for node in self.nodes], dtype=np.int64)
        return self._allocatable[args]
