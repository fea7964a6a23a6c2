"""The planner's moves (pure): a plan's state (:class:`Assignment`), what it costs (:class:`PlacedCost`), and the
steps every part of the search takes on it (:class:`Moves`): put a pod on a node and take it off again (counts per
workload, node and place; resources, bandwidth and the pods' topology tally kept in step), the nodes a pod fits
on, the cost a pod adds on every node at once, and whether the plan still holds as a whole.

One evaluation of a pod is O(nodes x edges of its workload) with numpy: its cost on every node at once from
per-place and per-node counts of each workload (:meth:`Moves.node_costs`), plus its soft rules' penalty per node
(:mod:`.soft`) when it has some.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from operators.engine.planning.domains import Tally
from operators.engine.planning.problem import (
    OVER_LIMIT_PENALTY,
    Bools,
    Edge,
    Ints,
    Problem,
    incident,
    penalized_costs,
)
from operators.engine.planning.work import (
    BEST_WORK,
    CALL_WORK,
    EDGE_WORK,
    FIT_ONE_WORK,
    FITS_WORK,
    NODE_WORK,
    PUT_WORK,
    ROOM_WORK,
    SWAP_WORK,
)

Refused = dict[int, tuple[str, ...]]  # node -> kube-scheduler's reasons
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
    group_node: Ints  # the AppGroup's pods per node (count_node summed over workloads, kept in step)
    group_place: Ints  # and per place
    tally: Tally | None = None  # the plan's pods per topology domain, when pods have rules between them
    # workload -> its pods' network cost on every node (read-only), kept until a pod of a workload joined to it
    # by an edge moves: the pods of a workload are twins, so one evaluation serves them all, over many steps
    network: dict[int, Ints] = field(default_factory=dict)

    def copy(self) -> Assignment:
        tally = None if self.tally is None else self.tally.copy()
        return Assignment(self.node.copy(), self.count_node.copy(), self.count_place.copy(), self.free.copy(),
                          self.pods_free.copy(), self.used.copy(), self.group_node.copy(), self.group_place.copy(),
                          tally, dict(self.network))  # fmt: skip


@dataclass
class PlacedCost:
    """The cost of a placement: pairs' network cost, pairs above their ``maxNetworkCost``, pods left out, and the
    soft pod constraints' pairs (:mod:`.soft`)."""

    cost: int
    over_limit: int
    unplaced: int
    spread_penalty: int = 0

    @property
    def objective(self) -> int:
        return (self.cost + OVER_LIMIT_PENALTY * self.over_limit + UNPLACED_PENALTY * self.unplaced
                + self.spread_penalty)  # fmt: skip


@dataclass
class Moves:
    """The steps on an :class:`Assignment` of one :class:`Problem` (see the module docstring)."""

    def __init__(self, problem: Problem, seed: int = 0, work: list[int] | None = None):
        self.problem = problem
        self.work = work if work is not None else [0]  # the work done so far, ns (shared by a search's engines)
        self.node_work = NODE_WORK * len(problem.nodes)
        self.fits_work = FITS_WORK + self.node_work
        self.step_work = CALL_WORK + self.node_work
        self.edge_work = EDGE_WORK + self.node_work
        self.rng = np.random.default_rng(seed)
        self.incident = incident(problem)
        # per edge, its place x place grids: one per maxNetworkCost value, shared by the edges that have it
        limits = {edge.max_cost: edge for edge in problem.edges}
        grids = {limit: penalized_costs(problem, edge) for limit, edge in limits.items()}
        turned = {limit: np.ascontiguousarray(grid.T) for limit, grid in grids.items()}
        diagonals = {limit: np.diagonal(grid)[problem.place_of] for limit, grid in grids.items()}
        self.penalized = {id(edge): grids[edge.max_cost] for edge in problem.edges}
        self.diagonal = {id(edge): diagonals[edge.max_cost] for edge in problem.edges}
        # a pair costs from its source's place to its target's (costs need not be symmetric): each end's rows
        self.facing = {(id(edge), end): grids[edge.max_cost] if end == edge.source else turned[edge.max_cost]
                       for edge in problem.edges for end in (edge.target, edge.source)}  # fmt: skip
        nodes = len(problem.nodes)
        self.rank = self.rng.permutation(nodes).astype(np.int64)  # the seeded order of ties
        grid = problem.place_cost
        self.cost_diagonal = np.diagonal(grid)[problem.place_of]
        above = {limit: (high, np.diagonal(high)[problem.place_of].astype(np.int64))
                 for limit in limits if limit is not None for high in [(grid > limit).astype(np.int64)]}  # fmt: skip
        # edge -> (place x place: a pair above its maxNetworkCost, the same per node on its diagonal)
        self.above = {id(edge): above[edge.max_cost] for edge in problem.edges if edge.max_cost is not None}
        # workload -> the workloads whose network costs a move of its pods changes
        self.neighbours = [sorted({other for _, other in self.incident[w]}) for w in range(len(problem.workloads))]
        self.linked = np.zeros(len(problem.workloads), dtype=np.bool_)  # workload -> has a dependency edge
        for edge in problem.edges:
            self.linked[[edge.source, edge.target]] = True
        self.rules = problem.constraints
        # why_nowhere's static refusals per (pod shape, refused nodes)
        self.static_refusals: dict[tuple[int, tuple[int, ...]], tuple[Refused, Refused]] = {}
        if self.rules is not None:  # a pod with soft rules costs something alone: it is "linked" to the others
            shapes = self.rules.shape_of
            for pod in range(len(problem.pods)):
                if self.rules.soft.concerns(int(shapes[pod])):
                    self.linked[problem.pod_workload[pod]] = True

    def empty(self) -> Assignment:
        problem = self.problem
        workloads, nodes, places = len(problem.workloads), len(problem.nodes), len(problem.places)
        count_node = np.zeros((workloads, nodes), dtype=np.int64)
        count_place = np.zeros((workloads, places), dtype=np.int64)
        for _, workload, node in problem.fixed:
            count_node[workload, node] += 1
            count_place[workload, problem.place_of[node]] += 1
        return Assignment(np.full(len(problem.pods), -1, dtype=np.int64), count_node, count_place,
                          problem.free.copy(), problem.pods_free.copy(), problem.used.copy(), count_node.sum(axis=0),
                          count_place.sum(axis=0), self.rules.tally() if self.rules is not None else None)  # fmt: skip

    def put(self, state: Assignment, pod: int, node: int) -> None:
        problem, workload = self.problem, int(self.problem.pod_workload[pod])
        self.work[0] += PUT_WORK
        state.node[pod] = node
        self._count(state, workload, node, 1)
        state.free[node] -= problem.requests[pod]
        state.pods_free[node] -= 1
        state.used[node] += problem.demand[pod]
        if state.tally is not None and self.rules is not None:
            self.rules.add(state.tally, pod, node)

    def take(self, state: Assignment, pod: int) -> int:
        problem, workload, node = self.problem, int(self.problem.pod_workload[pod]), int(state.node[pod])
        self.work[0] += PUT_WORK
        if node >= 0:
            self._count(state, workload, node, -1)
            state.free[node] += problem.requests[pod]
            state.pods_free[node] += 1
            state.used[node] -= problem.demand[pod]
            state.node[pod] = -1
            if state.tally is not None and self.rules is not None:
                self.rules.add(state.tally, pod, node, -1)
        return node

    def _count(self, state: Assignment, workload: int, node: int, step: int) -> None:
        """A pod of ``workload`` added to (``step`` 1) or taken from (-1) ``node``'s counts and the group's totals;
        the kept network costs of the workloads joined to it by an edge are stale from then on."""
        place = self.problem.place_of[node]
        state.count_node[workload, node] += step
        state.count_place[workload, place] += step
        state.group_node[node] += step
        state.group_place[place] += step
        for other in self.neighbours[workload]:
            state.network.pop(other, None)

    def node_costs(self, state: Assignment, pod: int) -> Ints:
        """What pod ``pod`` adds to the penalised cost on each node, the others where ``state`` has them (the pod
        itself not counted: a workload has no edge to itself, so it is the same taken out or in place). The
        network part is its workload's, computed once until a neighbour moves (:attr:`Assignment.network`);
        a computation counts its work per node. Read-only: add to a copy."""
        problem = self.problem
        workload = int(problem.pod_workload[pod])
        total = state.network.get(workload)
        self.work[0] += CALL_WORK  # a workload's network cost already computed saves the per-node work only
        if total is None:
            self.work[0] += self.node_work
            total = np.zeros(len(problem.nodes), dtype=np.int64)
            for edge, other in self.incident[workload]:
                total += (self.facing[id(edge), workload] @ state.count_place[other])[problem.place_of]
                total -= state.count_node[other] * self.diagonal[id(edge)]  # pairs on one node: 0, not the zone's
            total.flags.writeable = False
            state.network[workload] = total
        rules = self.rules
        if rules is not None and state.tally is not None:
            shape = int(rules.shape_of[pod])
            if rules.soft.concerns(shape):
                self.work[0] += self.step_work
                total = total + rules.soft.node_penalty(shape, state.tally, rules.domains)
        return total

    def best(self, state: Assignment, pod: int, fits: Bools, remaining: int = 1) -> tuple[int, int]:
        """(node, its added cost) for ``pod`` among the nodes in ``fits``; (-1, 0) when there is none. Ties go to
        the node whose place (zone) holds most of the AppGroup, then to the node with room for most of the
        ``remaining`` pods to place (so that later dependencies can join), then to the node holding most of the
        AppGroup, then to the place with room for most pods like it, then to the seeded order: a pod whose
        partners are not placed yet costs 0 anywhere, and it goes where they can join it — with the group, else
        where there is most room (a group planned in parts, as kube-scheduler asks the extender about its pods,
        grows from its first pods)."""
        if not fits.any():
            return -1, 0
        added = self.node_costs(state, pod)
        self.work[0] += BEST_WORK + 2 * self.node_work  # the minimum among the nodes that fit, and the ties
        first = np.where(fits, added, np.iinfo(np.int64).max)
        tied = first == first.min()
        if np.count_nonzero(tied) > 1:  # the tie keys, each computed only while nodes are still tied
            place_of = self.problem.place_of
            room = self.room(state, pod)
            away = -1 if not self.linked[self.problem.pod_workload[pod]] else 1  # costs 0 anywhere: out of the way
            keys = (
                lambda: away * state.group_place[place_of],
                lambda: np.minimum(room, remaining),
                lambda: away * state.group_node,
                lambda: np.bincount(place_of, weights=room * fits, minlength=len(self.problem.places))[place_of],
            )
            for key in keys:
                self.work[0] += self.node_work  # a pass over the nodes
                values = key()
                tied &= values == values[tied].max()
                if np.count_nonzero(tied) == 1:
                    break
        node = int(np.argmin(np.where(tied, self.rank, np.iinfo(np.int64).max)))
        return node, int(added[node])

    def room(self, state: Assignment, pod: int) -> Ints:
        """How many pods like ``pod`` each node still takes (its pods limit, every resource it asks)."""
        asks = self.problem.requests[pod]
        self.work[0] += ROOM_WORK + self.node_work
        room = state.pods_free.copy()
        for column in np.nonzero(asks > 0)[0].tolist():
            room = np.minimum(room, state.free[:, column] // asks[column])
        return np.maximum(room, 0)

    def fits(self, state: Assignment, pod: int) -> Bools:
        """The nodes ``pod`` (not placed) fits on: resources, bandwidth, and its rules between pods (work: one
        pass over the nodes, every resource column)."""
        self.work[0] += self.fits_work
        ok = self.problem.fits(pod, state.used, state.free, state.pods_free)
        rules = self.rules
        if rules is not None and state.tally is not None and rules.active(pod):
            ok &= rules.allowed(pod, state.tally)
        return ok

    def first_fitting(self, state: Assignment, pod: int, nodes: list[int], start: int = 0) -> int:
        """The position in ``nodes`` of the first node from ``start`` that ``pod`` fits on (no rules between pods:
        each node checked alone, :data:`FIT_ONE_WORK` each); ``len(nodes)`` when none."""
        at = start
        while at < len(nodes):
            self.work[0] += FIT_ONE_WORK
            if self.problem.fits_on(pod, nodes[at], state.used, state.free, state.pods_free):
                break
            at += 1
        return at

    def holds(self, state: Assignment, pods: list[int]) -> bool:
        """Whether every planned pod whose rules count ``pods`` (just moved) still passes them (the plan holds as a
        whole: :meth:`~.constraints.PlanConstraints.broken`)."""
        rules = self.rules
        if rules is None or state.tally is None or not rules.constrained:
            return True
        return not rules.broken(state.tally, {int(rules.shape_of[pod]) for pod in pods})

    def place(self, state: Assignment, pod: int, fits: Bools, remaining: int = 1, tries: int = 16) -> int:
        """``pod`` onto its best node of ``fits`` (:meth:`best`) where the plan still holds; the next best when it
        does not, up to ``tries`` nodes; -1 (not placed) when none."""
        fits = fits.copy()
        for _ in range(tries):
            node, _ = self.best(state, pod, fits, remaining)
            if node < 0:
                return -1
            self.put(state, pod, node)
            if self.holds(state, [pod]):
                return node
            self.take(state, pod)
            fits[node] = False
        return -1

    def _undo(self, state: Assignment, pod: int, home: int, other: int, there: int) -> None:
        """``pod`` back to ``home`` from ``there`` (and ``other``, when not -1, back to ``there``)."""
        self.take(state, pod)
        if other >= 0:
            self.take(state, other)
            self.put(state, other, there)
        self.put(state, pod, home)

    def swap_delta(self, state: Assignment, pod: int, other: int, cost_pod: Ints | None = None) -> int | None:
        """What trading the nodes of ``pod`` and ``other`` (of two workloads, both planned) changes in the
        objective; None when either does not fit in the other's place. Computed from each one's cost on every
        node with the other's own pair taken out (a dependency graph has no edge from a workload to itself);
        ``cost_pod``: ``pod``'s, when the caller has it."""
        here, there = int(state.node[pod]), int(state.node[other])
        problem = self.problem
        self.work[0] += SWAP_WORK
        if not (
            problem.fits_instead(pod, there, other, state.used, state.free)
            and problem.fits_instead(other, here, pod, state.used, state.free)
        ):
            return None
        if self.rules is not None:
            return self._tried_swap(state, pod, other)
        cost_pod = self.node_costs(state, pod) if cost_pod is None else cost_pod
        cost_other = self.node_costs(state, other)
        before = int(cost_pod[here] + cost_other[there]) - self._pair(pod, here, other, there)
        after = (
            int(cost_pod[there] + cost_other[here])
            - self._pair(pod, there, other, there)
            - self._pair(other, here, pod, here)
            + self._pair(pod, there, other, here)
        )
        return after - before

    def _tried_swap(self, state: Assignment, pod: int, other: int) -> int | None:
        """:meth:`swap_delta` by making the trade and undoing it, when pods have rules between them (their
        penalties and constraints are not pairwise): None when a rule refuses it."""
        here, there = int(state.node[pod]), int(state.node[other])
        touched = {int(self.problem.pod_workload[pod]), int(self.problem.pod_workload[other])}
        before = self._touching(state, touched)
        self.take(state, pod)
        self.take(state, other)
        allowed = bool(self.fits(state, pod)[there])
        if allowed:
            self.put(state, pod, there)
            allowed = bool(self.fits(state, other)[here])
            if allowed:
                self.put(state, other, here)
                after = self._touching(state, touched)
                self.take(state, other)
            self.take(state, pod)
        self.put(state, pod, here)
        self.put(state, other, there)
        return after - before if allowed else None

    def _touching(self, state: Assignment, workloads: set[int]) -> int:
        """The part of the objective a trade between pods of ``workloads`` can change: their edges' penalised cost
        and the soft rules' penalty (the other edges and the pods left out stay as they are)."""
        edges = {id(edge): edge for workload in workloads for edge, _ in self.incident[workload]}
        return self._cost_over(state, list(edges.values())).objective

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

    def objective(self, state: Assignment) -> PlacedCost:
        """The cost of ``state`` over every pair of the AppGroup (bound members included); work: EDGE_WORK and
        a pass over the nodes per edge."""
        return self._cost_over(state, self.problem.edges, int((state.node < 0).sum()))

    def _cost_over(self, state: Assignment, edges: list[Edge], unplaced: int = 0) -> PlacedCost:
        """``edges``' pairs in ``state`` and the soft rules' penalty, with ``unplaced`` pods left out."""
        self.work[0] += self.edge_work * max(1, len(edges))
        costs = [self.edge_cost(state, edge) for edge in edges]
        soft = self.rules.soft.penalty(state.tally) if self.rules is not None and state.tally is not None else 0
        return PlacedCost(sum(c for c, _ in costs), sum(o for _, o in costs), unplaced, soft)

    def edge_cost(self, state: Assignment, edge: Edge) -> tuple[int, int]:
        """The network cost of ``edge``'s pod pairs in ``state``, and how many are above its maxNetworkCost: the
        pairs by place, less those on one node (counted at the place's own cost, which one node does not pay);
        only the places and nodes that hold both workloads' pods are read (a group holds few of them)."""
        source, target = state.count_place[edge.source], state.count_place[edge.target]
        origins, ends = np.flatnonzero(source), np.flatnonzero(target)
        if not len(origins) or not len(ends):
            return 0, 0
        here, there = state.count_node[edge.source], state.count_node[edge.target]
        shared = np.flatnonzero(here)
        shared = shared[there[shared] > 0]
        pairs = here[shared] * there[shared]
        sums = source[origins], target[ends]
        cost = int(sums[0] @ self.problem.place_cost[np.ix_(origins, ends)] @ sums[1])
        cost -= int(pairs @ self.cost_diagonal[shared])
        if id(edge) not in self.above:
            return cost, 0
        above, diagonal = self.above[id(edge)]
        return cost, int(sums[0] @ above[np.ix_(origins, ends)] @ sums[1]) - int(pairs @ diagonal[shared])
