"""One scheduling cycle for one pod: filter, score, normalise, weigh, select (pure).

The result is a ``CycleResult``; ``to_simulator_json()`` renders kube-scheduler-simulator's shape
(docs/design/contracts.md, the offline commands' output): ``filter`` (node -> plugin -> "passed" or the reason),
``score`` (raw, nodes that passed every filter), ``normalizedScore`` (0..100), ``finalScore`` (normalised x weight),
``totalScore`` and ``selectedNode`` (the highest total; ties go to the first node name). The cycle itself is
:mod:`operators.engine.scheduling.framework`; the configuration :mod:`operators.api.config.scheduler`.

netaware's plugins run here (NetworkOverhead, NetworkBandwidth, NodeResourcesAllocatable), and of the in-tree
plugins kube-scheduler adds, NodeResourcesFit's filter when the configuration enables it (a pod that fits only the
big node is never placed on a small one); the in-tree scores (NodeResourcesFit's, BalancedAllocation, ...) are
kube-scheduler's, so a real placement also weighs those.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from operators.api.config.scheduler import RESOURCES_FIT, SchedulerConfig
from operators.engine.cluster.fit import amount, insufficient
from operators.engine.cluster.objects import Pod
from operators.engine.scheduling.framework import (
    CycleState,
    filter_table,
    merge_reasons,
    score_table,
    weighted_total,
)
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.table import Ints, NodeTable

PASSED = "passed"
__all__ = ["PASSED", "CycleResult", "schedule"]

ByNode = dict[str, dict[str, int]]


@dataclass(frozen=True)
class CycleResult:
    """One cycle's outcome. Every field is always present; the per-node breakdowns are empty unless the cycle
    was run with ``detail``.

    ``failed`` is one reason per rejected node (what the extender answers), ``filters`` the verdict of every
    filter plugin on every candidate (what the simulator shows), ``total`` the weighted total of the nodes
    that passed.
    """

    pod: str
    failed: dict[str, str]
    total: dict[str, int]
    selected: str | None
    filters: dict[str, dict[str, str]] = field(default_factory=dict)
    raw: ByNode = field(default_factory=dict)
    normalized: ByNode = field(default_factory=dict)
    final: ByNode = field(default_factory=dict)

    def to_simulator_json(self) -> dict[str, Any]:
        """kube-scheduler-simulator's result shape (docs/design/contracts.md, the offline commands' output)."""
        return {
            "pod": self.pod,
            "filter": self.filters,
            "score": self.raw,
            "normalizedScore": self.normalized,
            "finalScore": self.final,
            "totalScore": self.total,
            "selectedNode": self.selected,
        }


def weighted_totals(state: CycleState, table: NodeTable, config: SchedulerConfig) -> Ints:
    """The score half of a cycle over every row of ``table`` (the nodes that passed): the weighted totals, in
    row order (what the extender's /prioritize answers, on its own scale)."""
    _, normalized = score_table(state, table, config)
    return weighted_total(normalized, config.weights, len(table))


def schedule(
    pod: Pod,
    index: ClusterIndex,
    config: SchedulerConfig,
    table: NodeTable | None = None,
    stages: tuple[str, ...] = ("filter", "score"),
    detail: bool = True,
    state: CycleState | None = None,
) -> CycleResult:
    """Filter, score and select a node for ``pod`` among the rows of ``table`` (default: every node of the
    snapshot).

    ``stages`` lets the extender run one verb at a time: ``("filter",)`` for /filter, ``("score",)`` for
    /prioritize (kube-scheduler sends only the nodes that passed). ``detail=False`` leaves the per-node
    breakdowns empty: the extender needs only ``failed`` and ``total``.
    """
    candidates = table if table is not None else index.table(config.bandwidth.default_node_bandwidth)
    state = state or CycleState.of(pod, index, config)
    failed: dict[str, dict[str, str]] = {}
    passing = candidates
    if "filter" in stages:
        failed = filter_table(state, candidates, config)
        if RESOURCES_FIT in config.filters:
            failed = {RESOURCES_FIT: resources_fit(pod, candidates, index), **failed}
        rejected = set().union(*failed.values()) if failed else set()
        if rejected:
            keep = np.ones(len(candidates), dtype=np.bool_)
            keep[[candidates.row_of[name] for name in rejected]] = False
            passing = candidates.rows(np.nonzero(keep)[0])
    names = passing.names
    raw: dict[str, Ints] = {}
    normalized: dict[str, Ints] = {}
    if "score" in stages:
        raw, normalized = score_table(state, passing, config)
    totals = weighted_total(normalized, config.weights, len(names))
    total = dict(zip(names, totals.tolist(), strict=True)) if "score" in stages else {}
    selected = None
    if total:  # the highest total; ties go to the first name
        best = totals.max()
        selected = min(name for name, top in zip(names, (totals == best).tolist(), strict=True) if top)
    result = CycleResult(pod.key, merge_reasons(failed), total, selected)
    if not detail:
        return result
    return replace(
        result,
        filters={
            name: {plugin: failed.get(plugin, {}).get(name, PASSED) for plugin in config.filters}
            for name in candidates.names
        },
        raw=_by_node(names, raw),
        normalized=_by_node(names, normalized),
        final=_by_node(names, {plugin: values * config.weights[plugin] for plugin, values in normalized.items()}),
    )


def resources_fit(pod: Pod, table: NodeTable, index: ClusterIndex) -> dict[str, str]:
    """kube-scheduler's NodeResourcesFit over the rows of ``table``: the rejected nodes with the reasons. A pod already
    bound (``explain`` of a placed pod) is not counted against itself."""
    held = index.requested_resources
    failed = {}
    for node in table.nodes:
        requested, count = held.get(node.name, ({}, 0))
        if node.name == pod.node_name and not pod.is_terminal:
            requested = {
                name: used - amount(name, pod.requests[name]) if name in pod.requests else used
                for name, used in requested.items()
            }
            count -= 1
        reasons = insufficient(pod.requests, node, requested, count)
        if reasons:
            failed[node.name] = ", ".join(reasons)
    return failed


def _by_node(names: list[str], per_plugin: Mapping[str, Ints]) -> ByNode:
    columns = {plugin: values.tolist() for plugin, values in per_plugin.items()}
    return {name: {plugin: values[i] for plugin, values in columns.items()} for i, name in enumerate(names)}
