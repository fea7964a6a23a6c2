"""Why a pod goes where it goes, or nowhere: one line per filter plugin that rejected nodes (pure).

``why_not(result)`` groups each plugin's rejections by their reason (the message before its first ``:``,
the node's own name left out), most nodes first, and says how many of the candidates it rejected, with one
node's full message as the example:

    NetworkBandwidth: 8 of 8 nodes: insufficient ingress bandwidth (n-1: requested 200M bits/s, free 50M)

Numbers of bits/s are written as quantities (``200M``). The lines are what ``netaware explain pod`` prints for
a pod no node fits, and the Warning Event the extender posts on such a pod.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from operators.api.appgroup import AppGroup
from operators.api.config.scheduler import IN_TREE_FILTERS
from operators.engine.cluster.kube import filters as kube_filters
from operators.engine.cluster.objects import Node
from operators.engine.scheduling.network_overhead import SAME_NODE_COST, place_costs
from operators.engine.scheduling.schedule import PASSED, CycleResult

_BITS = re.compile(r"\b(requested|free) (\d+)")
_SUFFIXES = ((10**15, "P"), (10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "k"))


def bits(value: int) -> str:
    """A bits/s figure as a short decimal quantity (``200M``, ``1.5G``)."""
    for size, suffix in _SUFFIXES:
        if value >= size:
            return f"{value / size:.3g}{suffix}"
    return str(value)


def _readable(message: str) -> str:
    return _BITS.sub(lambda match: f"{match.group(1)} {bits(int(match.group(2)))}", message)


# Upstream's words for NetworkOverhead's rejection, and what they mean.
_PLAIN = {
    "does not meet several network requirements from Workload dependencies": (
        "more of its dependencies' placed pods are beyond maxNetworkCost than within it"
    ),
}


def _shape(node: str, message: str) -> str:
    text = message.replace(f"Node {node} ", "").replace(f"node {node} ", "")
    shape = text.split(":", 1)[0].strip()
    return _PLAIN.get(shape, shape)


def why_not(result: CycleResult) -> list[str]:
    """``summary`` of a cycle computed with ``detail`` (its per-node filter verdicts)."""
    rejected: dict[str, dict[str, str]] = {}
    for node, verdicts in result.filters.items():
        for plugin, verdict in verdicts.items():
            if verdict != PASSED:
                rejected.setdefault(plugin, {})[node] = verdict
    return summary(rejected, len(result.filters))


def unavailable(result: CycleResult) -> str:
    """What kube-scheduler's FailedScheduling Event says of a pod no node fits: ``0/N nodes are available:`` and,
    per reason, how many nodes it rejected (:func:`~operators.engine.cluster.kube.filters.unavailable`;
    NodeResourcesFit may give several reasons for a node: ``Insufficient cpu, Insufficient memory``); "" when a node
    fits."""
    if result.selected is not None or not result.filters:
        return ""
    counts: Counter[str] = Counter()
    for verdicts in result.filters.values():
        first = next(((plugin, verdict) for plugin, verdict in verdicts.items() if verdict != PASSED), None)
        if first is None:
            continue
        plugin, verdict = first
        for reason in verdict.split(", ") if plugin in IN_TREE_FILTERS else (verdict,):
            counts[reason] += 1
    return kube_filters.unavailable(len(result.filters), counts)


def summary(rejected: Mapping[str, Mapping[str, str]], candidates: int) -> list[str]:
    """One line per filter plugin of ``rejected`` (plugin -> node -> reason, in filter order) that rejected any
    of the ``candidates`` nodes; empty when none did."""
    lines = []
    for plugin, reasons in rejected.items():
        if not reasons:
            continue
        shapes = Counter(_shape(node, message) for node, message in reasons.items())
        parts = []
        for shape, count in shapes.most_common():
            example = next(node for node in sorted(reasons) if _shape(node, reasons[node]) == shape)
            detail = _readable(reasons[example])
            rest = detail.split(":", 1)[1].strip() if ":" in detail else ""
            noun = "node" if candidates == 1 else "nodes"
            parts.append(f"{count} of {candidates} {noun}: {shape}" + (f" ({example}: {rest})" if rest else ""))
        lines.append(f"{plugin}: " + "; ".join(parts))
    return lines


@dataclass(frozen=True)
class PairCost:
    """One (pod of a workload, pod of a workload it depends on) pair as placed: its network cost and the
    dependency's ``maxNetworkCost`` (None: no limit)."""

    workload: str
    dependency: str
    limit: int | None
    cost: int

    @property
    def within(self) -> bool:
        return self.limit is None or self.cost <= self.limit


def dependency_pair_costs(
    group: AppGroup, placed: Iterable[tuple[str, str]], nodes: Mapping[str, Node], costs: Mapping[tuple[str, str], int]
) -> list[PairCost]:
    """Every pair of placed pods along the AppGroup's dependencies, with NetworkOverhead's cost rules (same node 0,
    same zone 1, else the topology's zone or region cost, ``MAX_COST`` unknown). ``placed``: (workload selector,
    node name) per placed pod; pods on nodes not in ``nodes`` are left out."""
    by_workload: dict[str, list[str]] = {}
    for selector, node in placed:
        if node in nodes:
            by_workload.setdefault(selector, []).append(node)
    places = tuple(sorted({(node.region, node.zone) for node in nodes.values()}))
    matrix = place_costs(places, costs)
    row = {place: index for index, place in enumerate(places)}
    pairs = []
    for entry in group.spec.workloads:
        for dependency in entry.dependencies or ():
            for a in by_workload.get(entry.workload.selector, ()):
                for b in by_workload.get(dependency.workload.selector, ()):
                    if a == b:
                        cost = SAME_NODE_COST
                    else:
                        first, second = nodes[a], nodes[b]
                        cost = int(matrix[row[(first.region, first.zone)], row[(second.region, second.zone)]])
                    pairs.append(
                        PairCost(
                            entry.workload.selector, dependency.workload.selector, dependency.max_network_cost, cost
                        )
                    )
    return pairs
