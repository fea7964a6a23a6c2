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
from typing import Any

from operators.api.errors import FieldError
from operators.api.quantity import Quantity
from operators.engine.plugins import (
    ALLOCATABLE,
    NETWORK_BANDWIDTH,
    NETWORK_OVERHEAD,
    ClusterIndex,
    NetworkBandwidthArgs,
    NetworkOverheadArgs,
    NodeResourcesAllocatableArgs,
    allocatable_score,
    bandwidth_failures,
    bandwidth_scores,
    network_overhead,
    normalize_min_max,
    normalize_overhead,
    overhead_reason,
    pod_demand,
)
from operators.engine.snapshot import Node, Pod

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
    """Read a KubeSchedulerConfiguration (its first profile); errors name the field."""
    if not isinstance(document, Mapping):
        raise FieldError(path or "<config>", document, "expected a KubeSchedulerConfiguration object")
    profiles = document.get("profiles") or [{}]
    profile = profiles[0] if isinstance(profiles, list) and profiles else {}
    plugins = profile.get("plugins") or {}
    filters: list[str] = []
    weights: dict[str, int] = {}
    for point in ("multiPoint", "filter", "score"):
        for index, entry in enumerate((plugins.get(point) or {}).get("enabled") or []):
            name = entry.get("name") if isinstance(entry, Mapping) else None
            if name not in PLUGINS:
                continue  # in-tree plugins are kube-scheduler's business, not the extender's
            weight = entry.get("weight", 1)
            if not isinstance(weight, int) or weight < 1:
                raise FieldError(
                    f"profiles[0].plugins.{point}.enabled[{index}].weight", weight, "expected an integer >= 1"
                )
            if point in ("multiPoint", "filter") and name in FILTER_PLUGINS and name not in filters:
                filters.append(name)
            if point in ("multiPoint", "score"):
                weights[name] = weight
    if not plugins:
        filters, weights = list(FILTER_PLUGINS), dict.fromkeys(PLUGINS, 1)
    args = {
        entry.get("name"): entry.get("args") or {}
        for entry in profile.get("pluginConfig") or []
        if isinstance(entry, Mapping)
    }
    overhead = args.get(NETWORK_OVERHEAD, {})
    bandwidth = args.get(NETWORK_BANDWIDTH, {})
    allocatable = args.get(ALLOCATABLE, {})
    mode = bandwidth.get("accountingMode", "duplex")
    if mode not in ("duplex", "combined"):
        raise FieldError("pluginConfig[NetworkBandwidth].args.accountingMode", mode, "expected duplex or combined")
    default = bandwidth.get("defaultNodeBandwidth")
    alloc_mode = allocatable.get("mode", "Least")
    if alloc_mode not in ("Least", "Most"):
        raise FieldError("pluginConfig[NodeResourcesAllocatable].args.mode", alloc_mode, "expected Least or Most")
    resources = tuple((str(item["name"]), int(item.get("weight", 1))) for item in allocatable.get("resources") or [])
    return SchedulerConfig(
        filters=tuple(filters),
        weights=weights,
        overhead=NetworkOverheadArgs(
            namespaces=tuple(overhead.get("namespaces") or ("default",)),
            weights_name=str(overhead.get("weightsName") or NetworkOverheadArgs.weights_name),
            network_topology_name=str(overhead.get("networkTopologyName") or NetworkOverheadArgs.network_topology_name),
        ),
        bandwidth=NetworkBandwidthArgs(
            accounting_mode=mode,
            default_node_bandwidth=Quantity.parse(default, "pluginConfig[NetworkBandwidth].args.defaultNodeBandwidth")
            if default is not None
            else None,
        ),
        allocatable=NodeResourcesAllocatableArgs(
            mode=alloc_mode, resources=resources or NodeResourcesAllocatableArgs.resources
        ),
    )


def schedule(
    pod: Pod,
    index: ClusterIndex,
    config: SchedulerConfig,
    nodes: tuple[Node, ...] | None = None,
    stages: tuple[str, ...] = ("filter", "score"),
    detail: bool = True,
) -> dict[str, Any]:
    """Filter, score and select a node for ``pod`` among ``nodes`` (default: all of the snapshot).

    ``stages`` lets the extender run one verb at a time: ``("filter",)`` for /filter, ``("score",)``
    for /prioritize (kube-scheduler sends only the nodes that passed).
    """
    candidates: tuple[Node, ...] = nodes if nodes is not None else index.nodes
    overhead = network_overhead(pod, index, config.overhead)
    demand = pod_demand(pod.annotations)
    filters: dict[str, dict[str, str]] = {}
    passing: list[Node] = []
    if "filter" not in stages:
        passing = list(candidates)
        candidates = ()
    elif "score" not in stages:
        config = SchedulerConfig(
            filters=config.filters,
            weights={},
            overhead=config.overhead,
            bandwidth=config.bandwidth,
            allocatable=config.allocatable,
        )
    overhead_failed = _overhead_failures(overhead, candidates) if NETWORK_OVERHEAD in config.filters else {}
    bandwidth_failed = (
        bandwidth_failures(demand, candidates, index, config.bandwidth) if NETWORK_BANDWIDTH in config.filters else {}
    )
    check_overhead, check_bandwidth = NETWORK_OVERHEAD in config.filters, NETWORK_BANDWIDTH in config.filters
    for node in candidates:
        name = node.name
        results: dict[str, str] = {}
        if check_overhead:
            results[NETWORK_OVERHEAD] = overhead_failed.get(name, PASSED)
        if check_bandwidth:
            results[NETWORK_BANDWIDTH] = bandwidth_failed.get(name, PASSED)
        filters[name] = results
        if name not in overhead_failed and name not in bandwidth_failed:
            passing.append(node)
    raw: dict[str, dict[str, int]] = {}
    if NETWORK_OVERHEAD in config.weights:
        raw[NETWORK_OVERHEAD] = {
            node.name: (overhead.per_node or {}).get(node.name, (0, 0, 0))[2] if overhead.per_node else 0
            for node in passing
        }
    if NETWORK_BANDWIDTH in config.weights:
        raw[NETWORK_BANDWIDTH] = bandwidth_scores(demand, passing, index, config.bandwidth)
    if ALLOCATABLE in config.weights:
        known = index.allocatable(config.allocatable)
        raw[ALLOCATABLE] = {
            node.name: known[node.name] if node.name in known else allocatable_score(node, config.allocatable)
            for node in passing
        }
    normalized = {
        plugin: normalize_overhead(scores) if plugin == NETWORK_OVERHEAD else normalize_min_max(scores)
        for plugin, scores in raw.items()
    }
    final = {
        plugin: {node: value * config.weights[plugin] for node, value in scores.items()}
        for plugin, scores in normalized.items()
    }
    totals = dict.fromkeys((node.name for node in passing), 0)
    for scores in final.values():
        for name, value in scores.items():
            totals[name] += value
    selected = min(totals, key=lambda name: (-totals[name], name)) if totals else None
    return {
        "pod": pod.key,
        "filter": filters,
        "score": _by_node(raw) if detail else {},
        "normalizedScore": _by_node(normalized) if detail else {},
        "finalScore": _by_node(final) if detail else {},
        "totalScore": totals,
        "selectedNode": selected,
    }


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


def _by_node(per_plugin: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    result: dict[str, dict[str, int]] = {}
    for plugin, scores in per_plugin.items():
        for node, value in scores.items():
            result.setdefault(node, {})[plugin] = value
    return result
