"""One scheduling cycle for one pod: filter, score, normalise, weigh, select (pure).

The result has kube-scheduler-simulator's shape (SPEC.md §5): ``filter`` (node -> plugin -> "passed" or
the reason), ``score`` (raw, nodes that passed every filter), ``normalizedScore`` (0..100),
``finalScore`` (normalised x weight), ``totalScore`` and ``selectedNode`` (the highest total; ties go to
the first node name). The cycle itself is :mod:`operators.engine.scheduling.framework`; the
configuration :mod:`operators.engine.scheduling.config`.

Only netaware's plugins run here (NetworkOverhead, NetworkBandwidth, NodeResourcesAllocatable): the
in-tree plugins kube-scheduler adds (NodeResourcesFit, BalancedAllocation, ...) are kube-scheduler's, so a
real placement also weighs those.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from operators.engine.cluster.snapshot import Pod
from operators.engine.scheduling.config import PLUGINS, SchedulerConfig, parse_config
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
__all__ = ["PASSED", "PLUGINS", "SchedulerConfig", "parse_config", "schedule"]


def schedule(
    pod: Pod,
    index: ClusterIndex,
    config: SchedulerConfig,
    table: NodeTable | None = None,
    stages: tuple[str, ...] = ("filter", "score"),
    detail: bool = True,
    state: CycleState | None = None,
) -> dict[str, Any]:
    """Filter, score and select a node for ``pod`` among the rows of ``table`` (default: every node of the
    snapshot), in kube-scheduler-simulator's shape (see the module docstring).

    ``stages`` lets the extender run one verb at a time: ``("filter",)`` for /filter, ``("score",)`` for
    /prioritize (kube-scheduler sends only the nodes that passed). ``detail=False`` leaves out the per-node
    breakdown and adds ``failed`` (one reason per rejected node): the extender needs nothing else.
    """
    candidates = table if table is not None else index.table(config.bandwidth.default_node_bandwidth)
    state = state or CycleState.of(pod, index, config)
    filters: dict[str, dict[str, str]] = {}
    failed: dict[str, dict[str, str]] = {}
    passing = candidates
    if "filter" in stages:
        failed = filter_table(state, candidates, config)
        rejected = set().union(*failed.values()) if failed else set()
        if rejected:
            keep = np.ones(len(candidates), dtype=np.bool_)
            keep[[candidates.row_of[name] for name in rejected]] = False
            passing = candidates.rows(np.nonzero(keep)[0])
        if detail:
            filters = {
                name: {plugin: failed[plugin].get(name, PASSED) for plugin in config.filters}
                for name in candidates.names
            }
    names = passing.names
    raw: dict[str, Ints] = {}
    normalized: dict[str, Ints] = {}
    if "score" in stages:
        raw, normalized = score_table(state, passing, config)
    totals = weighted_total(normalized, config.weights, len(names))
    total_by_name = dict(zip(names, totals.tolist(), strict=True)) if "score" in stages else {}
    selected = None
    if total_by_name:  # the highest total; ties go to the first name
        best = totals.max()
        selected = min(name for name, top in zip(names, (totals == best).tolist(), strict=True) if top)
    result: dict[str, Any] = {
        "pod": pod.key,
        "filter": filters,
        "score": _by_node(names, raw) if detail else {},
        "normalizedScore": _by_node(names, normalized) if detail else {},
        "finalScore": _by_node(names, {p: v * config.weights[p] for p, v in normalized.items()}) if detail else {},
        "totalScore": total_by_name,
        "selectedNode": selected,
    }
    if not detail:
        result["failed"] = merge_reasons(failed)
    return result


def _by_node(names: list[str], per_plugin: Mapping[str, Ints]) -> dict[str, dict[str, int]]:
    columns = {plugin: values.tolist() for plugin, values in per_plugin.items()}
    return {name: {plugin: values[i] for plugin, values in columns.items()} for i, name in enumerate(names)}
