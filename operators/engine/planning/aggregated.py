"""The exact program on aggregated variables (pure): how many pods of each workload go to each node, instead of a
binary per pod and node — the replicas of a workload are interchangeable, so the per-pod program's symmetry is
gone, and the program grows with workloads and nodes, not with pods.

Variables, all binary: the bits of ``y[w,n]`` (pods of workload ``w`` on node ``n``, on the nodes its pods fit on
alone) and of ``Y[w,a]`` (pods of ``w`` in place ``a``, tied to the sum of its nodes' ``y`` by one row), the bits
of the pods of ``w`` left out, and the products of two bits. With ``C`` the edge's penalised place cost (its
pairs above ``maxNetworkCost`` weigh 1,000 more, as in the planner's objective), the pending pairs of an edge
``u -> v`` cost ``sum_a,b Y[u,a] Y[v,b] C[a,b] - sum_n y[u,n] y[v,n] C[a(n),a(n)]`` (pairs on one node cost 0,
on two nodes of a place ``C[a,a]``): each product of two integers is a sum of products of their bits, a product
``z`` of two bits bounded below (``z >= b1 + b2 - 1``) where its cost is positive and above (``z <= b1``,
``z <= b2``) where it is negative — exact at integer points. A bound member's pairs are linear in ``y``.

It applies when every pending pod of a workload asks the same, fits the same nodes and has no rule between pods
(:func:`applies`); else the per-pod program (:mod:`.exact`) is used.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from operators.engine.planning.moves import UNPLACED_PENALTY
from operators.engine.planning.problem import Ints, Problem, penalized_costs
from operators.engine.planning.program import Program


def applies(problem: Problem) -> bool:
    """Whether the pending pods of each workload are interchangeable (see the module docstring)."""
    if problem.constraints is not None:
        return False
    seen: dict[int, tuple[bytes, bytes, bytes]] = {}
    for pod in range(len(problem.pods)):
        if problem.pods[pod].key in problem.unplaceable:
            continue
        fits = problem.fits(pod, problem.used, problem.free, problem.pods_free)
        key = (problem.requests[pod].tobytes(), problem.demand[pod].tobytes(), np.packbits(fits).tobytes())
        if seen.setdefault(int(problem.pod_workload[pod]), key) != key:
            return False
    return True


class AggregatedModel(Program):
    """The program of the module docstring."""

    def __init__(self, problem: Problem):
        super().__init__(problem)
        workloads, nodes = len(problem.workloads), len(problem.nodes)
        self.pending = np.zeros(workloads, dtype=np.int64)
        self.fits = np.zeros((workloads, nodes), dtype=np.bool_)
        self.example: dict[int, int] = {}  # workload -> one of its pending pods
        for pod in range(len(problem.pods)):
            workload = int(problem.pod_workload[pod])
            if problem.pods[pod].key in problem.unplaceable:
                self.constant += UNPLACED_PENALTY
                continue
            self.pending[workload] += 1
            if workload not in self.example:
                self.example[workload] = pod
                self.fits[workload] = problem.fits(pod, problem.used, problem.free, problem.pods_free)
        self.node_bits: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (w, n) -> [(column, weight)]
        self.place_bits: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (w, a) -> [(column, weight)]
        self._counts()
        self._capacity()
        self._pairs()

    def _bits(self, cap: int, cost: float = 0.0) -> list[tuple[int, int]]:
        """Binary columns whose weighted sum is an integer in [0, 2^k - 1] covering ``cap``."""
        out = []
        for k in range(max(1, int(cap).bit_length())):
            out.append((self._column(cost * (1 << k), 1.0, integer=True), 1 << k))
        return out

    def _counts(self) -> None:
        """The bits of y[w,n] and Y[w,a] and of the pods left out; every pending pod counted once."""
        problem = self.problem
        for workload in np.nonzero(self.pending)[0].tolist():
            count = int(self.pending[workload])
            total: dict[int, float] = {}
            for node in np.nonzero(self.fits[workload])[0].tolist():
                cap = min(count, int(problem.pods_free[node]))
                bits = self._bits(cap)
                self.node_bits[(workload, node)] = bits
                self.rows.append((None, float(cap), {column: float(weight) for column, weight in bits}))
                for column, weight in bits:
                    total[column] = float(weight)
            out = self._bits(count, UNPLACED_PENALTY)
            self.rows.append((float(count), float(count), {**total, **{c: float(w) for c, w in out}}))
            for place in range(len(problem.places)):
                inside = [
                    n for n in np.nonzero(problem.place_of == place)[0].tolist() if (workload, n) in self.node_bits
                ]
                if not inside:
                    continue
                bits = self._bits(count)
                self.place_bits[(workload, place)] = bits
                tie: dict[int, float] = {column: float(weight) for column, weight in bits}
                for node in inside:
                    for column, weight in self.node_bits[(workload, node)]:
                        tie[column] = -float(weight)
                self.rows.append((0.0, 0.0, tie))

    def _capacity(self) -> None:
        problem = self.problem
        combined = problem.accounting.value == "combined"
        by_node: dict[int, list[tuple[int, list[tuple[int, int]]]]] = defaultdict(list)
        for (workload, node), bits in self.node_bits.items():
            by_node[node].append((workload, bits))
        workloads = len(problem.workloads)
        asks = np.zeros((workloads, len(problem.resources)), dtype=np.float64)  # per workload: one pod's asks
        demand = np.zeros((workloads, 2), dtype=np.float64)
        for workload, pod in self.example.items():
            asks[workload], demand[workload] = problem.requests[pod], problem.demand[pod]
        for node, entries in by_node.items():
            self.rows.append((None, float(problem.pods_free[node]), _weighed(entries, np.ones(workloads))))
            for resource in range(len(problem.resources)):
                row = _weighed(entries, asks[:, resource])
                if row:
                    self.rows.append((None, float(problem.free[node, resource]), row))
            capacity, used_in, used_out = (int(v) for v in (problem.capacity[node], *problem.used[node]))
            if capacity < 0:
                continue
            if combined:
                row = _weighed(entries, demand.sum(axis=1))
                if row:
                    self.rows.append((None, float(capacity - used_in - used_out), row))
                continue
            for direction, used in ((0, used_in), (1, used_out)):
                row = _weighed(entries, demand[:, direction])
                if row:
                    self.rows.append((None, float(capacity - used), row))

    def _pairs(self) -> None:
        problem = self.problem
        fixed = np.zeros((len(problem.workloads), len(problem.nodes)), dtype=np.int64)
        for _, workload, node in problem.fixed:
            fixed[workload, node] += 1
        for edge in problem.edges:
            grid = penalized_costs(problem, edge)
            node_cost = grid[np.ix_(problem.place_of, problem.place_of)].astype(np.float64)
            np.fill_diagonal(node_cost, 0.0)
            self.constant += float(fixed[edge.source] @ node_cost @ fixed[edge.target])
            for pending, other in ((edge.source, fixed[edge.target]), (edge.target, fixed[edge.source])):
                linear = node_cost @ other  # per node: what one pod of ``pending`` there pays to the bound ones
                for node in range(len(problem.nodes)):
                    for column, weight in self.node_bits.get((pending, node), ()):
                        self.cost[column] += weight * float(linear[node])
            self._products(edge.source, edge.target, grid)

    def _products(self, source: int, target: int, grid: Ints) -> None:
        problem = self.problem
        places = len(problem.places)
        for a in range(places):
            for b in range(places):
                weight = float(grid[a, b])
                for bit_p, wp in self.place_bits.get((source, a), ()):
                    for bit_q, wq in self.place_bits.get((target, b), ()):
                        if weight > 0:
                            z = self._column(weight * wp * wq, 1.0)
                            self.rows.append((-1.0, None, {z: 1.0, bit_p: -1.0, bit_q: -1.0}))
        for node in range(len(problem.nodes)):
            weight = float(grid[problem.place_of[node], problem.place_of[node]])
            if weight <= 0:
                continue
            for bit_p, wp in self.node_bits.get((source, node), ()):
                for bit_q, wq in self.node_bits.get((target, node), ()):
                    z = self._column(-weight * wp * wq, 1.0)
                    self.rows.append((None, 0.0, {z: 1.0, bit_p: -1.0}))
                    self.rows.append((None, 0.0, {z: 1.0, bit_q: -1.0}))


def _weighed(entries: list[tuple[int, list[tuple[int, int]]]], per_pod: np.ndarray) -> dict[int, float]:
    """A row's coefficients: each workload's per-pod amount times its bits' weights (zero amounts left out)."""
    row: dict[int, float] = {}
    for workload, bits in entries:
        amount = float(per_pod[workload])
        if amount:
            for column, weight in bits:
                row[column] = float(amount) * weight
    return row
