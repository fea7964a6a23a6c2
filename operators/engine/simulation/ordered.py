"""AppGroup scenarios: what topology-ordered scheduling does to the network cost of a placement (pure).

An AppGroup's pods are scheduled one by one onto a zoned cluster with a NetworkTopology, by netaware's plugins
(:func:`operators.engine.scheduling.schedule.schedule`, NetworkOverhead weighted 5 as upstream's example
configuration), with the pods' bandwidth requests as the webhook would set them (from the AppGroup's
``minBandwidth``). Three arrival orders:

* ``arrival``: the pods in random order, as Deployments created together reach kube-scheduler's queue;
* ``topologyOrder``: sorted by ``status.topologyOrder`` (upstream's TopologicalSort queue: a workload before the
  workloads it depends on);
* ``gates``: released in waves by netaware's gate rule (:func:`operators.engine.status.gates.gate_plan`, the
  controller's own), each wave in random order; a wave waits until the previous one is bound.

The placement is scored per dependency edge: for every pod of a workload and every pod of a workload it
depends on, the cost between their nodes (same node 0, same zone 1, else the topology's zone or region cost,
100 when unknown — NetworkOverhead's own rules), and whether it is within the edge's ``maxNetworkCost``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.api.config.scheduler import NETWORK_OVERHEAD, NetworkOverheadArgs, SchedulerConfig
from operators.engine.admission.pod_bandwidth import admit_pod
from operators.engine.cluster.objects import Node, Pod
from operators.engine.cluster.snapshot import Snapshot, build_snapshot
from operators.engine.planning.plan import plan_appgroup
from operators.engine.scheduling.explain import dependency_pair_costs
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.schedule import schedule
from operators.engine.status.appgroup import ordered_entries
from operators.engine.status.gates import GATE, gate_plan

ORDERS = ("arrival", "topologyOrder", "gates", "plan")
TOPOLOGY = "nt-sim"
NAMESPACE = "default"

# Online Boutique as in upstream's TopologicalSort tests (hack/examples/appgroup-onlineboutique.yaml).
BOUTIQUE: dict[str, list[str]] = {
    "frontend": ["cartservice", "productcatalog", "currency", "shipping", "checkout", "recommendation", "ad"],
    "cartservice": ["redis-cart"],
    "productcatalog": [],
    "currency": [],
    "payment": [],
    "shipping": [],
    "email": [],
    "checkout": ["cartservice", "productcatalog", "currency", "payment", "shipping", "email"],
    "recommendation": ["productcatalog"],
    "ad": [],
    "redis-cart": [],
}


@dataclass(frozen=True)
class AppScenario:
    """A cluster (nodes and a NetworkTopology), an AppGroup, and its pods (unbound, labelled, with bandwidth)."""

    name: str
    cluster: tuple[dict[str, Any], ...]
    group: AppGroup
    pods: tuple[Pod, ...]


def zoned_cluster(
    regions: int = 2, zones: int = 2, nodes_per_zone: int = 4, bandwidth: str = "1G"
) -> tuple[dict[str, Any], ...]:
    """Nodes in ``regions`` x ``zones`` and a UserDefined NetworkTopology: region pairs cost 20, zone pairs of
    one region 5 (as the seeds' example)."""
    nodes: list[dict[str, Any]] = []
    zone_names: dict[str, list[str]] = {}
    for r in range(regions):
        region = f"region-{r + 1}"
        for z in range(zones):
            zone = f"{region}-z{z + 1}"
            zone_names.setdefault(region, []).append(zone)
            for n in range(nodes_per_zone):
                name = f"{zone}-n{n + 1}"
                nodes.append(
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {
                            "name": name,
                            "labels": {keys.HOSTNAME_LABEL: name, keys.REGION_LABEL: region, keys.ZONE_LABEL: zone},
                            "annotations": {keys.NODE_BANDWIDTH_KOORDINATOR: bandwidth},
                        },
                        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}},
                    }
                )

    def origins(names: list[str], cost: int) -> list[dict[str, Any]]:
        return [
            {"origin": a, "costList": [{"destination": b, "networkCost": cost} for b in names if b != a]} for a in names
        ]

    topology_list = [{"topologyKey": keys.REGION_LABEL, "originList": origins(list(zone_names), 20)}]
    zone_origins = [entry for names in zone_names.values() for entry in origins(names, 5)]
    topology_list.append({"topologyKey": keys.ZONE_LABEL, "originList": zone_origins})
    topology = {
        "apiVersion": f"{keys.NETWORKTOPOLOGY_GROUP}/{keys.V1ALPHA1}",
        "kind": "NetworkTopology",
        "metadata": {"name": TOPOLOGY, "namespace": NAMESPACE},
        "spec": {
            "configmapName": "netperf",
            "weights": [{"name": keys.USER_DEFINED_WEIGHT, "topologyList": topology_list}],
        },
    }
    return (*nodes, topology)


def appgroup(name: str, graph: dict[str, list[str]], bandwidth: str = "50M", max_cost: int = 10) -> AppGroup:
    """An AppGroup of Deployments named by their selectors, every dependency with ``bandwidth`` and
    ``maxNetworkCost``, with the status the controller writes (Ready, the KahnSort order)."""
    workloads = [
        {
            "workload": {"kind": "Deployment", "name": selector, "selector": selector, "apiVersion": "apps/v1"},
            "dependencies": [
                {
                    "workload": {"kind": "Deployment", "name": child, "selector": child, "apiVersion": "apps/v1"},
                    "minBandwidth": bandwidth,
                    "maxNetworkCost": max_cost,
                }
                for child in children
            ],
        }
        for selector, children in graph.items()
    ]
    group = AppGroup.model_validate(
        {
            "apiVersion": f"{keys.APPGROUP_GROUP}/{keys.V1ALPHA1}",
            "kind": "AppGroup",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"numMembers": len(workloads), "topologySortingAlgorithm": "KahnSort", "workloads": workloads},
        }
    )
    order = [entry.model_dump(mode="json", by_alias=True) for entry in ordered_entries(group.spec)]
    return AppGroup.model_validate({**group.model_dump(mode="json", by_alias=True), "status": {"topologyOrder": order}})


def random_dag(workloads: int, edge_probability: float, rng: random.Random) -> dict[str, list[str]]:
    """``w1..wN``, each depending on later workloads with ``edge_probability`` (acyclic by construction)."""
    names = [f"w{index + 1}" for index in range(workloads)]
    return {
        name: [other for other in names[index + 1 :] if rng.random() < edge_probability]
        for index, name in enumerate(names)
    }


def app_scenario(
    name: str, graph: dict[str, list[str]], replicas: int, cluster: tuple[dict[str, Any], ...]
) -> AppScenario:
    """``replicas`` pods per workload of ``graph``, with the bandwidth requests the webhook would add."""
    group = appgroup(name, graph)
    pods = []
    for selector in graph:
        for replica in range(replicas):
            raw: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{selector}-{replica}",
                    "namespace": NAMESPACE,
                    "labels": {keys.APPGROUP_LABEL: name, keys.APPGROUP_WORKLOAD_LABEL: selector},
                    "creationTimestamp": "2026-11-23T00:00:00Z",
                },
                "spec": {"containers": [{"name": "app"}], "schedulingGates": [{"name": GATE}]},
                "status": {"phase": "Pending"},
            }
            raw["metadata"]["annotations"] = admit_pod(raw, (group,), None).annotations({})
            pods.append(Pod.parse(raw))
    return AppScenario(name, cluster, group, tuple(pods))


def boutique(replicas: int = 3, cluster: tuple[dict[str, Any], ...] | None = None) -> AppScenario:
    return app_scenario("boutique", BOUTIQUE, replicas, cluster or zoned_cluster())


def config() -> SchedulerConfig:
    base = SchedulerConfig()
    weights = {**base.weights, NETWORK_OVERHEAD: 5}  # upstream's example configuration
    return replace(
        base, weights=weights, overhead=NetworkOverheadArgs((NAMESPACE,), keys.USER_DEFINED_WEIGHT, TOPOLOGY)
    )


def _bound(pod: Pod, node: str | None) -> Pod:
    raw = {**pod.raw, "spec": {**pod.raw["spec"], "schedulingGates": []}}
    if node is not None:
        raw["spec"]["nodeName"] = node
    return Pod.parse(raw)


def place(scenario: AppScenario, order: str, rng: random.Random) -> dict[str, str | None]:
    """Schedule the scenario's pods in ``order``: pod name -> node (None: no node fits)."""
    settings = config()
    base = build_snapshot(list(scenario.cluster))
    placed: dict[str, Pod] = {}
    result: dict[str, str | None] = {}

    def run(batch: list[Pod]) -> None:
        for pod in batch:
            snapshot = Snapshot(
                nodes=base.nodes, network_topologies=base.network_topologies, app_groups=(scenario.group,),
                pods=tuple(placed.values()),
            )  # fmt: skip
            selected = schedule(_bound(pod, None), ClusterIndex.build(snapshot), settings, detail=False).selected
            result[pod.name] = selected
            placed[pod.name] = _bound(pod, selected)

    arrival = list(scenario.pods)
    rng.shuffle(arrival)
    if order == "arrival":
        run(arrival)
    elif order == "topologyOrder":
        index = {entry.workload.selector: entry.index for entry in scenario.group.status.topology_order or ()}  # type: ignore[union-attr]
        run(sorted(arrival, key=lambda pod: index[pod.labels[keys.APPGROUP_WORKLOAD_LABEL]]))
    elif order == "gates":
        gated = {pod.name: pod for pod in arrival}
        while gated:
            members = [*placed.values(), *(gated[name] for name in gated)]
            released = {item.pod.name for item in gate_plan(scenario.group, members, None).release}
            if not released:  # only pods held by a dependency that never placed: the timeout releases them
                released = set(gated)
            run([pod for pod in arrival if pod.name in released])
            for name in released:
                gated.pop(name)
    elif order == "plan":  # the whole group planned at once, each pod bound where the plan says
        snapshot = replace(base, app_groups=(scenario.group,), pods=tuple(arrival))
        seed = rng.randrange(2**31)
        planned = plan_appgroup(ClusterIndex.build(snapshot), scenario.group, settings, seed=seed)
        by_key = {pod.pod: pod.node for pod in planned.pods}
        result.update({pod.name: by_key.get(pod.key) for pod in arrival})
    else:
        raise ValueError(f"order {order!r} is not one of {', '.join(ORDERS)}")
    return result


@dataclass(frozen=True)
class EdgeCosts:
    pairs: int
    mean: float
    p90: float
    within: float  # fraction of pairs within their maxNetworkCost
    unscheduled: int

    def to_json(self) -> dict[str, float | int]:
        return {
            "edgePairs": self.pairs,
            "meanCost": round(self.mean, 2),
            "p90Cost": round(self.p90, 2),
            "withinMaxNetworkCost": round(self.within, 3),
            "unscheduled": self.unscheduled,
        }


def edge_costs(scenario: AppScenario, placement: dict[str, str | None]) -> EdgeCosts:
    """The cost of every (pod, pod of a dependency) pair of the placement (see the module docstring)."""
    snapshot = build_snapshot(list(scenario.cluster))
    nodes: dict[str, Node] = {node.name: node for node in snapshot.nodes}
    costs = ClusterIndex.build(replace(snapshot, app_groups=(scenario.group,))).cost_map(config().overhead) or {}
    placed = [
        (pod.labels[keys.APPGROUP_WORKLOAD_LABEL], node)
        for pod in scenario.pods
        if (node := placement.get(pod.name)) is not None
    ]
    pairs = dependency_pair_costs(scenario.group, placed, nodes, costs)
    unscheduled = sum(1 for node in placement.values() if node is None)
    if not pairs:
        return EdgeCosts(0, 0.0, 0.0, 1.0, unscheduled)
    array = np.array([pair.cost for pair in pairs], dtype=np.float64)
    within = sum(pair.within for pair in pairs) / len(pairs)
    return EdgeCosts(len(pairs), float(array.mean()), float(np.percentile(array, 90)), within, unscheduled)


def compare(scenario: AppScenario, seeds: int = 5, seed: int = 1) -> dict[str, dict[str, Any]]:
    """Each order's edge costs, averaged over ``seeds`` random arrivals (seed, seed+1, ...)."""
    report: dict[str, dict[str, Any]] = {}
    for order in ORDERS:
        runs = [edge_costs(scenario, place(scenario, order, random.Random(seed + k))) for k in range(seeds)]
        report[order] = {
            "edgePairs": runs[0].pairs,
            "meanCost": round(sum(r.mean for r in runs) / seeds, 2),
            "p90Cost": round(sum(r.p90 for r in runs) / seeds, 2),
            "withinMaxNetworkCost": round(sum(r.within for r in runs) / seeds, 3),
            "unscheduled": max(r.unscheduled for r in runs),
        }
    return report
