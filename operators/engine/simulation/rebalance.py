"""Rebalancing after scheduling (the thesis' KSRS idea, beyond it): a tabu search over single-pod moves
that lowers the thesis objective Σ free² (an even spread of free bandwidth), respecting every filter.

Each iteration takes the best move (most negative change of the objective) from a pod on one of the
``breadth`` fullest nodes to one of the ``breadth`` emptiest nodes that passes NodeResourcesFit, the
pod limit and NetworkBandwidth; a moved pod is tabu for ``tenure`` iterations, so the search may
climb out of a local minimum. The best placement seen is returned, so the objective never rises.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from operators.engine.simulation.cluster import Cluster
from operators.engine.simulation.scenarios import PodShape
from operators.engine.simulation.simulate import feasible, objective, total_capacity


@dataclass(frozen=True)
class Rebalanced:
    cluster: Cluster
    moves: list[tuple[int, int, int]]  # (pod index, from node, to node), net of moves undone
    objective_before: int
    objective_after: int
    seconds: float

    def to_json(self) -> dict[str, int | float]:
        return {
            "moves": len(self.moves),
            "objectiveBefore": self.objective_before,
            "objectiveAfter": self.objective_after,
            "seconds": round(self.seconds, 3),
        }


def rebalance(
    cluster: Cluster,
    pods: Sequence[PodShape],
    accounting: str,
    iterations: int = 2000,
    tenure: int = 7,
    breadth: int = 8,
    patience: int = 100,
) -> Rebalanced:
    started = time.perf_counter()
    state = cluster.copy()
    where = dict(state.placements)
    on_node: dict[int, list[int]] = {}
    for pod, node in where.items():
        on_node.setdefault(node, []).append(pod)
    before = current = best = objective(state, accounting)
    applied: list[tuple[int, int, int]] = []
    best_length = 0
    tabu: dict[int, int] = {}
    since_best = 0
    capacity = total_capacity(state, accounting)
    for iteration in range(iterations):
        free = capacity - state.used_in - state.used_out
        order = np.argsort(free, kind="stable")
        fullest, emptiest_rows = order[:breadth].tolist(), order[::-1][:breadth]
        emptiest = emptiest_rows.tolist()
        move: tuple[int, int, int, int] | None = None  # (delta, pod, from, to)
        for source in fullest:
            seen: set[PodShape] = set()
            for pod in on_node.get(source, ()):
                shape = pods[pod]
                demand = shape.ingress + shape.egress
                if demand == 0 or shape in seen or tabu.get(pod, -1) >= iteration:
                    continue
                seen.add(shape)
                # every filter of the network-aware scheduler, for the candidate targets at once
                allowed = feasible(state, shape, accounting, network_aware=True, rows=emptiest_rows).tolist()
                for target, fits in zip(emptiest, allowed, strict=True):
                    if target == source or not fits:
                        continue
                    delta = 2 * demand * (int(free[source]) - int(free[target])) + 2 * demand * demand
                    if move is None or delta < move[0]:
                        move = (delta, pod, source, target)
        if move is None:
            break
        delta, pod, source, target = move
        _move(state, pods[pod], source, target)
        on_node[source].remove(pod)
        on_node.setdefault(target, []).append(pod)
        where[pod] = target
        applied.append((pod, source, target))
        tabu[pod] = iteration + tenure
        current += delta
        if current < best:
            best, best_length, since_best = current, len(applied), 0
        else:
            since_best += 1
            if since_best >= patience:
                break
    for pod, source, target in reversed(applied[best_length:]):  # back to the best placement seen
        _move(state, pods[pod], target, source)
        where[pod] = source
    state.placements = sorted(where.items())
    start = dict(cluster.placements)
    net = [(pod, start[pod], node) for pod, node in sorted(where.items()) if start[pod] != node]
    after = objective(state, accounting)
    return Rebalanced(state, net, before, after, time.perf_counter() - started)


def _move(cluster: Cluster, shape: PodShape, source: int, target: int) -> None:
    cluster.add(source, shape.cpu, shape.memory, shape.ingress, shape.egress, sign=-1)
    cluster.add(target, shape.cpu, shape.memory, shape.ingress, shape.egress)
