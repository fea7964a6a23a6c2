"""The exact reference (HiGHS, the ``exact`` extra): the same problem as the planner's, as a mixed-integer program,
so that every plan can be reported against the optimum — or, when it is not proven within the time limit, against
the best bound.

Variables: ``x[p,n]`` (binary) pod ``p`` on node ``n``, for the nodes it fits on alone; ``z[p,q]`` >= 0 the
penalised cost of a pair of unbound pods; ``s[p,q,n]`` in [0, 1], both on node ``n``. Objective: the pairs'
penalised cost (a pair with a bound pod is linear in ``x``; two bound pods a constant) plus the planner's penalty
per pod left out. Constraints: each pod on at most one node; per node, every resource, the pods limit and the
bandwidth (by the accounting) within what it has left; per pair and per two places ``a != b``:
``z >= C[a,b] (X[p,a] + X[q,b] - 1)``, and in one place ``z >= C[a,a] (X[p,a] + X[q,a] - 1 - S[a])`` where
``X[p,a]`` sums ``x`` over the place's nodes and ``S[a]`` sums ``s`` (``s <= x[p,n]``, ``s <= x[q,n]``): a pair on
one node costs 0, in one zone ``C[a,a]``.

The program leaves out the rules between pods (inter-pod affinity, topology spread, host ports) and the soft
constraints' penalty: when pods of the problem have some, its optimum is only a lower bound of the plan's, reported
as such (solver ``HiGHS (without pod constraints)``, not optimal, no objective).
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict

import numpy as np

from operators.engine.planning.aggregated import AggregatedModel, applies
from operators.engine.planning.problem import Ints, Problem, penalized_costs
from operators.engine.planning.program import Program, solve_program
from operators.engine.planning.reference import Reference
from operators.engine.planning.search import UNPLACED_PENALTY

SOLVER = "HiGHS"
RELAXED = f"{SOLVER} (without pod constraints)"  # the solver's name on a bound that leaves the pods' rules out


def solve(problem: Problem, seconds: float, known: int | None = None) -> Reference:
    """The optimum of ``problem`` (or, at the time limit, the best bound and plan found), on the planner's
    objective scale: the program on aggregated variables when the replicas are interchangeable (:mod:`.aggregated`:
    no symmetry, a far stronger bound), else the per-pod one. ``known``: the objective of a plan of ``problem``
    (the search's): the solver looks only below it (a cutoff; measured: Online Boutique x 3 proven in 38 s
    instead of 67), and when nothing is, that plan is the optimum."""
    return _solve(problem, seconds, AggregatedModel(problem) if applies(problem) else _Model(problem), known)


def solve_per_pod(problem: Problem, seconds: float) -> Reference:
    """:func:`solve` with the per-pod program whatever the problem (the aggregated one is checked against it)."""
    return _solve(problem, seconds, _Model(problem))


def _solve(problem: Problem, seconds: float, model: Program, known: int | None = None) -> Reference:
    started = time.perf_counter()
    if not model.integers:  # nothing to place: the constant is the optimum
        return _reference(problem, True, round(model.constant), model.constant, started)
    # the program's objective of the known plan is at most ``known`` (it may leave penalties out)
    solved = solve_program(model, seconds, None if known is None else known + 0.5)
    if known is not None and solved.infeasible:  # nothing below the known plan
        return _reference(problem, True, known, float(known), started)
    objective = round(solved.objective) if solved.objective is not None else None
    proven = float(objective if objective is not None else model.constant)
    bound = proven if solved.optimal else max(0.0, solved.bound)
    return _reference(problem, solved.optimal, objective, bound, started)


def _reference(problem: Problem, optimal: bool, objective: int | None, bound: float, started: float) -> Reference:
    """The reference, or — when pods have rules between them, which the program leaves out — only its bound (the
    program's optimum is then no plan's: ``RELAXED``)."""
    if problem.constraints is not None:
        return Reference(RELAXED, False, None, bound, time.perf_counter() - started)
    return Reference(SOLVER, optimal, objective, bound, time.perf_counter() - started)


class _Model(Program):
    """The program of the module docstring."""

    def __init__(self, problem: Problem):
        super().__init__(problem)
        start_fits = [
            problem.fits(pod, problem.used, problem.free, problem.pods_free) for pod in range(len(problem.pods))
        ]
        self.x: dict[int, dict[int, int]] = {}
        for pod, fits in enumerate(start_fits):
            candidates = np.nonzero(fits)[0].tolist() if problem.pods[pod].key not in problem.unplaceable else []
            self.x[pod] = {node: self._column(-UNPLACED_PENALTY, 1.0, integer=True) for node in candidates}
            self.constant += UNPLACED_PENALTY
            if candidates:
                self.rows.append((None, 1.0, dict.fromkeys(self.x[pod].values(), 1.0)))
        self._capacity()
        self._pairs()
        self._interchangeable()

    def _interchangeable(self) -> None:
        """Replicas that ask the same and fit the same nodes are interchangeable: their nodes in index order (each
        plan keeps its cost under the reordering, so the optimum stays), which spares the solver their
        permutations. A replica left out comes last."""
        problem = self.problem
        groups: dict[tuple[object, ...], list[int]] = defaultdict(list)
        for pod, columns in self.x.items():
            if columns:
                key = (int(problem.pod_workload[pod]), tuple(problem.requests[pod]), tuple(problem.demand[pod]),
                       tuple(sorted(columns)))  # fmt: skip
                groups[key].append(pod)
        last = len(problem.nodes)
        for pods in groups.values():
            for first, second in itertools.pairwise(pods):
                # sum n x[first,n] + last (1 - sum x[first]) <= sum n x[second,n] + last (1 - sum x[second])
                row: dict[int, float] = {}
                for node, column in self.x[first].items():
                    row[column] = row.get(column, 0.0) + node - last
                for node, column in self.x[second].items():
                    row[column] = row.get(column, 0.0) - (node - last)
                self.rows.append((None, 0.0, row))

    def _capacity(self) -> None:
        problem = self.problem
        by_node: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for pod, columns in self.x.items():
            for node, column in columns.items():
                by_node[node].append((pod, column))
        combined = problem.accounting.value == "combined"
        for node, entries in by_node.items():
            self.rows.append((None, float(problem.pods_free[node]), {column: 1.0 for _, column in entries}))
            for resource in range(len(problem.resources)):
                asked = {column: float(problem.requests[pod, resource]) for pod, column in entries}
                if any(asked.values()):
                    self.rows.append((None, float(problem.free[node, resource]), asked))
            capacity, used_in, used_out = (int(v) for v in (problem.capacity[node], *problem.used[node]))
            if capacity < 0:
                continue  # a pod asking bandwidth was never a candidate here
            if combined:
                asked = {column: float(problem.demand[pod].sum()) for pod, column in entries}
                if any(asked.values()):
                    self.rows.append((None, float(capacity - used_in - used_out), asked))
                continue
            for direction, used in ((0, used_in), (1, used_out)):
                asked = {column: float(problem.demand[pod, direction]) for pod, column in entries}
                if any(asked.values()):
                    self.rows.append((None, float(capacity - used), asked))

    def _pairs(self) -> None:
        problem = self.problem
        places = len(problem.places)
        for edge in problem.edges:
            grid = penalized_costs(problem, edge)
            sources = self._ends(edge.source)
            targets = self._ends(edge.target)
            for source in sources:
                for target in targets:
                    if source == target:
                        continue
                    self._pair(grid, source, target, places)

    def _ends(self, workload: int) -> list[tuple[str, int]]:
        """The pods of ``workload``: ("fixed", node) for a bound one, ("pod", index) for an unbound one."""
        problem = self.problem
        fixed = [("fixed", node) for _, w, node in problem.fixed if w == workload]
        return fixed + [("pod", pod) for pod in np.nonzero(problem.pod_workload == workload)[0].tolist()]

    def _pair(self, grid: Ints, source: tuple[str, int], target: tuple[str, int], places: int) -> None:
        problem = self.problem
        if source[0] == "fixed" and target[0] == "fixed":
            fixed = problem.pair_cost(source[1], target[1]) + _penalty(grid, problem, source[1], target[1])
            self.constant += fixed
            return
        if source[0] == "fixed" or target[0] == "fixed":
            node = source[1] if source[0] == "fixed" else target[1]
            pod = target[1] if source[0] == "fixed" else source[1]
            for candidate, column in self.x[pod].items():
                added = 0.0 if candidate == node else float(grid[problem.place_of[candidate], problem.place_of[node]])
                self.cost[column] += added
            return
        p, q = self.x[source[1]], self.x[target[1]]
        if not p or not q:
            return  # a pod left out pays its own penalty; its pairs cost nothing
        z = self._column(1.0, float("inf"))
        at_place: list[dict[int, int]] = [{} for _ in range(places)]
        for pod_columns, slot in ((p, 0), (q, 1)):
            for node, column in pod_columns.items():
                at_place[int(problem.place_of[node])].setdefault(slot * 10**9 + node, column)
        in_place = [
            ([c for key, c in cells.items() if key < 10**9], [c for key, c in cells.items() if key >= 10**9])
            for cells in at_place
        ]
        shared = {node: (p[node], q[node]) for node in p.keys() & q.keys()}
        same_node: dict[int, list[int]] = defaultdict(list)
        for node, (column_p, column_q) in shared.items():
            s = self._column(0.0, 1.0)
            self.rows.append((None, 0.0, {s: 1.0, column_p: -1.0}))
            self.rows.append((None, 0.0, {s: 1.0, column_q: -1.0}))
            same_node[int(problem.place_of[node])].append(s)
        for a in range(places):
            for b in range(places):
                weight = float(grid[a, b])
                columns_p, columns_q = in_place[a][0], in_place[b][1]
                if weight <= 0 or not columns_p or not columns_q:
                    continue
                row: dict[int, float] = {z: 1.0}
                for column in columns_p:
                    row[column] = row.get(column, 0.0) - weight
                for column in columns_q:
                    row[column] = row.get(column, 0.0) - weight
                if a == b:
                    for s in same_node[a]:
                        row[s] = weight
                self.rows.append((-weight, None, row))


def _penalty(grid: Ints, problem: Problem, node_a: int, node_b: int) -> float:
    """The penalty part of a pair of two bound pods (their cost is counted apart)."""
    if node_a == node_b:
        return 0.0
    a, b = problem.place_of[node_a], problem.place_of[node_b]
    return float(grid[a, b] - problem.place_cost[a, b])
