"""The planner (pure but for its clock): a whole AppGroup's unbound pods placed at a low network cost, feasible
first, better with time.

1. **Greedy, dependencies first**: workloads in dependency order (a workload after those it depends on; ties and
   cycles by spec order), each pod to the node where it adds the least (penalised) cost to the pairs already
   placed — bound members and earlier pods of the plan — among the nodes it fits on now. Ties go to the node
   holding most of the AppGroup (so later dependencies can join them on one node), then to a seeded order of the
   nodes. This is already a feasible plan.
2. **Local search**, until a sweep improves nothing or the budget is spent: each planned pod, in a seeded order,
   moves to its best node given every other pod; when a node it would gain by is full, it swaps with a planned
   pod there if that lowers the total. Every step keeps the plan feasible and lowers the objective, so the plan is
   never worse than step 1's.

One evaluation is O(pods + nodes x edges of the pod's workload) with numpy: the cost of a pod on every node at
once from per-place and per-node counts of each workload (:func:`node_costs`). Deterministic for a seed when the
search converges within the budget (``converged``), which it does on every instance of the tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from operators.engine.planning.problem import (
    OVER_LIMIT_PENALTY,
    Bools,
    Ints,
    Problem,
    incident,
    penalized_costs,
)

UNPLACED_PENALTY = 10**9  # a pod left out weighs more than any cost: feasibility first


@dataclass
class Assignment:
    """The search's state: where each planned pod is (-1: nowhere), per-workload counts per node and per place
    (bound members included), and what the nodes have left."""

    node: Ints
    count_node: Ints  # workload x node
    count_place: Ints  # workload x place
    free: Ints
    pods_free: Ints
    used: Ints

    def copy(self) -> Assignment:
        return Assignment(*(array.copy() for array in vars(self).values()))


@dataclass
class PlacedCost:
    """The cost of a placement: pairs' network cost, pairs above their ``maxNetworkCost``, pods left out."""

    cost: int
    over_limit: int
    unplaced: int

    @property
    def objective(self) -> int:
        return self.cost + OVER_LIMIT_PENALTY * self.over_limit + UNPLACED_PENALTY * self.unplaced


@dataclass
class SearchResult:
    assignment: Ints  # pod -> node index (-1: left out)
    cost: PlacedCost
    greedy: PlacedCost
    converged: bool
    sweeps: int
    seconds: float
    unplaceable: dict[str, str] = field(default_factory=dict)


class Search:
    """Steps 1 and 2 of the module docstring over one :class:`Problem`."""

    def __init__(self, problem: Problem, seed: int = 0):
        self.problem = problem
        self.rng = np.random.default_rng(seed)
        self.incident = incident(problem)
        self.penalized = {id(edge): penalized_costs(problem, edge) for edge in problem.edges}
        self.diagonal = {key: np.diagonal(grid)[problem.place_of] for key, grid in self.penalized.items()}
        nodes = len(problem.nodes)
        self.rank = self.rng.permutation(nodes).astype(np.int64)  # the seeded order of ties
        self.presence_scale = len(problem.pods) + len(problem.fixed) + 1

    def empty(self) -> Assignment:
        problem = self.problem
        workloads, nodes, places = len(problem.workloads), len(problem.nodes), len(problem.places)
        count_node = np.zeros((workloads, nodes), dtype=np.int64)
        count_place = np.zeros((workloads, places), dtype=np.int64)
        for _, workload, node in problem.fixed:
            count_node[workload, node] += 1
            count_place[workload, problem.place_of[node]] += 1
        return Assignment(
            np.full(len(problem.pods), -1, dtype=np.int64),
            count_node,
            count_place,
            problem.free.copy(),
            problem.pods_free.copy(),
            problem.used.copy(),
        )

    # ---- moves ---------------------------------------------------------------------------------------------

    def put(self, state: Assignment, pod: int, node: int) -> None:
        problem, workload = self.problem, int(self.problem.pod_workload[pod])
        state.node[pod] = node
        state.count_node[workload, node] += 1
        state.count_place[workload, problem.place_of[node]] += 1
        state.free[node] -= problem.requests[pod]
        state.pods_free[node] -= 1
        state.used[node] += problem.demand[pod]

    def take(self, state: Assignment, pod: int) -> int:
        problem, workload, node = self.problem, int(self.problem.pod_workload[pod]), int(state.node[pod])
        if node >= 0:
            state.count_node[workload, node] -= 1
            state.count_place[workload, problem.place_of[node]] -= 1
            state.free[node] += problem.requests[pod]
            state.pods_free[node] += 1
            state.used[node] -= problem.demand[pod]
            state.node[pod] = -1
        return node

    def node_costs(self, state: Assignment, pod: int) -> Ints:
        """What pod ``pod`` adds to the penalised cost on each node, the others where ``state`` has them (the pod
        itself not counted: take it out first)."""
        problem = self.problem
        total = np.zeros(len(problem.nodes), dtype=np.int64)
        for edge, other in self.incident[int(problem.pod_workload[pod])]:
            grid = self.penalized[id(edge)]
            total += (grid @ state.count_place[other])[problem.place_of]
            total -= state.count_node[other] * self.diagonal[id(edge)]  # pairs on one node: 0, not the zone's cost
        return total

    def best(self, state: Assignment, pod: int, fits: Bools) -> tuple[int, int]:
        """(node, its added cost) for ``pod`` among the nodes in ``fits``; (-1, 0) when there is none."""
        if not fits.any():
            return -1, 0
        added = self.node_costs(state, pod)
        presence = state.count_node.sum(axis=0)
        score = (added * self.presence_scale - presence) * len(self.rank) + self.rank
        score = np.where(fits, score, np.iinfo(np.int64).max)
        node = int(np.argmin(score))
        return node, int(added[node])

    def fits(self, state: Assignment, pod: int) -> Bools:
        return self.problem.fits(pod, state.used, state.free, state.pods_free)

    # ---- the two steps -------------------------------------------------------------------------------------

    def greedy(self) -> tuple[Assignment, dict[str, str]]:
        """Step 1: a feasible plan, dependencies first."""
        problem, state = self.problem, self.empty()
        unplaceable = dict(problem.unplaceable)
        for workload in dependency_order(problem):
            for pod in np.nonzero(problem.pod_workload == workload)[0].tolist():
                if problem.pods[pod].key in unplaceable:
                    continue
                fits = self.fits(state, pod)
                node, _ = self.best(state, pod, fits)
                if node < 0:
                    unplaceable[problem.pods[pod].key] = why_nowhere(problem, pod, state)
                    continue
                self.put(state, pod, node)
        return state, unplaceable

    def improve(self, state: Assignment, deadline: Callable[[], bool]) -> tuple[bool, int]:
        """Step 2 on ``state`` (in place): (converged, sweeps)."""
        planned = [pod for pod in range(len(self.problem.pods)) if state.node[pod] >= 0]
        sweeps = 0
        while planned:
            sweeps += 1
            moved = False
            for pod in self.rng.permutation(planned).tolist():
                if deadline():
                    return False, sweeps
                moved |= self._move(state, pod) or self._swap(state, pod)
            if not moved:
                return True, sweeps
        return True, sweeps

    def _move(self, state: Assignment, pod: int) -> bool:
        here = self.take(state, pod)
        fits = self.fits(state, pod)
        added = self.node_costs(state, pod)
        node, cost = self.best(state, pod, fits)
        if node >= 0 and cost < added[here]:
            self.put(state, pod, node)
            return True
        self.put(state, pod, here)
        return False

    def _swap(self, state: Assignment, pod: int) -> bool:
        """``pod`` trades places with a planned pod on the node where it would add least, when that node is full
        for it and the trade lowers the total."""
        problem = self.problem
        here = self.take(state, pod)
        added = self.node_costs(state, pod)
        wanted = np.where(problem.eligible[pod], added, np.iinfo(np.int64).max)
        target = int(np.argmin(wanted))
        self.put(state, pod, here)
        if target == here or added[target] >= added[here]:
            return False
        for other in np.nonzero(state.node == target)[0].tolist():
            if problem.pod_workload[other] == problem.pod_workload[pod]:
                continue  # the same workload: nothing to gain
            before = self.objective(state).objective
            self.take(state, pod)
            self.take(state, other)
            if self.fits(state, pod)[target] and self.fits(state, other)[here]:
                self.put(state, pod, target)
                if self.fits(state, other)[here]:
                    self.put(state, other, here)
                    if self.objective(state).objective < before:
                        return True
                    self.take(state, other)
                self.take(state, pod)
            self.put(state, pod, here)
            self.put(state, other, target)
        return False

    def objective(self, state: Assignment) -> PlacedCost:
        """The cost of ``state`` over every pair of the AppGroup (bound members included)."""
        problem = self.problem
        cost = over = 0
        for edge in problem.edges:
            grid = problem.place_cost
            source, target = state.count_place[edge.source], state.count_place[edge.target]
            same_node = state.count_node[edge.source] * state.count_node[edge.target]
            diagonal = np.diagonal(grid)[problem.place_of]
            cost += int(source @ grid @ target) - int(same_node @ diagonal)
            if edge.max_cost is not None:
                above = grid > edge.max_cost
                over += int(source @ above @ target) - int(same_node @ np.diagonal(above)[problem.place_of])
        return PlacedCost(cost, over, int((state.node < 0).sum()))


def dependency_order(problem: Problem) -> list[int]:
    """Workloads, each after those it depends on (Kahn's order over the spec's edges; ties and cycles: spec
    order)."""
    depends = {
        w: {e.target for e in problem.edges if e.source == w and e.target != w} for w in range(len(problem.workloads))
    }
    done: list[int] = []
    left = list(range(len(problem.workloads)))
    while left:
        ready = [w for w in left if depends[w] <= set(done)] or left[:1]  # a cycle: the first of it goes
        done.append(ready[0])
        left.remove(ready[0])
    return done


def why_nowhere(problem: Problem, pod: int, state: Assignment) -> str:
    """Why ``pod`` fits no node with what the plan left: the number of nodes each filter rejects."""
    eligible = problem.eligible[pod]
    reasons = [f"{int((~eligible).sum())} node(s) rejected by taints, node affinity or unschedulable"]
    rest = eligible
    if (rest & (state.pods_free <= 0)).any():
        reasons.append(f"{int((rest & (state.pods_free <= 0)).sum())} Too many pods")
    for column, resource in enumerate(problem.resources):
        short = rest & (state.free[:, column] < problem.requests[pod, column])
        if short.any():
            reasons.append(f"{int(short.sum())} Insufficient {resource}")
    want = (int(problem.demand[pod, 0]), int(problem.demand[pod, 1]))
    if want != (0, 0):
        from operators.engine.scheduling.network_bandwidth import passing

        short = rest & ~passing(want, problem.capacity, state.used[:, 0], state.used[:, 1], problem.accounting)
        if short.any():
            reasons.append(f"{int(short.sum())} insufficient network bandwidth")
    return f"0/{len(problem.nodes)} nodes fit: " + ", ".join(r for r in reasons if not r.startswith("0 "))


def search(
    problem: Problem, seed: int = 0, budget_seconds: float = 0.1, clock: Callable[[], float] = time.perf_counter
) -> SearchResult:
    """Steps 1 and 2 within ``budget_seconds`` (step 1 always runs to the end: a feasible plan first)."""
    started = clock()
    engine = Search(problem, seed)
    state, unplaceable = engine.greedy()
    greedy = engine.objective(state)
    converged, sweeps = engine.improve(state, lambda: clock() - started > budget_seconds)
    final = engine.objective(state)
    return SearchResult(state.node.copy(), final, greedy, converged, sweeps, clock() - started, unplaceable)
