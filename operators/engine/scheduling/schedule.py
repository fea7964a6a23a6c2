"""One scheduling cycle for one pod: filter, score, normalise, weigh, select (pure).

The result has kube-scheduler-simulator's shape (SPEC.md §5): ``filter`` (node -> plugin ->
"passed" or the reason), ``score`` (raw, nodes that passed every filter), ``normalizedScore``
(0..100), ``finalScore`` (normalised x weight), ``totalScore`` and ``selectedNode`` (the highest
total; ties go to the first node name). The configuration is a KubeSchedulerConfiguration-shaped
document: enabled plugins and weights, and ``pluginConfig`` args.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pydantic

from operators.api.errors import FieldError, from_pydantic, join_path
from operators.engine.cluster.bandwidth import pod_demand
from operators.engine.cluster.snapshot import Node, Pod
from operators.engine.scheduling import vectorized
from operators.engine.scheduling.config import (
    ARGS,
    KubeSchedulerConfiguration,
    NetworkBandwidthArgsDoc,
    NetworkOverheadArgsDoc,
    NodeResourcesAllocatableArgsDoc,
    Profile,
)
from operators.engine.scheduling.plugins import (
    ALLOCATABLE,
    NETWORK_BANDWIDTH,
    NETWORK_OVERHEAD,
    ClusterIndex,
    NetworkBandwidthArgs,
    NetworkOverheadArgs,
    NodeResourcesAllocatableArgs,
    OverheadResult,
    allocatable_score,
    bandwidth_failures,
    bandwidth_scores,
    network_overhead,
    overhead_reason,
)

ModelT = TypeVar("ModelT", bound=pydantic.BaseModel)

PLUGINS = (NETWORK_OVERHEAD, NETWORK_BANDWIDTH, ALLOCATABLE)
FILTER_PLUGINS = (NETWORK_OVERHEAD, NETWORK_BANDWIDTH)
PASSED = "passed"


@dataclass(frozen=True)
class SchedulerConfig:
    filters: tuple[str, ...] = FILTER_PLUGINS
    weights: Mapping[str, int] = field(default_factory=lambda: dict.fromkeys(PLUGINS, 1))
    overhead: NetworkOverheadArgs = field(default_factory=NetworkOverheadArgs)
    bandwidth: NetworkBandwidthArgs = field(default_factory=NetworkBandwidthArgs)
    allocatable: NodeResourcesAllocatableArgs = field(default_factory=NodeResourcesAllocatableArgs)


def parse_config(document: Any, path: str = "") -> SchedulerConfig:
    """Read a KubeSchedulerConfiguration (its first profile), validated whole at load
    (:mod:`operators.engine.scheduling.config`); errors are ``FieldError`` naming the field path."""
    if not isinstance(document, Mapping):
        raise FieldError(path or "<config>", document, "expected a KubeSchedulerConfiguration object")
    config = _validated(KubeSchedulerConfiguration, document, path)
    profile = config.profiles[0] if config.profiles else Profile()
    filters: list[str] = []
    weights: dict[str, int] = {}
    plugins = profile.plugins
    for point in ("multi_point", "filter", "score"):
        plugin_set = getattr(plugins, point) if plugins is not None else None
        for entry in plugin_set.enabled if plugin_set is not None else ():
            if entry.name not in PLUGINS:
                continue  # in-tree plugins are kube-scheduler's business, not the extender's
            if point in ("multi_point", "filter") and entry.name in FILTER_PLUGINS and entry.name not in filters:
                filters.append(entry.name)
            if point in ("multi_point", "score"):
                weights[entry.name] = entry.weight or 1
    if plugins is None:
        filters, weights = list(FILTER_PLUGINS), dict.fromkeys(PLUGINS, 1)
    args: dict[str, Any] = {}
    for index, entry in enumerate(profile.plugin_config):
        if entry.name in ARGS:
            where = join_path(path, f"profiles[0].pluginConfig[{index}].args")
            args[entry.name] = _validated(ARGS[entry.name], entry.args, where)
    overhead = args.get(NETWORK_OVERHEAD) or NetworkOverheadArgsDoc()
    bandwidth = args.get(NETWORK_BANDWIDTH) or NetworkBandwidthArgsDoc()
    allocatable = args.get(ALLOCATABLE) or NodeResourcesAllocatableArgsDoc()
    return SchedulerConfig(
        filters=tuple(filters),
        weights=weights,
        overhead=NetworkOverheadArgs(
            namespaces=tuple(overhead.namespaces),
            weights_name=overhead.weights_name,
            network_topology_name=overhead.network_topology_name,
        ),
        bandwidth=NetworkBandwidthArgs(
            accounting_mode=bandwidth.accounting_mode, default_node_bandwidth=bandwidth.default_node_bandwidth
        ),
        allocatable=NodeResourcesAllocatableArgs(
            mode=allocatable.mode,
            resources=tuple((item.name, item.weight) for item in allocatable.resources)
            or NodeResourcesAllocatableArgs.resources,
        ),
    )


def _validated(model: type[ModelT], document: Any, path: str) -> ModelT:
    try:
        return model.model_validate(document)
    except pydantic.ValidationError as error:
        found = from_pydantic(error, path)
        first = found[0]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise FieldError(first.path, first.value, first.reason + more) from None


def _fast(nodes: tuple[Node, ...], index: ClusterIndex) -> bool:
    """True when every candidate is the snapshot's own node object (the array path applies)."""
    if nodes is index.nodes:
        return True
    ids: set[int] | None = index.__dict__.get("_node_ids")
    if ids is None:
        ids = {id(node) for node in index.nodes}
        index.__dict__["_node_ids"] = ids
    return ids.issuperset(map(id, nodes))


def _positions(nodes: tuple[Node, ...], index: ClusterIndex) -> npt.NDArray[np.int64] | None:
    """Row of each node in the index's arrays, or None when a node is not the snapshot's own (plain path)."""
    last: tuple[tuple[Node, ...], npt.NDArray[np.int64] | None] | None = index.__dict__.get("_last_positions")
    if last is not None and last[0] is nodes:  # the extender's /filter: the same candidates pod after pod
        return last[1]
    positions = None
    if _fast(nodes, index):
        position = vectorized.arrays(index).position
        positions = np.array([position[node.name] for node in nodes], dtype=np.int64)
    index.__dict__["_last_positions"] = (nodes, positions)
    return positions


def filter_failures(
    pod: Pod,
    index: ClusterIndex,
    config: SchedulerConfig,
    nodes: tuple[Node, ...],
    overhead: OverheadResult | None = None,
) -> dict[str, dict[str, str]]:
    """Per filter plugin, the nodes it rejects with the reason (nodes absent from every map pass)."""
    overhead = overhead or network_overhead(pod, index, config.overhead)
    demand, problem = demand_or_problem(pod)
    failed: dict[str, dict[str, str]] = {}
    if problem and NETWORK_BANDWIDTH in config.filters:  # the pod itself is unreadable: no node can take it
        failed[NETWORK_BANDWIDTH] = {node.name: problem for node in nodes}
    positions = _positions(nodes, index)
    if positions is not None:
        if NETWORK_OVERHEAD in config.filters:
            names = [node.name for node in nodes]
            failed[NETWORK_OVERHEAD] = vectorized.overhead_failures(overhead, names, index, positions)
        if NETWORK_BANDWIDTH in config.filters and not problem:
            failed[NETWORK_BANDWIDTH] = vectorized.bandwidth_failures(
                demand, list(nodes), positions, index, config.bandwidth
            )
        return failed
    if NETWORK_OVERHEAD in config.filters:
        failed[NETWORK_OVERHEAD] = _overhead_failures(overhead, nodes)
    if NETWORK_BANDWIDTH in config.filters and not problem:
        failed[NETWORK_BANDWIDTH] = bandwidth_failures(demand, nodes, index, config.bandwidth)
    return failed


def demand_or_problem(pod: Pod) -> tuple[tuple[int, int], str]:
    """(the pod's bandwidth demand, "") or ((0, 0), why it cannot be read)."""
    try:
        return pod_demand(pod.annotations), ""
    except FieldError as error:
        return (0, 0), f"pod {pod.key} bandwidth unreadable: {error}"


def score_nodes(
    pod: Pod,
    index: ClusterIndex,
    config: SchedulerConfig,
    nodes: tuple[Node, ...],
    overhead: OverheadResult | None = None,
) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """(raw, normalised) scores per plugin, in the order of ``nodes``."""
    overhead = overhead or network_overhead(pod, index, config.overhead)
    demand = demand_or_problem(pod)[0]
    names = [node.name for node in nodes]
    raw: dict[str, list[int]] = {}
    normalized: dict[str, list[int]] = {}
    positions = _positions(nodes, index)
    if NETWORK_OVERHEAD in config.weights:
        if positions is not None:
            costs = vectorized.overhead_arrays(overhead, index, positions)[2]
        else:
            table = overhead.per_node or {}
            costs = np.array([table.get(name, (0, 0, 0))[2] for name in names], dtype=np.int64)
        raw[NETWORK_OVERHEAD] = costs.tolist()
        normalized[NETWORK_OVERHEAD] = vectorized.normalize_overhead(costs).tolist()
    if NETWORK_BANDWIDTH in config.weights:
        if positions is not None:
            values = vectorized.bandwidth_raw(demand, positions, index, config.bandwidth)
        else:
            scores = bandwidth_scores(demand, nodes, index, config.bandwidth)
            values = np.array([scores[name] for name in names], dtype=np.int64)
        raw[NETWORK_BANDWIDTH] = values.tolist()
        normalized[NETWORK_BANDWIDTH] = vectorized.normalize_min_max(values).tolist()
    if ALLOCATABLE in config.weights:
        if positions is not None:
            values = vectorized.allocatables(index, config.allocatable)[positions]
        else:
            values = np.array([allocatable_score(node, config.allocatable) for node in nodes], dtype=np.int64)
        raw[ALLOCATABLE] = values.tolist()
        normalized[ALLOCATABLE] = vectorized.normalize_min_max(values).tolist()
    return raw, normalized


def schedule(
    pod: Pod,
    index: ClusterIndex,
    config: SchedulerConfig,
    nodes: tuple[Node, ...] | None = None,
    stages: tuple[str, ...] = ("filter", "score"),
    detail: bool = True,
    overhead: OverheadResult | None = None,
) -> dict[str, Any]:
    """Filter, score and select a node for ``pod`` among ``nodes`` (default: all of the snapshot).

    ``stages`` lets the extender run one verb at a time: ``("filter",)`` for /filter, ``("score",)``
    for /prioritize (kube-scheduler sends only the nodes that passed). ``detail=False`` leaves out the
    per-node breakdown (the extender needs the failures and the totals only).
    """
    candidates: tuple[Node, ...] = nodes if nodes is not None else index.nodes
    overhead = overhead or network_overhead(pod, index, config.overhead)
    filters: dict[str, dict[str, str]] = {}
    failed: dict[str, dict[str, str]] = {}
    if "filter" in stages:
        failed = filter_failures(pod, index, config, candidates, overhead)
        rejected = set().union(*failed.values()) if failed else set()
        passing = tuple(node for node in candidates if node.name not in rejected)
        if detail:
            filters = {
                node.name: {plugin: failed[plugin].get(node.name, PASSED) for plugin in config.filters}
                for node in candidates
            }
    else:
        passing = candidates
    names = [node.name for node in passing]
    raw: dict[str, list[int]] = {}
    normalized: dict[str, list[int]] = {}
    if "score" in stages:
        raw, normalized = score_nodes(pod, index, config, passing, overhead)
    final = (
        {plugin: [value * config.weights[plugin] for value in values] for plugin, values in normalized.items()}
        if detail
        else {}
    )
    totals = np.zeros(len(names), dtype=np.int64)
    for plugin, values in normalized.items():
        totals += np.asarray(values, dtype=np.int64) * config.weights[plugin]
    total_by_name = dict(zip(names, totals.tolist(), strict=True)) if "score" in stages else {}
    selected = None
    if total_by_name:  # the highest total; ties go to the first name
        best = totals.max()
        selected = min(name for name, total in zip(names, (totals == best).tolist(), strict=True) if total)
    result: dict[str, Any] = {
        "pod": pod.key,
        "filter": filters,
        "score": _by_node(names, raw) if detail else {},
        "normalizedScore": _by_node(names, normalized) if detail else {},
        "finalScore": _by_node(names, final) if detail else {},
        "totalScore": total_by_name,
        "selectedNode": selected,
    }
    if not detail:
        result["failed"] = merge_reasons(failed)
    return result


def merge_reasons(failed: Mapping[str, dict[str, str]]) -> dict[str, str]:
    """One reason per rejected node: the plugins' reasons joined with ``; `` in filter order."""
    merged: dict[str, str] = {}
    for reasons in failed.values():
        if not merged:
            merged = dict(reasons)
            continue
        for name, reason in reasons.items():
            merged[name] = f"{merged[name]}; {reason}" if name in merged else reason
    return merged


def _overhead_failures(result: Any, nodes: tuple[Node, ...]) -> dict[str, str]:
    """Nodes the NetworkOverhead filter rejects, with the reason."""
    if result.error:
        return {node.name: str(result.error) for node in nodes}
    if result.per_node is None:
        return {}
    failed = {}
    for node in nodes:
        satisfied, violated, _ = result.per_node.get(node.name, (0, 0, 0))
        if violated > satisfied:
            failed[node.name] = overhead_reason(node.name, satisfied, violated)
    return failed


def _by_node(names: list[str], per_plugin: Mapping[str, list[int]]) -> dict[str, dict[str, int]]:
    return {name: {plugin: values[i] for plugin, values in per_plugin.items()} for i, name in enumerate(names)}
