"""Domain first, then nodes (pure): a placement problem cut down to the nodes of one topology domain.

On a large cluster the search's every step is a pass over all the nodes, although the plan it finds stays in the
smallest domain that holds the group (crossing it costs more than any pair inside). :func:`narrow` keeps only that
domain's nodes and places, so each step costs the domain's size, not the cluster's. It is exact for the plans
inside the domain: the same nodes, free resources, bandwidth and costs, and every bound member of the group (a
problem with bound members outside the domain, or with rules between pods, whose counts span the cluster, is not
narrowed).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from operators.engine.planning.problem import Ints, Problem


def narrowable(problem: Problem, nodes: Ints) -> bool:
    """Whether :func:`narrow` to ``nodes`` keeps every plan inside them exact: no rules between pods, and every
    bound member of the group on one of them."""
    inside = np.zeros(len(problem.nodes), dtype=np.bool_)
    inside[nodes] = True
    return problem.constraints is None and all(bool(inside[node]) for _, _, node in problem.fixed)


def narrow(problem: Problem, nodes: Ints) -> Problem:
    """``problem`` on ``nodes`` only (sorted node indexes; :func:`narrowable` must hold): its node ``i`` is
    ``problem``'s node ``nodes[i]``, and its places are those of ``nodes``."""
    rows = np.asarray(nodes, dtype=np.int64)
    renumber = np.full(len(problem.nodes), -1, dtype=np.int64)
    renumber[rows] = np.arange(len(rows))
    kept = np.unique(problem.place_of[rows])
    place = np.full(len(problem.places), -1, dtype=np.int64)
    place[kept] = np.arange(len(kept))
    return dataclasses.replace(
        problem,
        nodes=[problem.nodes[row] for row in rows.tolist()],
        place_of=place[problem.place_of[rows]],
        places=[problem.places[index] for index in kept.tolist()],
        place_cost=problem.place_cost[np.ix_(kept, kept)],
        eligible=[mask[rows] for mask in problem.eligible],
        free=problem.free[rows],
        pods_free=problem.pods_free[rows],
        capacity=problem.capacity[rows],
        used=problem.used[rows],
        bandwidth_unknown=problem.bandwidth_unknown[rows],
        fixed=[(pod, workload, int(renumber[node])) for pod, workload, node in problem.fixed],
        where=[problem.where[row] for row in rows.tolist()] if problem.where else [],
    )
