"""A lower bound of the planner's objective that needs no solver and scales to thousands of nodes (pure): what a
plan is reported against when the exact program is too large to build (300 pods on 5,000 nodes: 1.5 million
binaries).

Two disjoint sets of pod pairs, each bounded on its own (the bound is their sum):

1. **Pairs with a bound pod** (and pairs of two bound pods: a constant): a pending pod ``p`` paired with a pod
   bound on node ``m`` costs at least the cheapest penalised cost from a node ``p`` fits on alone to ``m``.
2. **Pairs of two pending pods**: whatever the plan, the pods of one node form a part of at most ``K`` pods (the
   most of the group's pods any one node can hold: its pods limit, and as many of the smallest requests and
   bandwidth demands as its free amounts take), and a pair split across parts costs at least ``c`` (the
   cheapest cost between two distinct nodes: one zone, or two places). For a connected component of ``n``
   pods of the pair graph with Laplacian eigenvalue ``λ2`` (its algebraic connectivity), a part ``S`` has at
   least ``λ2 |S| (n - |S|) / n`` pairs leaving it (the Rayleigh quotient of ``1_S`` minus its mean), so the
   split pairs number at least ``½ λ2 (n - Σ|S|² / n) >= ½ λ2 (n - K)``. Pods of one workload have the same
   neighbours (twins), so ``λ2`` is read off the workload graph: the second eigenvalue of ``D - N½ A N½`` (``A``
   the workload adjacency, ``N`` the pod counts, ``D`` a pod's degree per workload) or, for a workload of two
   pods or more, a pod's degree.

A pod left out pays :data:`~operators.engine.planning.search.UNPLACED_PENALTY`, far above what its pairs can
cost, so counting its pairs as split keeps the bound valid.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from operators.engine.cluster.bandwidth import Accounting
from operators.engine.planning.problem import Ints, Problem, penalized_costs


def lower_bound(problem: Problem) -> float:
    """A lower bound of the objective of every plan of ``problem`` (see the module docstring)."""
    return _with_bound_pods(problem) + _split_pairs(problem)


def _with_bound_pods(problem: Problem) -> float:
    if not problem.fixed:
        return 0.0
    total = 0.0
    fixed_by_workload: dict[int, list[int]] = defaultdict(list)
    for _, workload, node in problem.fixed:
        fixed_by_workload[workload].append(node)
    # the nodes each pending pod fits on alone (the exact program's columns)
    candidates = [
        np.nonzero(problem.fits(pod, problem.used, problem.free, problem.pods_free))[0]
        for pod in range(len(problem.pods))
    ]
    for edge in problem.edges:
        if edge.source == edge.target:
            continue
        grid = penalized_costs(problem, edge)
        for mine, other in ((edge.source, edge.target), (edge.target, edge.source)):
            for node in fixed_by_workload.get(other, ()):
                # from the source's place to the target's: the costs need not be symmetric
                rows = grid[:, problem.place_of[node]] if mine == edge.source else grid[problem.place_of[node]]
                cost_to = rows[problem.place_of].astype(np.float64)
                cost_to[node] = 0.0  # the same node
                for pod in np.nonzero(problem.pod_workload == mine)[0].tolist():
                    where = candidates[pod]
                    total += float(cost_to[where].min()) if len(where) else 0.0  # left out: its own penalty
        for a in fixed_by_workload.get(edge.source, ()):
            for b in fixed_by_workload.get(edge.target, ()):
                total += 0.0 if a == b else float(grid[problem.place_of[a], problem.place_of[b]])
    return total


def pod_graph(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """The pending pods' pair graph by workload: (workload adjacency, each pair of two workloads counted once per
    edge between them; pending pods per workload)."""
    counts = np.bincount(problem.pod_workload, minlength=len(problem.workloads)).astype(np.float64)
    adjacency = np.zeros((len(problem.workloads),) * 2)
    for edge in problem.edges:
        if edge.source != edge.target and counts[edge.source] and counts[edge.target]:
            adjacency[edge.source, edge.target] += 1.0  # two edges between two workloads: each pair counted twice
            adjacency[edge.target, edge.source] += 1.0
    return adjacency, counts


def _split_pairs(problem: Problem) -> float:
    adjacency, counts = pod_graph(problem)
    cheapest = _cheapest_split(problem)
    total = 0.0
    for component in components(adjacency, counts):
        pods = float(counts[component].sum())
        most = _most_on_one_node(problem, component)
        if pods <= most or cheapest <= 0:
            continue
        total += (
            cheapest * 0.5 * connectivity(adjacency[np.ix_(component, component)], counts[component]) * (pods - most)
        )
    return total


def components(adjacency: np.ndarray, counts: np.ndarray) -> list[list[int]]:
    """The connected workload sets (of workloads with pending pods) of two or more workloads."""
    seen: set[int] = set()
    out = []
    for start in range(len(counts)):
        if start in seen or not counts[start]:
            continue
        stack, component = [start], []
        seen.add(start)
        while stack:
            here = stack.pop()
            component.append(here)
            for there in np.nonzero(adjacency[here])[0].tolist():
                if there not in seen:
                    seen.add(there)
                    stack.append(there)
        if len(component) > 1:
            out.append(sorted(component))
    return out


def connectivity(adjacency: np.ndarray, counts: np.ndarray) -> float:
    """λ2 of the Laplacian of the pod graph: every pod of workload ``a`` paired with every pod of each neighbour."""
    degree = adjacency @ counts  # a pod's pairs
    root = np.sqrt(counts)
    quotient = np.diag(degree) - root[:, None] * adjacency * root[None, :]
    second = float(np.linalg.eigvalsh(quotient)[1])
    twins = [float(d) for d, n in zip(degree, counts, strict=True) if n >= 2]
    return max(0.0, min([second, *twins]))


def _most_on_one_node(problem: Problem, component: list[int]) -> float:
    """The most pods of ``component`` any one node can hold: its pods limit, and for each resource and each
    bandwidth direction as many of the smallest asks as its free amount takes (any k pods ask at least the k
    smallest; each direction within what the node has left holds in either accounting, and combined, in + out
    within what both leave)."""
    pods = np.nonzero(np.isin(problem.pod_workload, component))[0]
    held = np.minimum(problem.pods_free, len(pods)).astype(np.float64)
    for resource in range(problem.requests.shape[1]):
        held = np.minimum(held, _smallest_that_fit(problem.requests[pods, resource], problem.free[:, resource]))
    known = (problem.capacity >= 0) & ~problem.bandwidth_unknown
    asks = [(problem.demand[pods, d], problem.capacity - problem.used[:, d]) for d in (0, 1)]
    if problem.accounting is Accounting.COMBINED:
        asks.append((problem.demand[pods].sum(axis=1), problem.capacity - problem.used.sum(axis=1)))
    for ask, free in asks:
        held = np.where(known, np.minimum(held, _smallest_that_fit(ask, free)), held)
    return float(held.max()) if len(held) else 0.0


def _smallest_that_fit(asks: Ints, free: Ints) -> Ints:
    """Per node, how many of the smallest ``asks`` its ``free`` amount takes together."""
    return np.searchsorted(np.cumsum(np.sort(asks)), free, side="right")


def _cheapest_split(problem: Problem) -> float:
    """The cheapest cost of a pair on two distinct nodes: within one place with two nodes or more, or between two
    places."""
    nodes_per_place = np.bincount(problem.place_of, minlength=len(problem.places))
    used = np.nonzero(nodes_per_place)[0]
    if not len(used):
        return 0.0
    grid = problem.place_cost[np.ix_(used, used)].astype(np.float64)
    for index, place in enumerate(used.tolist()):
        if nodes_per_place[place] < 2:
            grid[index, index] = np.inf
    return float(grid.min()) if np.isfinite(grid.min()) else 0.0
