"""A lower bound of a plan's network cost from how many dependent pods can share a node (pure; HiGHS, the ``exact``
extra): how far any plan can get below the smallest-domain baseline where nodes are nearly full, which the
solver-free bound (:mod:`.bound`) is far too weak to say.

A pair of pods costs 0 on one node, ``d`` (a zone's own cost) on two nodes of one zone, and at least ``c >= d``
(the cheapest cost between two places) in two zones. With ``P`` pairs, ``S`` of them on one node and ``X``
across zones, a plan costs at least ``d (P - S) + (c - d) X``. Two cases cover every plan that places every pod:

A. the pods of the dependent workloads all in one zone ``Z``: ``X = 0`` and ``S <= S_Z``, the most pairs on one
   node of any placement of those pods on ``Z``'s nodes (no such plan when ``Z`` cannot hold them);
B. in two zones or more: ``S <= S_all`` (on any node) and ``X`` at least the pod graph's smallest cut, which is
   at least ``λ2 (n - 1) / n`` for ``n`` pods (:func:`.bound.connectivity`).

The bound is ``min(min_Z d (P - S_Z), d (P - S_all) + (c - d) cut)``.

``S_Z`` and ``S_all`` are a configuration program's: a configuration is how many pods of each type (workload and
request) one node takes; nodes with as much free (in units of the requests' greatest common divisor) share their
configurations; an integer counts the nodes of each amount on each configuration; every pod is placed, and the
objective is the pairs on one node. Stopped by its time limit, the program's best bound still bounds ``S``.

What the program leaves out can only raise ``S``, so the bound holds with it: bandwidth, the pods limit, where
each pod may go, the rules between pods; and the pairs with bound members, which only add to a plan's cost. It
applies (:func:`packable`) when every pod asks one resource and fits on some node alone, the dependent workloads are
connected, every zone's own cost is the same and none between two zones is lower, and the configurations are at
most :data:`MOST_CONFIGURATIONS`.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from operators.engine.planning.bound import components, connectivity, pod_graph
from operators.engine.planning.problem import Problem
from operators.engine.planning.program import Program, solve_program

MOST_CONFIGURATIONS = 200_000  # per program: more, and the bound is not computed


@dataclass(frozen=True)
class PackingBound:
    """No plan that places every pod has a network cost (of its pending pods' pairs) below ``cost``; ``pairs`` (P),
    per zone that can hold the dependent pods the most pairs on one node there (S_Z), the most anywhere (S_all),
    the smallest cut, and whether every program was solved to its optimum."""

    cost: float
    pairs: int
    one_zone: dict[str, int]
    anywhere: int
    cut: int
    proven: bool


@dataclass(frozen=True)
class _Types:
    """The dependent pods by type (workload, units of the resource asked) and how many of each; each node's free
    units; the workload adjacency (pairs on a node with ``k`` pods per workload: ``k A k / 2``)."""

    kinds: list[tuple[int, int]]
    supply: list[int]
    free: list[int]
    adjacency: np.ndarray
    cut: int


Configuration = tuple[tuple[int, ...], int, int]  # pods per type, units used, pairs on the node


def packable(problem: Problem) -> bool:
    """Whether :func:`packing_bound` applies to ``problem`` (see the module docstring)."""
    types = _types(problem)
    return types is not None and _configurations(types, max(types.free)) is not None


def packing_bound(problem: Problem, seconds: float) -> PackingBound | None:
    """The bound (see the module docstring), each program within ``seconds``; None when it does not apply."""
    types = _types(problem)
    every = _configurations(types, max(types.free)) if types is not None else None
    if types is None or every is None:
        return None
    workloads = np.zeros(len(problem.workloads))
    for (workload, _), count in zip(types.kinds, types.supply, strict=True):
        workloads[workload] += count
    pairs = round(workloads @ types.adjacency @ workloads / 2)
    places = np.unique(problem.place_of)
    grid = problem.place_cost[np.ix_(places, places)].astype(np.float64)
    own = float(grid[0, 0])
    np.fill_diagonal(grid, np.inf)
    across = float(grid.min())
    proven = True
    one_zone: dict[str, int] = {}
    for place in places.tolist():
        most, optimal = _most_pairs(_Packing(problem, types, every, np.nonzero(problem.place_of == place)[0]),
                                    pairs, seconds)  # fmt: skip
        proven &= optimal
        if most is not None:
            one_zone["/".join(problem.places[place])] = most
    anywhere, optimal = _most_pairs(_Packing(problem, types, every, np.arange(len(problem.nodes))), pairs, seconds)
    proven &= optimal
    cases = [own * (pairs - most) for most in one_zone.values()]
    if anywhere is not None and math.isfinite(across):
        cases.append(own * (pairs - anywhere) + (across - own) * types.cut)
    if not cases:
        return None  # no plan places every pod
    return PackingBound(min(cases), pairs, one_zone, anywhere or 0, types.cut, proven)


def _types(problem: Problem) -> _Types | None:
    asked = np.nonzero(problem.requests.any(axis=0))[0]
    if problem.unplaceable or len(asked) != 1:
        return None
    places = np.unique(problem.place_of)
    grid = problem.place_cost[np.ix_(places, places)]
    if len(set(np.diagonal(grid).tolist())) != 1 or grid.min() < grid[0, 0]:
        return None
    adjacency, counts = pod_graph(problem)
    found = components(adjacency, counts)
    if len(found) != 1:
        return None  # no dependent pods, or two groups of them that may go apart at no cost
    (linked,) = found
    rows = np.isin(problem.pod_workload, linked)
    asks = problem.requests[rows, int(asked[0])]
    if asks.min() <= 0 or asks.max() > problem.free[:, int(asked[0])].max():
        return None  # a pod that asks nothing, or one that fits on no node: no plan places every pod
    unit = math.gcd(*asks.tolist())
    kinds = Counter(zip(problem.pod_workload[rows].tolist(), (asks // unit).tolist(), strict=True))
    total = sum(units * count for (_, units), count in kinds.items())
    pods = float(counts[linked].sum())
    cut = math.ceil(connectivity(adjacency[np.ix_(linked, linked)], counts[linked]) * (pods - 1) / pods - 1e-9)
    return _Types(sorted(kinds), [kinds[kind] for kind in sorted(kinds)],
                  np.clip(problem.free[:, int(asked[0])] // unit, 0, total).tolist(), adjacency, cut)  # fmt: skip


def _configurations(types: _Types, room: int) -> list[Configuration] | None:
    """Every configuration of at most ``room`` units; None past :data:`MOST_CONFIGURATIONS`."""
    out: list[Configuration] = []
    counts: list[int] = []
    per = np.zeros(len(types.adjacency))

    def extend(kind: int, left: int) -> bool:
        if kind == len(types.kinds):
            out.append((tuple(counts), room - left, round(per @ types.adjacency @ per / 2)))
            return len(out) <= MOST_CONFIGURATIONS
        workload, units = types.kinds[kind]
        for count in range(min(types.supply[kind], left // units) + 1):
            counts.append(count)
            per[workload] += count
            going = extend(kind + 1, left - count * units)
            per[workload] -= count
            counts.pop()
            if not going:
                return False
        return True

    return out if extend(0, room) else None


class _Packing(Program):
    """The configuration program of placing every dependent pod on ``nodes`` (see the module docstring), as a
    minimisation of minus the pairs on one node; ``short``: the nodes cannot hold the pods' units at all."""

    def __init__(self, problem: Problem, types: _Types, every: list[Configuration], nodes: np.ndarray) -> None:
        super().__init__(problem)
        room = Counter(types.free[node] for node in nodes.tolist())
        need = sum(units * count for (_, units), count in zip(types.kinds, types.supply, strict=True))
        self.short = sum(units * count for units, count in room.items()) < need
        placed: list[dict[int, float]] = [{} for _ in types.kinds]
        for units, count in [] if self.short else room.items():
            columns: dict[int, float] = {}
            for counts, used, together in every:
                if used <= units:
                    column = self._column(-float(together), float(count), integer=True)
                    columns[column] = 1.0
                    for kind, taken in enumerate(counts):
                        if taken:
                            placed[kind][column] = float(taken)
            self.rows.append((float(count), float(count), columns))
        for kind, supply in enumerate(types.supply):
            self.rows.append((float(supply), float(supply), placed[kind]))


def _most_pairs(model: _Packing, pairs: int, seconds: float) -> tuple[int | None, bool]:
    """The most pairs on one node of the program's placements (None: there is none), and whether that is proven
    (else the program's bound at the time limit)."""
    if model.short:
        return None, True
    solved = solve_program(model, seconds)
    if solved.infeasible:
        return None, True
    if not math.isfinite(solved.bound):
        return pairs, False
    return min(pairs, math.floor(-solved.bound + 1e-6)), solved.optimal
