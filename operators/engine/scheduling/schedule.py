"""One scheduling cycle for one pod: filter, score, normalise, weigh, select (pure).

The result is a ``CycleResult``; ``to_simulator_json()`` renders kube-scheduler-simulator's shape
(docs/design/contracts.md, the offline commands' output): ``filter`` (node -> plugin -> "passed" or the reason),
``score`` (raw, nodes that passed every filter), ``normalizedScore`` (0..100), ``finalScore`` (normalised x weight),
``totalScore`` and ``selectedNode`` (the highest total; ties go to the first node name). The cycle itself is
:mod:`operators.engine.scheduling.framework`; the configuration :mod:`operators.api.config.scheduler`.

Filters run as kube-scheduler runs them before it calls its extender: first the default profile's filters the
configuration enables (:mod:`operators.engine.cluster.kube.filters`, in kube-scheduler's order; a node's verdict is
the first one that rejects it, with its reasons, and the later filters do not run on it), then netaware's plugins
(NetworkOverhead, NetworkBandwidth) on the nodes that passed. A pod already bound (``explain`` of a placed pod) is
not counted against itself. Of kube-scheduler's own scores, PodTopologySpread's and InterPodAffinity's are
computed (:mod:`operators.engine.cluster.kube.scores`, weight 2 each unless the configuration says otherwise) beside
netaware's; the others (NodeResourcesFit's LeastAllocated, BalancedAllocation, ...) are not modelled, so a real
placement also weighs those.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from operators.api.config.scheduler import IN_TREE_FILTERS, SchedulerConfig
from operators.engine.cluster.kube import filters as kube_filters
from operators.engine.cluster.kube import scores as kube_scores
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
        in_tree = tuple(name for name in config.filters if name in IN_TREE_FILTERS)
        failed = in_tree_failures(pod, index, candidates, in_tree, config) if in_tree else {}
        passing = _without(candidates, failed)
        failed.update(filter_table(state, passing, config))
        passing = _without(passing, failed)
    names = passing.names
    raw: dict[str, Ints] = {}
    normalized: dict[str, Ints] = {}
    weights = {**config.weights, **config.in_tree_scores}
    if "score" in stages:
        raw, normalized = score_table(state, passing, config)
        if config.in_tree_scores:
            found = kube_scores.scores(pod, index.placed, passing.nodes, config.in_tree_scores,
                                       kube_filters.spread_defaults(config))  # fmt: skip
            for plugin, (values, scaled) in found.items():
                raw[plugin] = np.array(values, dtype=np.int64)
                normalized[plugin] = np.array(scaled, dtype=np.int64)
    totals = weighted_total(normalized, weights, len(names))
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
        filters={name: _verdicts(name, failed, config.filters) for name in candidates.names},
        raw=_by_node(names, raw),
        normalized=_by_node(names, normalized),
        final=_by_node(names, {plugin: values * weights[plugin] for plugin, values in normalized.items()}),
    )


def in_tree_failures(
    pod: Pod, index: ClusterIndex, table: NodeTable, enabled: tuple[str, ...], config: SchedulerConfig
) -> dict[str, dict[str, str]]:
    """kube-scheduler's default filters (``enabled`` of them) over the rows of ``table``: per plugin, the nodes it
    was the first to reject, with its reasons joined by ", ". A pod already bound is taken off its node first (as
    kube-scheduler's RemovePod), so that it is not counted against itself."""
    cycle = kube_filters.prefilter(pod, index.placed, index.requested, kube_filters.spread_defaults(config))
    if pod.node_name and not pod.is_terminal and (node := index.node_by_name.get(pod.node_name)) is not None:
        kube_filters.add_pod(cycle, pod, node, sign=-1)
    failed: dict[str, dict[str, str]] = {}
    for node in table.nodes:
        plugin, reasons = kube_filters.failure(cycle, node, enabled)
        if reasons:
            failed.setdefault(plugin or enabled[0], {})[node.name] = ", ".join(reasons)
    return failed


def _verdicts(node: str, failed: Mapping[str, Mapping[str, str]], plugins: tuple[str, ...]) -> dict[str, str]:
    """Each filter plugin's verdict on ``node``, in order, up to the first that rejected it (kube-scheduler runs no
    filter on a node after one rejected it: the later ones have no verdict)."""
    verdicts: dict[str, str] = {}
    for plugin in plugins:
        reason = failed.get(plugin, {}).get(node)
        verdicts[plugin] = reason or PASSED
        if reason and plugin in IN_TREE_FILTERS:
            break
    return verdicts


def _without(table: NodeTable, failed: Mapping[str, Mapping[str, str]]) -> NodeTable:
    """The rows of ``table`` no plugin rejected."""
    rejected = set().union(*failed.values()) if failed else set()
    if not rejected:
        return table
    keep = np.ones(len(table), dtype=np.bool_)
    keep[[table.row_of[name] for name in rejected if name in table.row_of]] = False
    return table.rows(np.nonzero(keep)[0])


def _by_node(names: list[str], per_plugin: Mapping[str, Ints]) -> ByNode:
    columns = {plugin: values.tolist() for plugin, values in per_plugin.items()}
    return {name: {plugin: values[i] for plugin, values in columns.items()} for i, name in enumerate(names)}
