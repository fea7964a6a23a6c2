"""The planner's group moves (pure): pods moved together, the steps single pods cannot take when each alone would
pay more (two halves of a group apart, each holding the other's dependencies)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from operators.engine.planning.moves import Assignment, Moves
from operators.engine.planning.problem import holds

# the nodes a node's pods may join in one group move: those holding most of their partners (all of them made the
# group moves cost most of a 100 ms budget on 100 pods in busy zones, and left two of ten such plans at the baseline)
MERGE_TARGETS = 4


class GroupMoves(Moves):
    """Step 2's group moves (:mod:`.search`)."""

    def merge(self, state: Assignment, deadline: Callable[[], bool]) -> bool:
        """Pods moved together, the move single pods cannot make when each alone would pay more (two halves of
        a group apart, each holding the other's dependencies): the planned pods with dependencies on one node onto
        the node where they all fit at the least cost, or spread over a zone holding AppGroup pods, or with
        those of another node onto one node."""
        improved, before, around = False, self.objective(state).objective, self._around_held(state)
        for source in self._holding(state):
            pods = self._linked_on(state, source)
            if not pods or deadline():
                continue
            if self._relocate(state, pods, self._cheapest(state, pods), before) or any(
                self._spread(state, pods, inside, before) for inside in around
            ):
                improved, before, around = True, self.objective(state).objective, self._around_held(state)
                continue
            for target in self._neighbours(state, pods):
                if target == source or deadline():
                    continue
                both = pods + self._linked_on(state, target)
                if len(both) > len(pods) and self._relocate(state, both, self._cheapest(state, both), before):
                    improved, before, around = True, self.objective(state).objective, self._around_held(state)
                    break
        return improved

    def _around_held(self, state: Assignment) -> list[np.ndarray]:
        """Node masks, for each place holding AppGroup pods: the places at most each of its cost levels away
        short of all of them (its zone; the zones of its region; ...), the nearest first, each mask once."""
        problem = self.problem
        masks: dict[bytes, np.ndarray] = {}  # each once, though several held places share it (a region's zones)
        for place in np.nonzero(state.group_place)[0].tolist():
            costs = problem.place_cost[place]
            for level in np.unique(costs).tolist():
                near = costs <= level
                if near.all():
                    break
                masks.setdefault(near.tobytes(), near)
        return [near[problem.place_of] for near in masks.values()]

    def _spread(self, state: Assignment, pods: list[int], inside: np.ndarray, before: int) -> bool:
        """``pods`` moved onto the nodes ``inside`` (places around one holding AppGroup pods), each in turn to
        its cheapest node there that it fits on, kept when the objective falls below ``before``, else back where
        they were."""
        homes = [self.take(state, pod) for pod in pods]

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
        """The nodes holding pods of the workloads ``pods``'s workloads have edges with: the
        :data:`MERGE_TARGETS` holding most of them (ties: the lower index)."""
        workloads = {other for pod in pods for _, other in self.incident[int(self.problem.pod_workload[pod])]}
        if not workloads:
            return []
        held = state.count_node[sorted(workloads)].sum(axis=0)
        nodes = np.nonzero(held)[0]
        return [int(node) for node in nodes[np.argsort(-held[nodes], kind="stable")][:MERGE_TARGETS]]

    def _holding(self, state: Assignment) -> list[int]:
        return np.nonzero(state.group_node)[0].tolist()

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
        mask &= holds(state.free, problem.requests[pods].sum(axis=0))
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
        if len(moved) == len(pods) and self.objective(state).objective < before and self.holds(state, pods):
            return True
        for pod in moved:
            self.take(state, pod)
        return False
