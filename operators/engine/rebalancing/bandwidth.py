"""The rebalancer's bandwidth moves (pure): pods asking for bandwidth moved where the simulated kube-scheduler +
extender puts their replacement, when that evens out free bandwidth (rule 2 of :mod:`.rebalance`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from operators.api import keys
from operators.api.config.scheduler import IN_TREE_FILTERS, RESOURCES_FIT
from operators.engine.cluster.fit import placement_reasons
from operators.engine.cluster.objects import Pod
from operators.engine.rebalancing.model import Cycle, Move, Rebalance
from operators.engine.rebalancing.safety import workload_of
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.schedule import schedule


def bandwidth_moves(cycle: Cycle, result: Rebalance) -> None:
    weight = cycle.args.weights.bandwidth_balance
    used_workloads = {move.workload for move in cycle.moves}
    while cycle.left > 0:
        balance = cycle.balance
        fullest = sorted(
            (node for node, row in balance.row.items() if balance.known[row]),
            key=lambda node: (float(np.sum(balance.free[balance.row[node]])), node),
        )[: cycle.args.breadth]
        best: tuple[float, str, Move] | None = None
        seen: set[tuple[str, str]] = set()
        for source in fullest:
            for pod in sorted(cycle.snapshot.pods_by_node.get(source, ()), key=lambda p: p.key):
                workload = workload_of(pod)
                if (workload, source) in seen or keys.APPGROUP_LABEL in pod.labels:
                    continue
                seen.add((workload, source))
                if not np.any(balance.demand(pod)) or not cycle.allowed(pod, workload, source, used_workloads):
                    continue
                target = _scheduled(cycle, pod)
                if target is None or target == source or (workload, target) in cycle.history.missed:
                    continue
                if not cycle.fits_ceiling(pod, target):
                    continue
                change = balance.delta(pod, source, target)
                gain = -weight * change
                if gain < cycle.args.min_gain_per_move:
                    continue
                total = balance.total()
                move = Move(pod, workload, source, target, "", gain, imbalance=(total, total + change))
                if best is None or (-gain, pod.key) < (-best[0], best[1]):
                    best = (gain, pod.key, move)
        if best is None:
            return
        cycle.apply(best[2])
        used_workloads.add(best[2].workload)
    if not cycle.left:
        result.note = result.note or "the cycle's move budget is spent"


def _scheduled(cycle: Cycle, pod: Pod) -> str | None:
    """Where the simulated kube-scheduler + extender puts ``pod``'s replacement on the cluster without it:
    kube-scheduler's default filters (the engine's pipeline: inter-pod affinity, spread, ports and volumes
    included) and the extender's filters and scores as ``config`` has them."""
    replacement = pod.on_node("")
    others = replace(cycle.snapshot, pods=tuple(p for p in cycle.snapshot.pods if p.key != pod.key))
    index = ClusterIndex.build(others)
    allowed = [node for node in others.nodes if not placement_reasons(replacement, node)]
    if not allowed:
        return None
    config = cycle.config
    if RESOURCES_FIT not in config.filters:  # the extender's configuration: kube-scheduler's filters put back first
        config = replace(config, filters=(*IN_TREE_FILTERS, *config.filters))
    table = index.table_of(allowed, config.bandwidth.default_node_bandwidth)
    return schedule(replacement, index, config, table=table, detail=False).selected
