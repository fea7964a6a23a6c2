"""Cluster objects for the rebalancer's tests (engine and emulator): nodes in zones with a bandwidth, a
NetworkTopology of zone costs, Deployments' running pods (owned by a ReplicaSet of a revision), AppGroups."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from operators.api import keys
from operators.api.config.scheduler import NetworkOverheadArgs, SchedulerConfig

NS = "shop"
TOPOLOGY = "nt"
ZONE_COST = 10
CONFIG = replace(SchedulerConfig(), overhead=NetworkOverheadArgs((NS,), keys.USER_DEFINED_WEIGHT, TOPOLOGY))


def node(name: str, zone: str, cpu: str = "4", bandwidth: str = "1G", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {keys.HOSTNAME_LABEL: name, keys.ZONE_LABEL: zone, keys.REGION_LABEL: "r1"},
            "annotations": {keys.NODE_BANDWIDTH_KOORDINATOR: bandwidth},
        },
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }


def topology(zones: list[str]) -> dict[str, Any]:
    origins = [
        {"origin": a, "costList": [{"destination": b, "networkCost": ZONE_COST} for b in zones if b != a]}
        for a in zones
    ]
    return {
        "apiVersion": f"{keys.NETWORKTOPOLOGY_GROUP}/{keys.V1ALPHA1}",
        "kind": "NetworkTopology",
        "metadata": {"name": TOPOLOGY, "namespace": NS},
        "spec": {
            "configmapName": "netperf",
            "weights": [{"name": keys.USER_DEFINED_WEIGHT, "topologyList": [
                {"topologyKey": keys.ZONE_LABEL, "originList": origins}]}],
        },
    }  # fmt: skip


def pod(
    name: str,
    on: str,
    workload: str = "",
    group: str = "",
    egress: str = "",
    cpu: str = "100m",
    owner: str = "ReplicaSet",
    revision: str = "h1",
) -> dict[str, Any]:
    """A running pod of a Deployment ``workload`` (ReplicaSet ``<workload>-<revision>``), in AppGroup ``group``
    when given, asking ``egress`` bandwidth when given."""
    labels = {"pod-template-hash": revision} if owner == "ReplicaSet" else {}
    if group:
        labels |= {keys.APPGROUP_LABEL: group, keys.APPGROUP_WORKLOAD_LABEL: workload}
    owners = [{"apiVersion": "apps/v1", "kind": owner, "name": f"{workload}-{revision}" if owner == "ReplicaSet"
               else workload, "uid": "u", "controller": True}] if owner else []  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": labels,
            "annotations": {keys.EGRESS_BANDWIDTH: egress} if egress else {},
            "ownerReferences": owners,
        },
        "spec": {"nodeName": on, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": "Running"},
    }


def appgroup(
    name: str, graph: dict[str, list[str]], plan: bool = True, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    workloads = [
        {
            "workload": {"kind": "Deployment", "name": w, "selector": w, "apiVersion": "apps/v1"},
            "dependencies": [
                {"workload": {"kind": "Deployment", "name": d, "selector": d, "apiVersion": "apps/v1"}}
                for d in children
            ],
        }
        for w, children in graph.items()
    ]
    marks = {keys.ORDERED_SCHEDULING: "plan"} if plan else {}
    return {
        "apiVersion": f"{keys.APPGROUP_GROUP}/{keys.V1ALPHA1}",
        "kind": "AppGroup",
        "metadata": {"name": name, "namespace": NS, "annotations": {**marks, **(annotations or {})}},
        "spec": {"numMembers": len(workloads), "topologySortingAlgorithm": "KahnSort", "workloads": workloads},
    }
