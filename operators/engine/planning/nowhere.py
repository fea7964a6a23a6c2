"""Why a pod of a plan fits no node (pure): kube-scheduler's own FailedScheduling message, ``0/N nodes are
available: ...``, counting each node once per reason of the first filter that refuses it, in kube-scheduler's
order — the static filters before NodeResourcesFit (node affinity, taints, bound pods' host ports), the plan's host
ports, NodeResourcesFit with what the plan left, the static filters after it (volumes, a topology key the pod's
rules need), PodTopologySpread and InterPodAffinity with the plan's pods, then netaware's NetworkBandwidth. A node
that passes them all is one where the pod would break a planned pod's affinity or spread."""

from __future__ import annotations

from collections import Counter

import numpy as np

from operators.engine.cluster.kube import filters as kube_filters
from operators.engine.cluster.kube import ports as kube_ports
from operators.engine.planning.moves import Assignment, Moves
from operators.engine.planning.problem import NOT_IN_LAYOUT
from operators.engine.scheduling.network_bandwidth import passing

BREAKS_PLAN = "node(s) would break a planned pod's affinity or topology spread"
NO_BANDWIDTH = "insufficient network bandwidth"


def why_nowhere(moves: Moves, state: Assignment, pod: int) -> str:
    """The message for ``pod`` (not placed) with the plan's pods placed as ``state`` has them."""
    problem, rules = moves.problem, moves.rules
    counts: Counter[str] = Counter()
    early, late = _static(moves, pod)
    rest = problem.eligible[pod].copy()
    for reasons in early.values():
        counts.update(reasons)
    refusals = rules.refusals(pod, state.tally) if rules is not None and state.tally is not None else []
    for reason, refused in refusals:
        if reason == kube_ports.CONFLICT:
            _take(counts, rest, refused, reason)
    short = np.zeros_like(rest)
    too_many = rest & (state.pods_free <= 0)
    counts["Too many pods"] += int(too_many.sum())
    short |= too_many
    for column, resource in enumerate(problem.resources):
        missing = rest & (state.free[:, column] < problem.requests[pod, column])
        counts[f"Insufficient {resource}"] += int(missing.sum())
        short |= missing
    rest &= ~short
    for node, reasons in late.items():  # refused by a static filter after NodeResourcesFit, and not short
        if not short[node]:
            counts.update(reasons)
    for reason, refused in refusals:
        if reason != kube_ports.CONFLICT:
            _take(counts, rest, refused, reason)
    want = (int(problem.demand[pod, 0]), int(problem.demand[pod, 1]))
    if want != (0, 0):
        bandwidth = ~problem.bandwidth_unknown & passing(want, problem.capacity, state.used[:, 0],
                                                         state.used[:, 1], problem.accounting)  # fmt: skip
        _take(counts, rest, ~bandwidth, NO_BANDWIDTH)
    counts[BREAKS_PLAN] += int(rest.sum())
    return kube_filters.unavailable(len(problem.nodes), counts)


def _take(counts: Counter[str], rest: np.ndarray, refused: np.ndarray, reason: str) -> None:
    """Count the ``rest`` nodes ``refused`` refuses under ``reason`` and leave them out of ``rest``."""
    hit = rest & refused
    counts[reason] += int(hit.sum())
    rest &= ~hit


Reasons = tuple[str, ...]


def _static(moves: Moves, pod: int) -> tuple[dict[int, Reasons], dict[int, Reasons]]:
    """The nodes the static mask refuses ``pod``, by why: those a filter before NodeResourcesFit refuses, and those
    only a later one does (kept per pod shape: its pods share them)."""
    problem = moves.problem
    refused = np.nonzero(~problem.eligible[pod])[0].tolist()
    shape = int(problem.shapes[pod]) if problem.shapes is not None else -1
    key = (shape, tuple(refused))
    if key not in moves.static_refusals:
        early: dict[int, Reasons] = {}
        late: dict[int, Reasons] = {}
        for node in refused:
            reasons, before = problem.static_reason(pod, node)
            (early if before else late)[node] = reasons
        moves.static_refusals[key] = (early, late)
    return moves.static_refusals[key]


__all__ = ["BREAKS_PLAN", "NOT_IN_LAYOUT", "why_nowhere"]
