"""The field's placement of a group, as a reference and a starting point (pure): "the smallest domain that holds
it", as topology-aware schedulers place a gang (Kueue's TAS, Volcano's network topology, Koordinator's), with no
notion of an edge's cost.

1. The levels of the topology, the smallest first: one node, one zone, one region, the whole cluster.
2. At the smallest level where some domain holds every pod to place (its free resources, pods and bandwidth
   summed first, then checked by placing them), the domains are tried **BestFit**: the least free capacity first
   (the sum over the nodes of what their cpu can still take, in the pods' own largest cpu request), so that the
   group takes the tightest domain it fits in and leaves the roomy ones.
3. Inside the domain, pods are packed in the spec's workload order, each onto the first node that takes it among
   the domain's nodes ordered by most room first (Kueue's order: fill the domains with most capacity first, to use
   as few as possible).

Every pod is placed only where :meth:`~.moves.Moves.fits` allows it (resources, bandwidth, the pods' rules between
them) and the plan still holds with it (:meth:`~.moves.Moves.holds`: the next node by room when not); pods no
domain takes whole are placed on the whole cluster the same way (some may stay out). It is one of the search's
starting points (:func:`~.search.search`), so that no plan is worse than it, and the column every benchmark
compares the plan to.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from operators.engine.planning.moves import Assignment, Moves
from operators.engine.planning.problem import Problem, holds
from operators.engine.planning.work import FIT_ONE_WORK

LEVELS = ("node", "zone", "region", "cluster")
TRIES = 16  # nodes tried per pod when placing it would break a rule between pods


def smallest_domain(moves: Moves) -> tuple[Assignment, str, np.ndarray]:
    """The placement of the module docstring, the level it was made at, and the domain's nodes."""
    problem = moves.problem
    order = _order(problem)
    for level, nodes in candidates(problem):
        state = _pack(moves, order, nodes)
        if state is not None:
            return state, level, nodes
    state, everywhere = moves.empty(), np.arange(len(problem.nodes))
    _fill(moves, state, order, everywhere)
    return state, "cluster", everywhere


def candidates(problem: Problem) -> Iterator[tuple[str, np.ndarray]]:
    """(level, nodes) of the domains whose free resources and pods, summed, hold every pod to place: the smallest
    level first, BestFit's order within a level (step 2; each is then checked by placing the pods)."""
    order = _order(problem)
    asked = problem.requests[order].sum(axis=0) if order else np.zeros(len(problem.resources), dtype=np.int64)
    room = _room(problem, order)
    for level in LEVELS:
        if level == "node":  # one pass over the nodes, not one sum (nor one sort key) per node
            fit = np.nonzero((problem.pods_free >= len(order)) & holds(problem.free, asked))[0]
            for node in _best_fit_order(fit, room[fit]):
                yield level, np.array([node], dtype=np.int64)
            continue
        held = [d for d in _domains(problem, level) if len(order) <= int(problem.pods_free[d].sum())
                and bool(np.all(problem.free[d].sum(axis=0) >= asked))]  # fmt: skip
        for nodes in sorted(held, key=lambda d: (int(room[d].sum()), int(d[0]))):
            yield level, nodes


FIRST_FEW = 64  # nodes sorted first: the first node that holds the group is nearly always among them


def _best_fit_order(nodes: np.ndarray, room: np.ndarray) -> Iterator[int]:
    """``nodes`` by least ``room`` first (ties: the lower node first): the first :data:`FIRST_FEW` found without
    sorting them all (a partition), the rest sorted only if they are asked for."""
    if len(nodes) > FIRST_FEW:
        keys = room * len(room) + np.arange(len(room))  # room, then position (nodes are increasing): a total order
        first = np.argpartition(keys, FIRST_FEW)[:FIRST_FEW]
        first = first[np.argsort(keys[first])]
        yield from nodes[first].tolist()
        rest = np.ones(len(nodes), dtype=np.bool_)
        rest[first] = False
        nodes, room = nodes[rest], room[rest]
    yield from nodes[np.lexsort((nodes, room))].tolist()


def _order(problem: Problem) -> list[int]:
    """The pods to place, in the spec's workload order."""
    pods = [pod for pod in range(len(problem.pods)) if problem.pods[pod].key not in problem.unplaceable]
    return sorted(pods, key=lambda pod: (int(problem.pod_workload[pod]), pod))


def _domains(problem: Problem, level: str) -> list[np.ndarray]:
    nodes = np.arange(len(problem.nodes))
    if level == "node":
        return [nodes[i : i + 1] for i in range(len(nodes))]
    if level == "zone":
        keys = problem.place_of
    elif level == "region":
        regions = {region: i for i, region in enumerate(sorted({region for region, _ in problem.places}))}
        keys = np.array([regions[problem.places[place][0]] for place in problem.place_of.tolist()], dtype=np.int64)
    else:
        return [nodes]
    order = np.argsort(keys, kind="stable")  # one sort, not a pass over every node per domain (500 zones)
    return np.split(nodes[order], np.flatnonzero(np.diff(keys[order])) + 1)


def _room(problem: Problem, order: list[int]) -> np.ndarray:
    """Per node, what it can still take: pods of the group's largest ask (BestFit's key, summed over a domain's
    nodes); computed for every node at once."""
    if not order:
        return np.zeros(len(problem.nodes), dtype=np.int64)
    biggest = np.max(problem.requests[order], axis=0)
    room = problem.pods_free.astype(np.int64)
    for column in np.nonzero(biggest > 0)[0].tolist():
        room = np.minimum(room, problem.free[:, column] // biggest[column])
    return np.maximum(room, 0)


def _pack(moves: Moves, order: list[int], nodes: np.ndarray) -> Assignment | None:
    """Every pod of ``order`` on ``nodes`` (most room first), or None when one does not fit."""
    state = moves.empty()
    return state if _fill(moves, state, order, nodes, whole=True) else None


def _fill(moves: Moves, state: Assignment, order: list[int], nodes: np.ndarray, whole: bool = False) -> bool:
    """Each pod of ``order`` onto the first node of ``nodes`` by most room that takes it; whether all went (with
    ``whole``, stopping at the first that does not: the domain is refused)."""
    problem = moves.problem
    by_room = nodes[np.lexsort((nodes, -_node_room(moves, state, nodes)))]
    if moves.rules is None and len(nodes) >= SCAN_NODES:
        return _fill_by_scan(moves, state, order, by_room.tolist(), whole)
    inside = np.zeros(len(problem.nodes), dtype=np.bool_)
    inside[nodes] = True
    rank = np.full(len(problem.nodes), np.iinfo(np.int64).max, dtype=np.int64)
    rank[by_room] = np.arange(len(by_room))
    placed = True
    for pod in order:
        fits = moves.fits(state, pod) & inside
        moves.work[0] += moves.node_work  # the first node by room among them
        for _ in range(TRIES):  # the first node by room where the plan still holds with the pod
            if not fits.any():
                break
            node = int(np.argmin(np.where(fits, rank, np.iinfo(np.int64).max)))
            moves.put(state, pod, node)
            if moves.holds(state, [pod]):
                break
            moves.take(state, pod)
            fits[node] = False
        placed &= bool(state.node[pod] >= 0)
        if whole and not placed:
            return False
    return placed


SCAN_NODES = 2_000  # a domain this large is filled by scan: a node checked alone costs what a pass over ~4,000 does


def _fill_by_scan(moves: Moves, state: Assignment, order: list[int], by_room: list[int], whole: bool) -> bool:
    """:func:`_fill` without rules between pods (a pod's fit on a node then depends on that node alone): the same
    first node by room that takes each pod, found by checking the nodes one by one from the first, past those no
    pod still to place fits on any more (their room only shrinks, and so does what the remaining pods ask at
    least) — not a pass over every node per pod (seconds for thousands of pods on 50,000 nodes)."""
    problem = moves.problem
    asks = problem.requests[order] if order else np.zeros((0, len(problem.resources)), dtype=np.int64)
    smallest = np.minimum.accumulate(asks[::-1], axis=0)[::-1]  # per pod: the least the pods from it on ask
    placed, first = True, 0
    for at, pod in enumerate(order):
        least = smallest[at]
        while first < len(by_room) and (
            state.pods_free[by_room[first]] <= 0 or not bool((state.free[by_room[first]] >= least).all())
        ):
            moves.work[0] += FIT_ONE_WORK
            first += 1  # full for every pod still to place
        at_node = moves.first_fitting(state, pod, by_room, first)
        if at_node < len(by_room):
            moves.put(state, pod, by_room[at_node])
        placed &= at_node < len(by_room)
        if whole and not placed:
            return False
    return placed


def _node_room(moves: Moves, state: Assignment, nodes: np.ndarray) -> np.ndarray:
    """Each node's free cpu (when the pods ask some), its pods limit breaking ties."""
    resources = moves.problem.resources
    pods = np.asarray(state.pods_free[nodes], dtype=np.int64)
    if "cpu" not in resources:
        return pods
    return np.asarray(state.free[nodes, resources.index("cpu")] * (1 << 20) + pods, dtype=np.int64)
