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
3. **The field's placement as a start**: the smallest topology domain that holds the group, packed BestFit
   (:mod:`.baseline`), improved by step 2 — so no plan is worse than it, whatever the budget; then step 1 inside
   that domain (domain first, then nodes, dependent pods together), improved the same way.
4. **Tabu walk** from each of those three local optima, the cheapest first: steps that may cost more (the best
   move or swap of a pod not moved lately), the best plan kept. Every start reaches its local optimum before
   any walk (a walk costs tens of sweeps; on small groups the optimum is often one sweep from the baseline's
   start), and no step 2 runs after each step: the next step is already the best move there is, and those
   sweeps cost four fifths of a walk's work for plans no better (bench_plan's random DAG at 100 ms: its
   optimum on five of seeds 0-5, 1.08x it on the sixth, where it was 1.06-1.21x).
5. **Restarts** while the budget lasts (at most :data:`RESTARTS` searches): alternately a fresh greedy start under
   another seeded order and the best plan with a fifth of its pods moved at random.

Every step keeps the plan feasible; the best plan seen is returned, so it is never worse than step 1's. One
evaluation of a pod is O(nodes x edges of its workload) with numpy: its cost on every node at once from
per-place and per-node counts of each workload (:func:`Search.node_costs`). The budget is counted in work (those
evaluations, weighed by the nodes), not in time: the same snapshot, seed and budget give the same plan on an idle
and on a busy machine, within a wall-clock cap.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from operators.engine.planning.baseline import candidates, smallest_domain
from operators.engine.planning.group_moves import GroupMoves
from operators.engine.planning.moves import UNPLACED_PENALTY, Assignment, PlacedCost
from operators.engine.planning.narrow import narrow, narrowable
from operators.engine.planning.nowhere import why_nowhere
from operators.engine.planning.packing import packed_start
from operators.engine.planning.problem import Bools, Ints, Problem

__all__ = ["UNPLACED_PENALTY", "Assignment", "PlacedCost", "Search", "SearchResult", "search"]


@dataclass
class SearchResult:
    assignment: Ints  # pod -> node index (-1: left out)
    cost: PlacedCost
    greedy: PlacedCost
    converged: bool
    sweeps: int
    seconds: float
    unplaceable: dict[str, str] = field(default_factory=dict)
    baseline: PlacedCost | None = None  # the smallest-domain placement's cost (:mod:`.baseline`; None: not needed)
    baseline_level: str = ""


class Search(GroupMoves):
    """Steps 1 to 3 of the module docstring over one :class:`Problem`."""

    # ---- the two steps -------------------------------------------------------------------------------------

    def greedy(
        self, deadline: Callable[[], bool] = lambda: False, inside: Bools | None = None
    ) -> tuple[Assignment, dict[str, str]]:
        """Step 1: a feasible plan, dependencies first (a pod that fits nowhere yet is tried again at the end: its
        required affinity may name pods placed after it; then, while ``deadline`` allows, :meth:`repair`); with
        ``inside``, on those nodes only."""
        problem, state = self.problem, self.empty()
        remaining = len(problem.pods)
        waiting = []
        for workload in self.greedy_order(state):
            pods = [p for p in np.nonzero(problem.pod_workload == workload)[0].tolist()
                    if problem.pods[p].key not in problem.unplaceable]  # fmt: skip
            remaining -= len(pods)
            for at, pod in enumerate(pods):
                if self.rules is None and deadline():  # past the budget: the rest placed without their costs
                    waiting += self.complete(state, pods[at:], inside)
                    break
                if self.place(state, pod, self._fits(state, pod, inside), remaining + len(pods) - at) < 0:
                    waiting.append(pod)
        while waiting:  # a pod whose affinity needs pods placed after it: again, while that places some
            left = [pod for pod in waiting if self.place(state, pod, self._fits(state, pod, inside)) < 0]
            if len(left) == len(waiting):
                break
            waiting = left
        for pod in waiting:
            self.repair(state, pod, deadline)
        return state, self.left_out(state)

    def complete(self, state: Assignment, pods: list[int], inside: Bools | None) -> list[int]:
        """Past the budget, ``pods`` (of one workload; no rules between pods) placed without evaluating their
        network costs: onto the nodes with room for the largest of them, those of the place holding most of the
        group first, then the roomiest, then the seeded order, each node filled before the next — three passes
        over the nodes for the workload (no sort of them all), not per pod. The pods that found no node are
        returned."""
        problem = self.problem
        biggest = pods[int(np.argmax(problem.requests[pods].sum(axis=1)))]
        room = self.room(state, biggest)
        candidates = np.nonzero(self._fits(state, biggest, inside) & (room > 0))[0]
        self.work[0] += self.node_work  # the order's key
        key = (
            (state.group_place[problem.place_of[candidates]].astype(np.int64) << 34)
            | (np.minimum(room[candidates], (1 << 14) - 1) << 20)
            | ((1 << 20) - 1 - np.minimum(self.rank[candidates], (1 << 20) - 1))
        )  # larger first, no two alike
        order = _largest_first(candidates, key, 2 * len(pods) + 16)
        left, at = [], 0
        for pod in pods:
            at = self.first_fitting(state, pod, order, at)
            if at == len(order) < len(candidates):  # the first ones were not enough: the rest, in the same order
                order = _largest_first(candidates, key, len(candidates))
                at = self.first_fitting(state, pod, order, at)
            if at == len(order):
                left.append(pod)
                continue
            self.put(state, pod, order[at])
        return left

    def packed(self, domain: Ints) -> Assignment | None:
        """The dependent pods packed on ``domain``'s nodes (:func:`~.packing.packed_start`), the others placed as
        the greedy start places them; None when the packing does not apply (rules between pods among them), a
        packed pod does not fit where it was packed (its masks, bandwidth, pods limit) or a pod is left out."""
        placed = packed_start(self.problem, domain, self.work) if self.rules is None else None
        if placed is None:
            return None
        state = self.empty()
        for pod, node in placed.items():  # the packing counts one resource only: the rest checked here
            if not self.fits(state, pod)[node]:
                return None
            self.put(state, pod, node)
        for workload in self.greedy_order(state):
            for pod in np.nonzero(self.problem.pod_workload == workload)[0].tolist():
                if pod not in placed and self.place(state, pod, self.fits(state, pod)) < 0:
                    return None
        return state

    def _fits(self, state: Assignment, pod: int, inside: Bools | None) -> Bools:
        fits = self.fits(state, pod)
        return fits if inside is None else fits & inside

    def left_out(self, state: Assignment) -> dict[str, str]:
        """Why each pod ``state`` leaves out fits nowhere (the static reasons first)."""
        problem = self.problem
        missing = dict(problem.unplaceable)
        for pod in np.nonzero(state.node < 0)[0].tolist():
            missing.setdefault(problem.pods[pod].key, why_nowhere(self, state, pod))
        return missing

    def repair(
        self, state: Assignment, pod: int, deadline: Callable[[], bool], tries: int = 256, depth: int = 2
    ) -> bool:
        """``pod``, which fits nowhere now, placed by moving a planned pod: each planned pod in turn (up to
        ``tries``, seeded order) either taken out of its way (``pod`` placed, then the other placed again where it
        fits — or, ``depth`` allowing, itself repaired the same way with ``tries`` / 16) or moved first to one of
        its three best other nodes (a pod that ``pod``'s affinity needs elsewhere), ``pod`` placed after; kept
        when all are placed and the plan holds, else undone. Whether ``pod`` was placed."""
        planned = np.nonzero(state.node >= 0)[0]
        for other in self.rng.permutation(planned)[:tries].tolist():
            if deadline():
                return False
            home = self.take(state, other)
            if self.place(state, pod, self.fits(state, pod)) >= 0:
                if self.place(state, other, self.fits(state, other)) >= 0 or (
                    depth > 1 and self.repair(state, other, deadline, max(1, tries // 16), depth - 1)
                ):
                    return True
                self.take(state, pod)
            fits = self.fits(state, other)
            fits[home] = False
            for _ in range(3):
                if self.place(state, other, fits, tries=1) < 0:
                    break
                if self.place(state, pod, self.fits(state, pod)) >= 0:
                    return True
                fits[self.take(state, other)] = False
            self.put(state, other, home)
        return False

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
            if deadline():
                return False, sweeps
            if not moved:
                moved = self.merge(state, deadline)
            if not moved:
                return not deadline(), sweeps  # the group moves may have stopped for the budget
        return True, sweeps

    def tabu(self, state: Assignment, deadline: Callable[[], bool], tenure: int = 3) -> tuple[Assignment, bool]:
        """Step 3, from a local optimum: as many steps as there are planned pods (at least 10), each the
        best move or swap of a pod not moved in the last ``tenure`` steps, even when it costs more (the way out
        of a local optimum that needs two or three steps); the best plan seen, and whether every step ran. Each
        pod's cost per node is its workload's, computed once until a neighbour moves."""
        if deadline():  # before the copy and the objective (tens of milliseconds on 50,000 nodes)
            return state, False
        best, best_cost = state.copy(), self.objective(state).objective
        planned = np.nonzero(state.node >= 0)[0].tolist()
        moved_at: dict[int, int] = {}
        current = best_cost  # the state's objective, computed after each step
        for step in range(max(10, len(planned))):
            if deadline():
                return best, False
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
            if not self.holds(state, [pod, other] if other >= 0 else [pod]):
                self._undo(state, pod, here, other, node)
                continue
            current = self.objective(state).objective
            if current < best_cost:
                best, best_cost = state.copy(), current
        return best, True

    def _options(self, state: Assignment, pod: int, current: int) -> list[tuple[int, int, int, int]]:
        """The best move of ``pod`` to another node it fits on, and its best swap with a pod of another workload
        on the node where it would add least: (objective after, pod, node, the other pod or -1)."""
        problem = self.problem
        here = self.take(state, pod)
        added = self.node_costs(state, pod)
        fits = self.fits(state, pod)
        fits[here] = False
        self.work[0] += 3 * self.node_work  # the best move, the cheapest node, the pods on it
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
                delta = self.swap_delta(state, pod, other, added)
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
            if self.holds(state, [pod]):
                return True
            self.take(state, pod)
        self.put(state, pod, here)
        return False

    def _swap(self, state: Assignment, pod: int) -> bool:
        """``pod`` trades places with a planned pod on the node where it would add least, when that node is full
        for it and the trade lowers the total."""
        problem = self.problem
        here = self.take(state, pod)
        added = self.node_costs(state, pod)
        self.work[0] += 2 * self.node_work  # the cheapest node, then the pods on it
        wanted = np.where(problem.eligible[pod], added, np.iinfo(np.int64).max)
        target = int(np.argmin(wanted))
        self.put(state, pod, here)
        if target == here or added[target] >= added[here]:
            return False
        for other in np.nonzero(state.node == target)[0].tolist():
            if problem.pod_workload[other] == problem.pod_workload[pod]:
                continue  # the same workload: nothing to gain
            delta = self.swap_delta(state, pod, other, added)
            if delta is not None and delta < 0:
                self.take(state, pod)
                self.take(state, other)
                self.put(state, pod, target)
                self.put(state, other, here)
                if self.holds(state, [pod, other]):
                    return True
                self._undo(state, pod, here, other, target)
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
            if not self.holds(state, [pod]):
                self.take(state, pod)
                self.put(state, pod, here)


def _largest_first(items: Ints, key: Ints, count: int) -> list[int]:
    """The ``count`` items of largest ``key`` (all distinct), largest first: a partial sort of them only."""
    if count < len(items):
        top = np.argpartition(-key, count - 1)[:count]
        return items[top[np.argsort(-key[top])]].tolist()  # type: ignore[no-any-return]
    return items[np.argsort(-key)].tolist()  # type: ignore[no-any-return]


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


SCALE_PODS = 100  # a group larger than this many pods gets a budget in proportion
SCALE_LIMIT = 10  # up to this many budgets (1,000 pods): larger groups are planned inside one domain first
TIME_CAP = 20  # the wall-clock bound of a search, in budgets
RESTARTS = 8  # searches per plan when time allows: the first from the greedy start, then alternately a fresh
# greedy start under another seeded order and the best plan so far with a fifth of its pods moved at random


def budget_scale(pods: int) -> float:
    """How many budgets a group of ``pods`` pods is given: one per :data:`SCALE_PODS`, from 1 to
    :data:`SCALE_LIMIT`."""
    return min(float(SCALE_LIMIT), max(1.0, pods / SCALE_PODS))


def deadline_for(
    work: list[int],
    budget_seconds: float,
    pods: int,
    clock: Callable[[], float] = time.perf_counter,
    spent: int = 0,
) -> Callable[[], bool]:
    """Whether a search of a group of ``pods`` pods has spent its budget: the work its engines add to ``work``
    from now on, after ``spent`` (work done around the search), past ``budget_seconds`` of an idle reference
    machine times :func:`budget_scale`, or :data:`TIME_CAP` times that in wall-clock time."""
    started, scaled, floor = clock(), budget_seconds * budget_scale(pods), work[0] - spent

    def deadline() -> bool:
        return work[0] - floor > scaled * 1e9 or clock() - started > scaled * TIME_CAP

    return deadline


DOMAIN_FIRST_NODES = 10_000  # a cluster this large is planned inside the smallest domain that holds the group
SMALL_PROBLEM = 20_000  # pods x nodes up to which the greedy start is made before the field's placement


def search(
    problem: Problem,
    seed: int = 0,
    budget_seconds: float = 0.1,
    clock: Callable[[], float] = time.perf_counter,
    spent: int = 0,
) -> SearchResult:
    """:func:`search_nodes` on every node; on a cluster of :data:`DOMAIN_FIRST_NODES` nodes or more, first on the
    nodes of the smallest domain whose resources hold the group (:mod:`.narrow`), kept when it places every pod
    there and the field's placement is made in that same domain (so the plan is never worse than it), else the
    search on every node after all. ``spent``: the work done for this plan before the search, counted against
    its budget."""
    started = clock()
    if len(problem.nodes) >= DOMAIN_FIRST_NODES:
        level, nodes = next(candidates(problem), ("cluster", np.arange(len(problem.nodes))))
        if len(nodes) < len(problem.nodes) and narrowable(problem, nodes):
            rows = np.sort(nodes)
            inner = search_nodes(narrow(problem, rows), seed, budget_seconds, clock, spent)
            if inner.unplaceable.keys() == problem.unplaceable.keys() and inner.baseline_level in (level, ""):
                placed = np.where(inner.assignment >= 0, rows[np.maximum(inner.assignment, 0)], -1)
                return dataclasses.replace(inner, assignment=placed, seconds=clock() - started)
    return search_nodes(problem, seed, budget_seconds, clock, spent)


def search_nodes(
    problem: Problem,
    seed: int = 0,
    budget_seconds: float = 0.1,
    clock: Callable[[], float] = time.perf_counter,
    spent: int = 0,
) -> SearchResult:
    """Steps 1 and 2 within the budget (step 1 always runs to the end: a feasible plan first), then the baseline's
    starts and up to :data:`RESTARTS` - 1 more searches while it lasts, keeping the best plan. The budget is work
    (:data:`~.work.CALL_WORK`: ``budget_seconds`` of an idle reference machine, times :func:`budget_scale`),
    so the same snapshot and seed give the same plan whatever the machine's load;
    :data:`TIME_CAP` times it in wall-clock time bounds it on a very slow machine. ``converged``: every search
    ran to its local optimum."""
    started = clock()
    work: list[int] = [0]
    deadline = deadline_for(work, budget_seconds, len(problem.pods), clock, spent)
    engine = Search(problem, seed, work)
    # the field's placement, which no plan is worse than whatever the budget, made first so that the greedy start
    # after it is charged for it (made after the greedy start had spent the budget, it ran past it: 0.2-0.3 s of a
    # 1 s budget for 5,000 pods on 50,000 nodes); on a small problem it costs next to nothing against the budget, so
    # the greedy start goes first there and the field's placement is made only when that start is not already at 0
    # (made first, it was 40 % of the extender's answers for plan-ungated pods, asked about one by one); not with
    # rules between pods, where the field's placement may check every node of a level in vain, nodes by pods
    several = len(problem.pods) > 1  # one pod: its best node, no baseline made
    small = len(problem.pods) * len(problem.nodes) <= SMALL_PROBLEM and problem.constraints is None
    start, level, domain = smallest_domain(engine) if several and not small else (None, "", None)
    best, unplaceable = engine.greedy(deadline)
    greedy = engine.objective(best)
    if several and small and greedy.objective > 0:
        start, level, domain = smallest_domain(engine)
    # optimal: no pair to gain, or one pod on its best node (no baseline made)
    if greedy.objective == 0 or start is None or domain is None:
        return SearchResult(best.node.copy(), greedy, greedy, True, 0, clock() - started, unplaceable)
    # the other starts, made before the improvements spend the budget (made after them, they ran past it: 0.2-0.3 s
    # for a 100 ms plan of 100 pods, the packing most of it): the baseline's zone packed with most pairs on one node
    # while the budget allows
    baseline = engine.objective(start)
    packed = engine.packed(domain) if level == "zone" and not deadline() else None
    converged, sweeps = engine.improve(best, deadline) if not deadline() else (False, 0)
    inside = np.zeros(len(problem.nodes), dtype=np.bool_)
    inside[domain] = True
    best_cost = engine.objective(best) if sweeps else greedy  # no sweep: the greedy start unchanged
    starts = [(best, best_cost)]  # each improved to its local optimum first (cheap), then walked from, the best first
    for kind in ("baseline", "inside", "packed"):  # the baseline's placement, the greedy start inside its domain,
        # and that domain packed with the most pairs on one node (a zone's only, when :mod:`.packing` applies)
        if kind == "packed" and packed is None:
            break
        if best_cost.objective == 0 or (kind == "inside" and len(domain) == len(problem.nodes)):
            break  # nothing left to gain, or the domain is every node: the greedy start again
        begin = start if kind == "baseline" else engine.greedy(deadline, inside)[0] if kind == "inside" else packed
        if begin is None:
            continue
        begun = baseline if kind == "baseline" else engine.objective(begin)  # the baseline's placement: its cost known
        if begun.unplaced <= best_cost.unplaced:
            done, more = engine.improve(begin, deadline) if not deadline() else (False, 0)
            converged, sweeps = converged and done, sweeps + more
            starts.append((begin, engine.objective(begin) if more else begun))
    starts.sort(key=lambda start: start[1].objective)  # stable: the greedy start first on ties
    best, best_cost = starts[0][0].copy(), starts[0][1]  # a copy: the walks move their starts
    for begin, _ in starts:
        if best_cost.objective == 0:
            break
        walked_to, walked = engine.tabu(begin, deadline)
        converged = converged and walked
        if walked_to is not begin and (cost := engine.objective(walked_to)).objective < best_cost.objective:
            best, best_cost = walked_to, cost
    unplaceable = engine.left_out(best)
    rng = np.random.default_rng([seed, RESTARTS])
    for restart in range(1, RESTARTS):
        if not converged or deadline() or best_cost.objective == 0:
            break
        other = Search(problem, int(rng.integers(2**31)), work)
        if restart % 2:
            state, missing = other.greedy(deadline)
        else:
            state, missing = best.copy(), unplaceable
            other.shake(state, rng)
        done, more = other.improve(state, deadline)
        state, walked = other.tabu(state, deadline)
        converged, sweeps = converged and done and walked, sweeps + more
        if (cost := other.objective(state)).objective < best_cost.objective:
            best, best_cost, unplaceable = state, cost, missing
    return SearchResult(best.node.copy(), best_cost, greedy, converged, sweeps, clock() - started, unplaceable,
                        baseline, level)  # fmt: skip
