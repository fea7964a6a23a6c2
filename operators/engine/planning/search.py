"""The planner (pure but for its clock): a whole AppGroup's unbound pods placed at a low network cost, feasible
first, better with time.

1. **Greedy**: workloads most tied to what is placed first (the most pod pairs with bound members and the
   workloads taken before; ties dependencies first, then the spec's order; workloads without edges last), each
   pod to the node where it adds the least (penalised) cost, among the nodes it fits on now. Ties go to the node
   with room for most of the pods still to place, then to the node holding most of the AppGroup (so that later
   dependencies can join them), then to a seeded order of the nodes. This is already a feasible plan.
2. **Local search**, until a sweep improves nothing: each planned pod, in a seeded order, moves to its best node
   given every other pod, or swaps with a planned pod on the node it would gain most on when that node is full;
   then groups move together (a node's pods onto one node, or spread over a zone holding AppGroup pods, or two
   nodes' pods onto one), the steps single pods cannot take when each alone would pay more.
3. **Tabu walk**: from that local optimum, steps that may cost more (the best move or swap of a pod not moved
   lately), step 2 after each, the best plan kept.
4. **Restarts** while the budget lasts (at most :data:`RESTARTS` searches): alternately a fresh greedy start under
   another seeded order and the best plan with a fifth of its pods moved at random.

Every step keeps the plan feasible; the best plan seen is returned, so it is never worse than step 1's. One
evaluation of a pod is O(nodes x edges of its workload) with numpy: its cost on every node at once from
per-place and per-node counts of each workload (:func:`Search.node_costs`). Deterministic for a seed when every
search ran to its end within the budget (``converged``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from operators.engine.planning.problem import (
    OVER_LIMIT_PENALTY,
    Bools,
    Edge,
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
        grid = problem.place_cost
        self.cost_diagonal = np.diagonal(grid)[problem.place_of]
        self.above = {  # edge -> (place x place: a pair above its maxNetworkCost, the same per node on its diagonal)
            id(edge): (above, np.diagonal(above)[problem.place_of].astype(np.int64))
            for edge in problem.edges
            if edge.max_cost is not None
            for above in [(grid > edge.max_cost).astype(np.int64)]
        }
        self.linked = np.zeros(len(problem.workloads), dtype=np.bool_)  # workload -> has a dependency edge
        for edge in problem.edges:
            self.linked[[edge.source, edge.target]] = True

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

    def best(self, state: Assignment, pod: int, fits: Bools, remaining: int = 1) -> tuple[int, int]:
        """(node, its added cost) for ``pod`` among the nodes in ``fits``; (-1, 0) when there is none. Ties go to
        the node with room for most of the ``remaining`` pods to place (so that later dependencies can join),
        then to the node holding most of the AppGroup, then to the seeded order."""
        if not fits.any():
            return -1, 0
        added = self.node_costs(state, pod)
        room = np.minimum(self.room(state, pod), remaining)
        presence = state.count_node.sum(axis=0)
        if not self.linked[self.problem.pod_workload[pod]]:
            presence = -presence  # a pod without dependencies costs 0 anywhere: out of the group's way
        scale = self.presence_scale
        score = ((added * scale - room) * scale - presence) * len(self.rank) + self.rank
        score = np.where(fits, score, np.iinfo(np.int64).max)
        node = int(np.argmin(score))
        return node, int(added[node])

    def room(self, state: Assignment, pod: int) -> Ints:
        """How many pods like ``pod`` each node still takes (its pods limit, every resource it asks)."""
        asks = self.problem.requests[pod]
        room = state.pods_free.copy()
        for column in np.nonzero(asks > 0)[0].tolist():
            room = np.minimum(room, state.free[:, column] // asks[column])
        return np.maximum(room, 0)

    def fits(self, state: Assignment, pod: int) -> Bools:
        return self.problem.fits(pod, state.used, state.free, state.pods_free)

    # ---- the two steps -------------------------------------------------------------------------------------

    def greedy(self) -> tuple[Assignment, dict[str, str]]:
        """Step 1: a feasible plan, dependencies first."""
        problem, state = self.problem, self.empty()
        unplaceable = dict(problem.unplaceable)
        remaining = len(problem.pods)
        for workload in self.greedy_order(state):
            for pod in np.nonzero(problem.pod_workload == workload)[0].tolist():
                remaining -= 1
                if problem.pods[pod].key in unplaceable:
                    continue
                fits = self.fits(state, pod)
                node, _ = self.best(state, pod, fits, remaining + 1)
                if node < 0:
                    unplaceable[problem.pods[pod].key] = why_nowhere(problem, pod, state)
                    continue
                self.put(state, pod, node)
        return state, unplaceable

    def greedy_order(self, state: Assignment) -> list[int]:
        """Workloads with pods to place, most tied to what is placed first: each time the one with the most pod
        pairs to bound members and workloads already taken (ties: dependencies first, the spec's order); workloads
        without edges last. (A workload with none to place counts the same taken or not: it is left out.)"""
        problem, pending = self.problem, np.bincount(self.problem.pod_workload, minlength=len(self.problem.workloads))
        placed = state.count_node.sum(axis=1).astype(np.int64)  # bound members per workload
        size, order = pending + placed, [w for w in dependency_order(problem) if pending[w]]
        taken: list[int] = []
        left = [w for w in order if self.linked[w]]
        while left:
            ties = [sum(int(placed[other] if other not in taken else size[other]) for _, other in self.incident[w])
                    for w in left]  # fmt: skip
            chosen = left[int(np.argmax(ties))]
            taken.append(chosen)
            left.remove(chosen)
        return taken + [w for w in order if not self.linked[w]]

    def improve(self, state: Assignment, deadline: Callable[[], bool], groups: bool = True) -> tuple[bool, int]:
        """Step 2 on ``state`` (in place; ``groups``: with the group moves): (converged, sweeps)."""
        planned = [pod for pod in range(len(self.problem.pods)) if state.node[pod] >= 0]
        sweeps = 0
        while planned:
            sweeps += 1
            moved = False
            for pod in self.rng.permutation(planned).tolist():
                if deadline():
                    return False, sweeps
                moved |= self._move(state, pod) or self._swap(state, pod)
            if deadline():
                return False, sweeps
            if groups and not moved:
                moved = self._merge(state, deadline)
            if not moved:
                return True, sweeps
        return True, sweeps

    def tabu(self, state: Assignment, deadline: Callable[[], bool], tenure: int = 3) -> tuple[Assignment, bool]:
        """Step 3, from a local optimum: as many steps as there are planned pods (at least 10), each the
        best move or swap of a pod not moved in the last ``tenure`` steps, even when it costs more (the way out
        of a local optimum that needs two or three steps), then step 2 again; the best plan seen, and whether
        every step ran."""
        best, best_cost = state.copy(), self.objective(state).objective
        planned = np.nonzero(state.node >= 0)[0].tolist()
        moved_at: dict[int, int] = {}
        for step in range(max(10, len(planned))):
            if deadline():
                return best, False
            current = self.objective(state).objective
            choice: tuple[int, int, int, int] | None = None  # (objective, pod, node, other pod or -1)
            for pod in planned:
                if step - moved_at.get(pod, -tenure - 1) <= tenure:
                    continue
                for option in self._options(state, pod, current):
                    if choice is None or option[0] < choice[0]:
                        choice = option
            if choice is None:
                break
            _, pod, node, other = choice
            here = self.take(state, pod)
            if other >= 0:
                self.take(state, other)
                self.put(state, other, here)
                moved_at[other] = step
            self.put(state, pod, node)
            moved_at[pod] = step
            self.improve(state, deadline, groups=False)
            cost = self.objective(state).objective
            if cost < best_cost:
                best, best_cost = state.copy(), cost
        return best, True

    def _options(self, state: Assignment, pod: int, current: int) -> list[tuple[int, int, int, int]]:
        """The best move of ``pod`` to another node it fits on, and its best swap with a pod of another workload
        on the node where it would add least: (objective after, pod, node, the other pod or -1)."""
        problem = self.problem
        here = self.take(state, pod)
        added = self.node_costs(state, pod)
        fits = self.fits(state, pod)
        fits[here] = False
        options = []
        if fits.any():
            node = int(np.argmin(np.where(fits, added, np.iinfo(np.int64).max)))
            options.append((current + int(added[node] - added[here]), pod, node, -1))
        target = int(np.argmin(np.where(problem.eligible[pod], added, np.iinfo(np.int64).max)))
        self.put(state, pod, here)
        if target != here:
            for other in np.nonzero(state.node == target)[0].tolist():
                if problem.pod_workload[other] == problem.pod_workload[pod]:
                    continue
                delta = self.swap_delta(state, pod, other)
                if delta is not None:
                    options.append((current + delta, pod, target, other))
        return options

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
            delta = self.swap_delta(state, pod, other)
            if delta is not None and delta < 0:
                self.take(state, pod)
                self.take(state, other)
                self.put(state, pod, target)
                self.put(state, other, here)
                return True
        return False

    def swap_delta(self, state: Assignment, pod: int, other: int) -> int | None:
        """What trading the nodes of ``pod`` and ``other`` (of two workloads, both planned) changes in the
        objective; None when either does not fit in the other's place. Computed from each one's cost on every
        node with the other's own pair taken out (a dependency graph has no edge from a workload to itself)."""
        here, there = int(state.node[pod]), int(state.node[other])
        problem = self.problem
        if not (
            problem.fits_instead(pod, there, other, state.used, state.free)
            and problem.fits_instead(other, here, pod, state.used, state.free)
        ):
            return None
        cost_pod, cost_other = self.node_costs(state, pod), self.node_costs(state, other)
        before = int(cost_pod[here] + cost_other[there]) - self._pair(pod, here, other, there)
        after = (
            int(cost_pod[there] + cost_other[here])
            - self._pair(pod, there, other, there)
            - self._pair(other, here, pod, here)
            + self._pair(pod, there, other, here)
        )
        return after - before

    def _pair(self, pod: int, at: int, other: int, other_at: int) -> int:
        """The penalised cost between ``pod`` on node ``at`` and ``other`` on node ``other_at`` over the edges
        joining their workloads (either direction)."""
        if at == other_at:
            return 0
        workload, other_workload = self.problem.pod_workload[pod], self.problem.pod_workload[other]
        place, other_place = self.problem.place_of[at], self.problem.place_of[other_at]
        total = 0
        for edge, _ in self.incident[int(workload)]:
            grid = self.penalized[id(edge)]
            if edge.source == workload and edge.target == other_workload:
                total += int(grid[place, other_place])
            elif edge.source == other_workload and edge.target == workload:
                total += int(grid[other_place, place])
        return total

    def _merge(self, state: Assignment, deadline: Callable[[], bool]) -> bool:
        """Pods moved together, the move single pods cannot make when each alone would pay more (two halves of
        a group apart, each holding the other's dependencies): the planned pods with dependencies on one node onto
        the node where they all fit at the least cost, or spread over a zone holding AppGroup pods, or with
        those of another node onto one node."""
        improved = False
        for source in self._holding(state):
            pods = self._linked_on(state, source)
            if not pods or deadline():
                continue
            before = self.objective(state).objective
            if self._relocate(state, pods, self._cheapest(state, pods), before):
                improved = True
                continue
            if any(self._spread(state, pods, place, before) for place in self._places_held(state)):
                improved = True
                continue
            for target in self._neighbours(state, pods):
                if target == source or deadline():
                    continue
                both = pods + self._linked_on(state, target)
                if len(both) > len(pods) and self._relocate(state, both, self._cheapest(state, both), before):
                    improved = True
                    break
        return improved

    def _places_held(self, state: Assignment) -> list[int]:
        return np.nonzero(state.count_place.sum(axis=0))[0].tolist()

    def _spread(self, state: Assignment, pods: list[int], place: int, before: int) -> bool:
        """``pods`` moved into ``place`` (a zone holding AppGroup pods), each in turn to its cheapest node there
        that it fits on, kept when the objective falls below ``before``, else back where they were."""
        homes = [self.take(state, pod) for pod in pods]
        inside = self.problem.place_of == place

        def cheapest_inside(pod: int) -> int:
            fits = self.fits(state, pod) & inside
            return (
                int(np.argmin(np.where(fits, self.node_costs(state, pod), np.iinfo(np.int64).max)))
                if fits.any()
                else -1
            )

        if self._place_all(state, pods, cheapest_inside, before):
            return True
        for pod, home in zip(pods, homes, strict=True):
            self.put(state, pod, home)
        return False

    def _neighbours(self, state: Assignment, pods: list[int]) -> list[int]:
        """The nodes holding pods of the workloads ``pods``'s workloads have edges with."""
        workloads = {other for pod in pods for _, other in self.incident[int(self.problem.pod_workload[pod])]}
        return np.nonzero(state.count_node[sorted(workloads)].sum(axis=0))[0].tolist() if workloads else []

    def _holding(self, state: Assignment) -> list[int]:
        return np.nonzero(state.count_node.sum(axis=0))[0].tolist()

    def _linked_on(self, state: Assignment, node: int) -> list[int]:
        """The planned pods on ``node`` whose workload has a dependency edge (the others cost 0 anywhere)."""
        workloads = self.problem.pod_workload
        return [pod for pod in np.nonzero(state.node == node)[0].tolist() if self.linked[workloads[pod]]]

    def _cheapest(self, state: Assignment, pods: list[int], tries: int = 3) -> list[int]:
        """Up to ``tries`` nodes that could take all of ``pods`` at once, cheapest first (their pairs with
        each other cost 0 there): computed with them taken out."""
        problem = self.problem
        homes = [self.take(state, pod) for pod in pods]
        mask = np.ones(len(problem.nodes), dtype=np.bool_)
        added = np.zeros(len(problem.nodes), dtype=np.int64)
        for pod in pods:
            mask &= problem.eligible[pod]
            added += self.node_costs(state, pod)
        mask &= state.pods_free >= len(pods)
        mask &= np.all(state.free >= problem.requests[pods].sum(axis=0), axis=1)
        for pod, home in zip(pods, homes, strict=True):
            self.put(state, pod, home)
        candidates = np.nonzero(mask)[0]
        order = np.lexsort((self.rank[candidates], added[candidates]))
        return [int(node) for node in candidates[order][:tries]]

    def _relocate(self, state: Assignment, pods: list[int], targets: list[int], before: int) -> bool:
        """``pods`` all onto the first of ``targets`` where they fit and the objective falls below ``before``
        (kept), else back where they were."""
        homes = [self.take(state, pod) for pod in pods]
        for target in targets:

            def onto(pod: int, node: int = target) -> int:
                return node if self.fits(state, pod)[node] else -1

            if self._place_all(state, pods, onto, before):
                return True
        for pod, home in zip(pods, homes, strict=True):
            self.put(state, pod, home)
        return False

    def _place_all(self, state: Assignment, pods: list[int], choose: Callable[[int], int], before: int) -> bool:
        """``pods`` (taken out) each put on the node ``choose`` gives it (-1: none, and the rest are not tried);
        kept when all were placed and the objective fell below ``before``, else taken out again."""
        moved = []
        for pod in pods:
            node = choose(pod)
            if node < 0:
                break
            self.put(state, pod, node)
            moved.append(pod)
        if len(moved) == len(pods) and self.objective(state).objective < before:
            return True
        for pod in moved:
            self.take(state, pod)
        return False

    def shake(self, state: Assignment, rng: np.random.Generator) -> None:
        """A fifth of the planned pods (at least one) each moved to a random node it fits on."""
        planned = np.nonzero(state.node >= 0)[0]
        if not len(planned):
            return
        for pod in rng.choice(planned, size=max(1, len(planned) // 5), replace=False).tolist():
            here = self.take(state, pod)
            fits = np.nonzero(self.fits(state, pod))[0]
            self.put(state, pod, int(rng.choice(fits)) if len(fits) else here)

    def objective(self, state: Assignment) -> PlacedCost:
        """The cost of ``state`` over every pair of the AppGroup (bound members included)."""
        costs = [self.edge_cost(state, edge) for edge in self.problem.edges]
        return PlacedCost(sum(c for c, _ in costs), sum(o for _, o in costs), int((state.node < 0).sum()))

    def edge_cost(self, state: Assignment, edge: Edge) -> tuple[int, int]:
        """The network cost of ``edge``'s pod pairs in ``state``, and how many are above its maxNetworkCost."""
        source, target = state.count_place[edge.source], state.count_place[edge.target]
        here, there = state.count_node[edge.source], state.count_node[edge.target]
        cost = int(source @ self.problem.place_cost @ target - here @ (there * self.cost_diagonal))
        if id(edge) not in self.above:
            return cost, 0
        above, diagonal = self.above[id(edge)]
        return cost, int(source @ above @ target - here @ (there * diagonal))


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


RESTARTS = 8  # searches per plan when time allows: the first from the greedy start, then alternately a fresh
# greedy start under another seeded order and the best plan so far with a fifth of its pods moved at random


def search(
    problem: Problem, seed: int = 0, budget_seconds: float = 0.1, clock: Callable[[], float] = time.perf_counter
) -> SearchResult:
    """Steps 1 and 2 within ``budget_seconds`` (step 1 always runs to the end: a feasible plan first), then up to
    :data:`RESTARTS` - 1 more searches while the budget lasts, keeping the best plan. ``converged``: every search
    ran to its local optimum, so the plan depends on the seed alone."""
    started = clock()

    def deadline() -> bool:
        return clock() - started > budget_seconds

    engine = Search(problem, seed)
    best, unplaceable = engine.greedy()
    greedy = engine.objective(best)
    if greedy.objective == 0 or len(problem.pods) == 1:  # optimal: no pair to gain, or one pod on its best node
        return SearchResult(best.node.copy(), greedy, greedy, True, 0, clock() - started, unplaceable)
    converged, sweeps = engine.improve(best, deadline)
    if (best_cost := engine.objective(best)).objective > 0:
        best, walked = engine.tabu(best, deadline)
        converged, best_cost = converged and walked, engine.objective(best)
    rng = np.random.default_rng([seed, RESTARTS])
    for restart in range(1, RESTARTS):
        if not converged or deadline() or best_cost.objective == 0:
            break
        other = Search(problem, int(rng.integers(2**31)))
        if restart % 2:
            state, missing = other.greedy()
        else:
            state, missing = best.copy(), unplaceable
            other.shake(state, rng)
        done, more = other.improve(state, deadline)
        state, walked = other.tabu(state, deadline)
        converged, sweeps = converged and done and walked, sweeps + more
        if (cost := other.objective(state)).objective < best_cost.objective:
            best, best_cost, unplaceable = state, cost, missing
    return SearchResult(best.node.copy(), best_cost, greedy, converged, sweeps, clock() - started, unplaceable)
