"""How many dependent pods can share a node (pure): a lower bound of a plan's network cost from it (HiGHS, the
``exact`` extra) — how far any plan can get below the smallest-domain baseline where nodes are nearly full, which
the solver-free bound (:mod:`.bound`) is far too weak to say — and a start for the search that packs one zone's
nodes the way the bound's program does (:func:`packed_start`, no solver).

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
from operators.engine.planning.work import PACK_WORK

MOST_CONFIGURATIONS = 200_000  # per program: more, and the bound is not computed
TRIED = 4  # configurations checked by first fit per node
PACKED_MOST = 50_000  # configurations: more, and no packed start (a search's start must be cheap)


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
    column: int  # the resource asked
    unit: int  # its greatest common divisor


@dataclass(frozen=True)
class Configurations:
    """Every configuration of at most some units: pods per type (one row each), units used, pairs on the node."""

    counts: np.ndarray
    used: np.ndarray
    pairs: np.ndarray


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
                  np.clip(problem.free[:, int(asked[0])] // unit, 0, total).tolist(), adjacency, cut,
                  int(asked[0]), unit)  # fmt: skip


def _configurations(types: _Types, room: int, most: int = MOST_CONFIGURATIONS) -> Configurations | None:
    """Every configuration of at most ``room`` units; None past ``most`` (counted first, by units used)."""
    ways = np.zeros(room + 1, dtype=np.int64)
    ways[0] = 1
    for (_, units), supply in zip(types.kinds, types.supply, strict=True):
        grown = ways.copy()
        for count in range(1, min(supply, room // units) + 1):
            grown[count * units :] += ways[: room + 1 - count * units]
        ways = np.minimum(grown, most + 1)  # past ``most`` the exact number does not matter
    if ways.sum() > most:
        return None
    counts = np.zeros((1, 0), dtype=np.int64)
    used = np.zeros(1, dtype=np.int64)
    for (_, units), supply in zip(types.kinds, types.supply, strict=True):
        more = np.arange(min(supply, room // units) + 1, dtype=np.int64)
        grown = used[:, None] + more[None, :] * units
        rows, taken = np.nonzero(grown <= room)
        counts = np.column_stack([counts[rows], more[taken]])
        used = grown[rows, taken]
    per = np.zeros((len(types.kinds), len(types.adjacency)), dtype=np.int64)
    per[np.arange(len(types.kinds)), [workload for workload, _ in types.kinds]] = 1
    workloads = counts @ per
    pairs = np.einsum("cu,uv,cv->c", workloads, types.adjacency.astype(np.int64), workloads) // 2
    return Configurations(counts, used, pairs)


class _Packing(Program):
    """The configuration program of placing every dependent pod on ``nodes`` (see the module docstring), as a
    minimisation of minus the pairs on one node; ``short``: the nodes cannot hold the pods' units at all."""

    def __init__(self, problem: Problem, types: _Types, every: Configurations, nodes: np.ndarray) -> None:
        super().__init__(problem)
        room = Counter(types.free[node] for node in nodes.tolist())
        need = sum(units * count for (_, units), count in zip(types.kinds, types.supply, strict=True))
        self.short = sum(units * count for units, count in room.items()) < need
        placed: list[dict[int, float]] = [{} for _ in types.kinds]
        for units, count in [] if self.short else room.items():
            columns: dict[int, float] = {}
            for config in np.nonzero(every.used <= units)[0].tolist():
                column = self._column(-float(every.pairs[config]), float(count), integer=True)
                columns[column] = 1.0
                for kind in np.nonzero(every.counts[config])[0].tolist():
                    placed[kind][column] = float(every.counts[config, kind])
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


def packed_start(problem: Problem, nodes: np.ndarray, work: list[int] | None = None) -> dict[int, int] | None:
    """The dependent pods on ``nodes`` (one zone's), packed node by node, the most room first: each node takes the
    configuration with most pairs on it (then the fewest units) among those that leave the other pods room on the
    nodes after it (enough units of each size, then first fit, largest first, for the first :data:`TRIED`); pod ->
    node, or None when the bound's programs do not apply, the configurations are more than :data:`PACKED_MOST` or
    the pods do not fit. ``work``: its cost is added there (:data:`~.work.PACK_WORK` per configuration and node)."""
    types = _types(problem)
    if types is None:
        return None
    room = np.array([types.free[node] for node in nodes.tolist()], dtype=np.int64)
    every = _configurations(types, int(room.max()) if len(room) else 0, PACKED_MOST)
    if work is not None:
        work[0] += PACK_WORK * len(every.used) * max(1, len(nodes)) if every is not None else 0
    if every is None:
        return None
    counts, used = every.counts, every.used
    order = np.lexsort((used, -every.pairs))  # most pairs, then fewest units
    units = np.array([units for _, units in types.kinds], dtype=np.int64)
    left = np.array(types.supply, dtype=np.int64)
    roomiest = np.argsort(-room, kind="stable")
    ranked = room[roomiest]
    taken: dict[int, np.ndarray] = {}
    sizes = np.unique(units)[::-1]
    alive = order  # the configurations the pods left can still fill: fewer at each node
    for at, node in enumerate(nodes[roomiest].tolist()):
        if not left.any():
            break  # every dependent pod packed: the nodes after take none
        later = ranked[at + 1 :]
        alive = alive[np.all(counts[alive] <= left, axis=1)]
        fitting = alive[used[alive] <= types.free[node]]
        rest = left[None, :] - counts[fitting]
        slots = np.array([(later // size).sum() for size in sizes.tolist()])
        wanted = np.stack([rest[:, units >= size] @ (units[units >= size] / size) for size in sizes.tolist()], axis=1)
        fitting = fitting[np.all(wanted <= slots + 1e-9, axis=1)]  # enough room for what is left, by size
        chosen = next((c for c in fitting[:TRIED].tolist() if _first_fit(left - counts[c], units, later)), None)
        if chosen is None:
            return None
        taken[node] = counts[chosen]
        left = left - counts[chosen]
    if left.any():
        return None  # no nodes at all
    pods: dict[tuple[int, int], list[int]] = {}
    for pod in range(len(problem.pods)):
        kind = (int(problem.pod_workload[pod]), int(problem.requests[pod, types.column] // types.unit))
        pods.setdefault(kind, []).append(pod)
    placed: dict[int, int] = {}
    for node, per in taken.items():
        for kind, count in zip(types.kinds, per.tolist(), strict=True):
            for _ in range(count):
                placed[pods[kind].pop()] = node
    return placed


def _first_fit(left: np.ndarray, units: np.ndarray, room: np.ndarray) -> bool:
    """Whether ``left`` pods of each type (``units`` each) fit on nodes of ``room`` units: first fit, the largest
    first (for sizes that divide one another, as 250m, 500m and 1 cpu, as good as any packing)."""
    room = room.copy()
    for kind in np.argsort(-units, kind="stable").tolist():
        fit = room // units[kind]  # first fit of identical pods: each node in turn takes what it can
        before = np.cumsum(fit) - fit
        take = np.clip(int(left[kind]) - before, 0, fit)
        if take.sum() < left[kind]:
            return False
        room -= take * units[kind]
    return True
