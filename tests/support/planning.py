"""Builders of the planning tests: a small zoned cluster, its NetworkTopology, an AppGroup's pods, and the
example configuration (upstream's NetworkOverhead weight)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.planning.plan import Plan, plan_appgroup
from operators.engine.planning.problem import Problem, build_problem
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.simulation import ordered

NAMESPACE = ordered.NAMESPACE
CONFIG = ordered.config()


def node(name: str, zone: str, region: str = "r1", pods: str = "110", taint: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]} if taint else {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {keys.HOSTNAME_LABEL: name, keys.ZONE_LABEL: zone, keys.REGION_LABEL: region},
            "annotations": {keys.NODE_BANDWIDTH_KOORDINATOR: "1G"},
        },
        "spec": spec,
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": pods}},
    }


def topology(zone_cost: int) -> dict[str, Any]:
    """Zones za and zb, ``zone_cost`` apart both ways."""
    return user_defined({keys.ZONE_LABEL: {("za", "zb"): zone_cost, ("zb", "za"): zone_cost}})


def user_defined(levels: dict[str, dict[tuple[str, str], int]]) -> dict[str, Any]:
    """The NetworkTopology with, per topology key, the cost of each (origin, destination)."""
    lists = [
        {"topologyKey": key, "originList": [
            {"origin": origin, "costList": [{"destination": b, "networkCost": cost}
                                            for (a, b), cost in costs.items() if a == origin]}
            for origin in dict.fromkeys(a for a, _ in costs)]}
        for key, costs in levels.items()
    ]  # fmt: skip
    return {
        "apiVersion": f"{keys.NETWORKTOPOLOGY_GROUP}/{keys.V1ALPHA1}", "kind": "NetworkTopology",
        "metadata": {"name": ordered.TOPOLOGY, "namespace": NAMESPACE},
        "spec": {"configmapName": "netperf", "weights": [{"name": keys.USER_DEFINED_WEIGHT, "topologyList": lists}]},
    }  # fmt: skip


def pod(name: str, workload: str, on: str = "", cpu: str = "100m", group: str = "pair",
        spec: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """A pod of ``workload`` in AppGroup ``group`` (bound when ``on`` names a node); ``spec``: more of its spec
    (affinity, topologySpreadConstraints, ...)."""
    body: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], **(spec or {})}
    if on:
        body["nodeName"] = on
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {keys.APPGROUP_LABEL: group, keys.APPGROUP_WORKLOAD_LABEL: workload},
        },
        "spec": body,
        "status": {"phase": "Running" if on else "Pending"},
    }


def plan_of(objects: list[dict[str, Any]], graph: dict[str, list[str]], max_cost: int = 10, **kwargs: Any) -> Plan:
    group = ordered.appgroup("pair", graph, max_cost=max_cost)
    return plan_appgroup(group_index(objects, group), group, CONFIG, **kwargs)


def group_index(objects: list[dict[str, Any]], group: AppGroup) -> ClusterIndex:
    """The index of ``objects`` with ``group`` the cluster's only AppGroup."""
    return ClusterIndex.build(replace(build_snapshot(objects), app_groups=(group,)))


def group_problem(objects: list[dict[str, Any]], group: AppGroup) -> Problem:
    """The plan problem of ``group`` on ``objects`` (:func:`group_index`)."""
    return build_problem(group_index(objects, group), group, CONFIG)


def placed(plan: Plan) -> dict[str, str]:
    return {pod.pod.split("/")[1]: pod.node for pod in plan.pods}


def two_regions(load: dict[str, str], *extra: dict[str, Any]) -> Problem:
    """The problem of AppGroup ``pair`` (a -> b, two pods each of 1 cpu, maxNetworkCost 30) on region r1: za (n1, n2),
    zb (n3), and region r2: zc (n4, n5); nodes of 4 cpus, each with ``load`` (node -> cpus) used by a bound pod;
    za-zb 5, r1-r2 40, two nodes of one zone 1 apart; ``extra``: more objects."""
    objects = [node("n1", "za"), node("n2", "za"), node("n3", "zb"), node("n4", "zc", "r2"), node("n5", "zc", "r2"),
               *(pod(f"load-{name}", "load", on=name, cpu=cpu, group="other") for name, cpu in load.items()),
               user_defined({keys.ZONE_LABEL: {("za", "zb"): 5, ("zb", "za"): 5},
                             keys.REGION_LABEL: {("r1", "r2"): 40, ("r2", "r1"): 40}}),
               *(pod(f"{w}-{i}", w, cpu="1") for w in "ab" for i in range(2)), *extra]  # fmt: skip
    return pair_problem(objects)


def pair_problem(objects: list[dict[str, Any]]) -> Problem:
    """The problem of AppGroup ``pair`` (a -> b, maxNetworkCost 30) on ``objects``."""
    return group_problem(objects, ordered.appgroup("pair", {"a": ["b"], "b": []}, max_cost=30))
