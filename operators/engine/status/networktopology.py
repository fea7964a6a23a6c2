"""NetworkTopology: zone and region costs from netperf, and bandwidth per zone/region pair.

``networktopology_result(topology, snapshot, now)`` returns the object as the controller writes
it, computed in these steps:

1. **Measurements** from the topology's ConfigMaps (:mod:`operators.engine.status.netperf`): the named one
   and the labelled ones (``netaware probe`` writes one per node, labelled). None of them is
   ``Ready=False`` / ``ConfigMapNotFound``, and the weights stay as they are.
2. **Costs.** A node-pair measurement between two zones of one region is a sample of that ordered
   zone pair; between two regions, of that ordered region pair; within one zone it is not used.
   A zone-level measurement is a sample of its zone pair (or of the region pair, when the zones
   lie in different regions). The cost of a pair is the **median** of its samples (for an even
   count, the mean of the two middle samples rounded half up) — independent of the order nodes
   are listed in, unlike upstream's running average over a multigraph. Every ordered pair of
   regions and every ordered pair of zones within a region is expected; a pair without samples
   gets no ``NetperfCosts`` entry and is listed in ``status.missingCosts``.
3. **Bandwidth.** ``bandwidthCapacity`` is the ``UserDefined`` entry's for the same pair when set
   (and non-zero), else the configured default (1G). ``bandwidthAllocated`` is recomputed from
   the snapshot, never accumulated from events (see :func:`allocated_bandwidth`).
4. **Weights** as upstream writes them: the user's ``UserDefined`` weight untouched, the
   ``NetperfCosts`` weight (re)written with the region list then the zone list, origins and
   destinations sorted. Other weights are kept (upstream drops them).
5. **Status**: ``nodeCount``, ``weightCalculationTime`` (moves only when the weights change),
   what was ingested, the missing pairs, and the ``Ready`` condition.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.api.networktopology import (
    CostInfo,
    MissingCost,
    NetperfSummary,
    NetworkTopology,
    NetworkTopologyStatus,
    OriginInfo,
    TopologyInfo,
    WeightInfo,
)
from operators.api.quantity import Quantity
from operators.engine.cluster.appgroups import workload_namespaces
from operators.engine.cluster.conditions import condition, invalid_spec
from operators.engine.cluster.objects import Node, Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.status.netperf import Measurements, Skipped, netperf_config_maps, read_measurements

DEFAULT_CAPACITY = Quantity.parse("1G")
SKIPPED_SHOWN = 20  # skipped entries listed in the status and in an Event; the rest are counted

PairKey = tuple[str, str, str]  # (topology key, origin, destination)
TOPOLOGY_KEYS = (keys.REGION_LABEL, keys.ZONE_LABEL)


def median(samples: Sequence[int]) -> int:
    """The median; for an even count the mean of the two middle samples, rounded half up."""
    ordered = sorted(samples)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle] + 1) // 2


@dataclass(frozen=True)
class Costs:
    costs: dict[PairKey, int]
    missing: list[PairKey]
    unlabelled: list[Skipped]


def expected_pairs(nodes: Iterable[Node]) -> list[PairKey]:
    """Every ordered pair of regions, and every ordered pair of zones within one region."""
    regions: set[str] = set()
    zones_of: dict[str, set[str]] = defaultdict(set)
    for node in nodes:
        if node.region:
            regions.add(node.region)
            if node.zone:
                zones_of[node.region].add(node.zone)
    pairs = [(keys.REGION_LABEL, a, b) for a in sorted(regions) for b in sorted(regions) if a != b]
    for region in sorted(zones_of):
        zones = sorted(zones_of[region])
        pairs.extend((keys.ZONE_LABEL, a, b) for a in zones for b in zones if a != b)
    return pairs


def aggregate_costs(nodes: Sequence[Node], measurements: Measurements) -> Costs:
    """Zone and region costs: the median of the measurements between them (see the module docstring)."""
    zone_region = {node.zone: node.region for node in nodes if node.zone and node.region}
    samples: dict[PairKey, list[int]] = defaultdict(list)
    unlabelled: list[Skipped] = []
    places = measurements.places
    for index, values in enumerate(measurements.place_pairs):
        if not values:
            continue
        (r1, z1), (r2, z2) = places[index // len(places)], places[index % len(places)]
        if not r1 or not r2:
            unlabelled.append(Skipped("", f"{len(values)} measurements", "a node without a region label"))
        elif r1 != r2:
            samples[(keys.REGION_LABEL, r1, r2)].extend(values)
        elif z1 and z2 and z1 != z2:
            samples[(keys.ZONE_LABEL, z1, z2)].extend(values)
    for (z1, z2), milliseconds in measurements.zone_pairs.items():
        r1, r2 = zone_region.get(z1, ""), zone_region.get(z2, "")
        if r1 == r2:
            samples[(keys.ZONE_LABEL, z1, z2)].append(milliseconds)
        else:
            samples[(keys.REGION_LABEL, r1, r2)].append(milliseconds)
    costs = {pair: median(values) for pair, values in samples.items()}
    missing = [pair for pair in expected_pairs(nodes) if pair not in costs]
    return Costs(costs, missing, unlabelled)


def allocated_bandwidth(
    app_groups: Iterable[AppGroup], pods: Iterable[Pod], nodes: Iterable[Node]
) -> dict[PairKey, Quantity]:
    """Bandwidth reserved between zones and regions by the AppGroups' placed pods.

    For every scheduled, non-terminal pod of an AppGroup (labelled with the AppGroup's name in a
    namespace it covers) and every dependency of its workload that has a ``minBandwidth``: take
    the zones (same region) or regions (other region) where that dependency has scheduled pods;
    each such ordered pair (pod's zone or region -> dependency's) gets the ``minBandwidth`` once.
    Same node, same zone and unlabelled nodes add nothing. Only the direction pod -> dependency is
    counted, as upstream. The result depends only on where pods are now.
    """
    where = {node.name: (node.region, node.zone) for node in nodes}
    by_group: dict[tuple[str, str], list[Pod]] = defaultdict(list)
    for pod in pods:
        label = pod.labels.get(keys.APPGROUP_LABEL)
        if label and pod.node_name and not pod.is_terminal and pod.node_name in where:
            by_group[(pod.namespace, label)].append(pod)
    total: dict[PairKey, Quantity] = {}
    for group in app_groups:
        members = [
            pod
            for namespace in workload_namespaces(group)
            for pod in by_group.get((namespace, group.metadata.name), ())
        ]
        locations: dict[str, set[tuple[str, str]]] = defaultdict(set)
        for pod in members:
            locations[pod.labels.get(keys.APPGROUP_WORKLOAD_LABEL, "")].add(where[pod.node_name])
        dependencies = {entry.workload.selector: entry.dependencies or () for entry in group.spec.workloads}
        for pod in members:
            region, zone = where[pod.node_name]
            if not region:
                continue
            for dependency in dependencies.get(pod.labels.get(keys.APPGROUP_WORKLOAD_LABEL, ""), ()):
                bandwidth = dependency.min_bandwidth
                if bandwidth is None or not bandwidth:
                    continue
                pairs: set[PairKey] = set()
                for other_region, other_zone in locations.get(dependency.workload.selector, ()):
                    if not other_region:
                        continue
                    if other_region != region:
                        pairs.add((keys.REGION_LABEL, region, other_region))
                    elif zone and other_zone and other_zone != zone:
                        pairs.add((keys.ZONE_LABEL, zone, other_zone))
                for pair in pairs:
                    total[pair] = (
                        total[pair] + bandwidth if pair in total else Quantity(bandwidth.nanos, bandwidth.format)
                    )
    return total


def user_capacities(weights: Sequence[WeightInfo]) -> dict[PairKey, Quantity]:
    """``bandwidthCapacity`` of the ``UserDefined`` weight, by pair (zero entries ignored)."""
    result: dict[PairKey, Quantity] = {}
    for weight in weights:
        if weight.name != keys.USER_DEFINED_WEIGHT:
            continue
        for topology in weight.topology_list:
            for origin in topology.origin_list:
                for cost in origin.cost_list or ():
                    if cost.bandwidth_capacity is not None and cost.bandwidth_capacity:
                        result[(topology.topology_key, origin.origin, cost.destination)] = cost.bandwidth_capacity
    return result


def netperf_weight(
    costs: Mapping[PairKey, int],
    allocated: Mapping[PairKey, Quantity],
    capacities: Mapping[PairKey, Quantity],
    default_capacity: Quantity,
) -> WeightInfo:
    topology_list = []
    for topology_key in TOPOLOGY_KEYS:
        by_origin: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for (key, origin, destination), cost in costs.items():
            if key == topology_key:
                by_origin[origin].append((destination, cost))
        origin_list = [
            OriginInfo(
                origin=origin,
                cost_list=[
                    CostInfo(
                        destination=destination,
                        network_cost=cost,
                        bandwidth_capacity=capacities.get((topology_key, origin, destination), default_capacity),
                        bandwidth_allocated=allocated.get((topology_key, origin, destination), Quantity(0)),
                    )
                    for destination, cost in sorted(by_origin[origin])
                ],
            )
            for origin in sorted(by_origin)
        ]
        topology_list.append(TopologyInfo(topology_key=topology_key, origin_list=origin_list))
    return WeightInfo(name=keys.NETPERF_WEIGHT, topology_list=topology_list)


def _with_weight(weights: Sequence[WeightInfo], new: WeightInfo) -> list[WeightInfo]:
    result = [new if weight.name == new.name else weight for weight in weights]
    return result if any(weight.name == new.name for weight in weights) else [*result, new]


@dataclass(frozen=True)
class TopologyResult:
    topology: NetworkTopology
    skipped: list[Skipped]


def networktopology_result(
    topology: NetworkTopology, snapshot: Snapshot, now: datetime.datetime, default_capacity: Quantity = DEFAULT_CAPACITY
) -> TopologyResult:
    """The NetworkTopology as the controller writes it (see the module docstring)."""
    previous = topology.status or NetworkTopologyStatus()
    namespace = topology.metadata.namespace
    generation = topology.metadata.generation
    named = topology.spec.configmap_name
    config_maps = netperf_config_maps(snapshot.config_maps, namespace, topology.metadata.name, named)
    update: dict[str, object] = {"node_count": len(snapshot.nodes), "observed_generation": generation}
    if not config_maps:  # the named one, or rows from `netaware probe` (labelled), will do
        ready = condition(
            previous.conditions,
            keys.CONDITION_READY,
            False,
            "ConfigMapNotFound",
            f"ConfigMap {namespace}/{named} (spec.configmapName) not found, nor any labelled "
            f"{keys.NETPERF_CONFIGMAP_LABEL}={topology.metadata.name}; the weights are unchanged",
            now,
            generation,
        )
        status = previous.model_copy(update={**update, "conditions": [ready]})
        return TopologyResult(topology.model_copy(update={"status": status}), [])
    nodes = snapshot.nodes
    zones = {node.zone for node in nodes if node.zone}
    measurements = read_measurements(config_maps, {node.name: (node.region, node.zone) for node in nodes}, zones)
    costs = aggregate_costs(nodes, measurements)
    allocated = allocated_bandwidth(snapshot.app_groups, snapshot.pods, nodes)
    weight = netperf_weight(costs.costs, allocated, user_capacities(topology.spec.weights), default_capacity)
    weights = _with_weight(topology.spec.weights, weight)
    changed = weights != list(topology.spec.weights)
    skipped = [*measurements.skipped, *costs.unlabelled]
    measured = len(costs.costs)
    ready = condition(
        previous.conditions,
        keys.CONDITION_READY,
        True,
        "CostsComputed",
        f"{measured} zone and region pairs measured from {measurements.used} measurements"
        + (f", {len(costs.missing)} pairs without measurements" if costs.missing else "")
        + (f", {len(skipped)} entries skipped" if skipped else ""),
        now,
        generation,
    )
    status = previous.model_copy(
        update={
            **update,
            "weight_calculation_time": now
            if changed or previous.weight_calculation_time is None
            else previous.weight_calculation_time,
            "netperf": NetperfSummary(
                config_maps=measurements.config_maps,
                measurements=measurements.used,
                skipped=len(skipped),
                skipped_entries=[str(entry) for entry in skipped[:SKIPPED_SHOWN]] or None,
            ),
            "missing_costs": [
                MissingCost(topology_key=key, origin=origin, destination=destination)
                for key, origin, destination in costs.missing
            ]
            or None,
            "conditions": [ready],
        }
    )
    spec = topology.spec.model_copy(update={"weights": weights})
    return TopologyResult(topology.model_copy(update={"spec": spec, "status": status}), skipped)


def invalid_spec_status(
    previous: Mapping[str, Any] | None, generation: int | None, message: str, now: datetime.datetime
) -> NetworkTopologyStatus:
    """The status of a NetworkTopology whose spec does not parse (:func:`invalid_spec`), from its status as read
    (one that does not parse either is started afresh)."""
    try:
        status = NetworkTopologyStatus.model_validate(dict(previous or {}))
    except pydantic.ValidationError:
        status = NetworkTopologyStatus()
    return invalid_spec(status, message, now, generation)
