"""Why no node fits: the summary lines of `netaware explain pod`, on hand-built cases."""

from __future__ import annotations

from typing import Any

from operators.api.config.scheduler import NetworkOverheadArgs, SchedulerConfig
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.scheduling.explain import bits, why_not
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.schedule import schedule

CONFIG = SchedulerConfig(overhead=NetworkOverheadArgs(("default",), "UserDefined", "nt"))


def node(name: str, zone: str) -> dict[str, Any]:
    labels = {"topology.kubernetes.io/region": "r1", "topology.kubernetes.io/zone": zone}
    annotations = {"node.koordinator.sh/network-bandwidth": "1G"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
    }


def pod(name: str, selector: str = "", group: str = "shop", node_name: str = "", ingress: str = "") -> dict[str, Any]:
    labels = {"appgroup.diktyo.x-k8s.io": group, "appgroup.diktyo.x-k8s.io.workload": selector} if selector else {}
    annotations = {"kubernetes.io/ingress-request": ingress} if ingress else {}
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if node_name:
        spec["nodeName"] = node_name
    meta = {"name": name, "namespace": "default", "labels": labels, "annotations": annotations}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Running"}}


APPGROUP = {
    "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
    "kind": "AppGroup",
    "metadata": {"name": "shop", "namespace": "default"},
    "spec": {
        "numMembers": 2,
        "topologySortingAlgorithm": "KahnSort",
        "workloads": [
            {
                "workload": {"kind": "Deployment", "name": "web", "selector": "web"},
                "dependencies": [
                    {"workload": {"kind": "Deployment", "name": "db", "selector": "db"}, "maxNetworkCost": 1}
                ],
            },
            {"workload": {"kind": "Deployment", "name": "db", "selector": "db"}},
        ],
    },
}
TOPOLOGY = {
    "apiVersion": "networktopology.diktyo.x-k8s.io/v1alpha1",
    "kind": "NetworkTopology",
    "metadata": {"name": "nt", "namespace": "default"},
    "spec": {
        "configmapName": "x",
        "weights": [
            {
                "name": "UserDefined",
                "topologyList": [
                    {
                        "topologyKey": "topology.kubernetes.io/zone",
                        "originList": [
                            {"origin": "Z1", "costList": [{"destination": "Z2", "networkCost": 5}]},
                            {"origin": "Z2", "costList": [{"destination": "Z1", "networkCost": 5}]},
                        ],
                    }
                ],
            }
        ],
    },
}
NODES = [node("n-1", "Z1"), node("n-2", "Z2"), node("n-3", "Z2")]


def explained(subject: dict[str, Any], *objects: dict[str, Any]) -> list[str]:
    snapshot = build_snapshot([*NODES, *objects])
    return why_not(schedule(Pod.parse(subject), ClusterIndex.build(snapshot), CONFIG))


def test_bandwidth_exhausted() -> None:
    # 1G per node; n-1 already carries 900M in: 200M more fits nowhere on n-1, and 2G fits nowhere at all
    lines = explained(pod("big", ingress="2G"), pod("busy", node_name="n-1", ingress="900M"))
    assert lines == [
        "NetworkBandwidth: 3 of 3 nodes: insufficient ingress bandwidth (n-1: requested 2G bits/s, free 100M)"
    ]
    assert explained(pod("mid", ingress="200M"), pod("busy", node_name="n-1", ingress="900M")) == [
        "NetworkBandwidth: 1 of 3 nodes: insufficient ingress bandwidth (n-1: requested 200M bits/s, free 100M)"
    ]


def test_cost_too_high() -> None:
    # db runs on n-1 (Z1); web wants it within cost 1: n-1 (same node) and nowhere in Z2 (cost 5)
    lines = explained(pod("web-0", "web"), APPGROUP, TOPOLOGY, pod("db-0", "db", node_name="n-1"))
    assert lines == [
        "NetworkOverhead: 2 of 3 nodes: more of its dependencies' placed pods are beyond maxNetworkCost than within "
        "it (n-2: Satisfied: 0 Violated: 1)"
    ]


def test_appgroup_missing() -> None:
    assert explained(pod("web-0", "web", group="ghost"), TOPOLOGY) == [
        "NetworkOverhead: 3 of 3 nodes: AppGroup ghost not found in namespaces default"
    ]


def test_networktopology_missing() -> None:
    assert explained(pod("web-0", "web"), APPGROUP) == [
        "NetworkOverhead: 3 of 3 nodes: NetworkTopology nt not found in namespaces default"
    ]


def test_nothing_to_say_when_every_node_passes() -> None:
    assert explained(pod("small", ingress="1M")) == []


def test_bits() -> None:
    assert [bits(v) for v in (999, 1000, 200_000_000, 1_500_000_000, 10**16)] == ["999", "1k", "200M", "1.5G", "10P"]
