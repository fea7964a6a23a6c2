"""Random clusters for the scheduling tests (nodes in zones, AppGroups, placed pods), from a seeded RNG."""

from __future__ import annotations

import random
from typing import Any


def random_cluster(rng: random.Random, nodes: int = 30, zones: int = 6) -> list[dict[str, Any]]:
    """Nodes over 2 regions, costs between zones and regions, 3 AppGroups of 4 workloads (each depending on
    all the later ones, random maxNetworkCost) with placed pods: many (satisfied, violated) pairs."""
    objects: list[dict[str, Any]] = []
    for i in range(nodes):
        labels = {"topology.kubernetes.io/region": f"r{i % zones % 2}", "topology.kubernetes.io/zone": f"z{i % zones}"}
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"n{i:02d}", "labels": labels},
                "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
            }
        )
    zone_costs = [
        {"origin": f"z{a}", "costList": [{"destination": f"z{b}", "networkCost": rng.randint(2, 30)}]}
        for a in range(zones)
        for b in range(zones)
        if a != b and a % 2 == b % 2
    ]
    region_costs = [
        {"origin": f"r{a}", "costList": [{"destination": f"r{1 - a}", "networkCost": rng.randint(10, 40)}]}
        for a in range(2)
    ]
    objects.append(
        {
            "apiVersion": "networktopology.diktyo.x-k8s.io/v1alpha1",
            "kind": "NetworkTopology",
            "metadata": {"name": "net-topology-test", "namespace": "default"},
            "spec": {
                "configmapName": "x",
                "weights": [
                    {
                        "name": "UserDefined",
                        "topologyList": [
                            {"topologyKey": "topology.kubernetes.io/region", "originList": region_costs},
                            {"topologyKey": "topology.kubernetes.io/zone", "originList": zone_costs},
                        ],
                    }
                ],
            },
        }
    )
    for group in range(3):
        workloads = [
            {
                "workload": {"kind": "Deployment", "name": f"w{w}", "selector": f"w{w}"},
                "dependencies": [
                    {
                        "workload": {"kind": "Deployment", "name": f"w{d}", "selector": f"w{d}"},
                        "maxNetworkCost": rng.randint(0, 30),
                    }
                    for d in range(w + 1, 4)
                ],
            }
            for w in range(4)
        ]
        objects.append(
            {
                "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
                "kind": "AppGroup",
                "metadata": {"name": f"g{group}", "namespace": "default"},
                "spec": {"numMembers": 4, "topologySortingAlgorithm": "KahnSort", "workloads": workloads},
            }
        )
    for i in range(40):
        labels = {"appgroup.diktyo.x-k8s.io": f"g{i % 3}", "appgroup.diktyo.x-k8s.io.workload": f"w{rng.randint(1, 3)}"}
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p{i}", "namespace": "default", "labels": labels},
                "spec": {"nodeName": f"n{rng.randrange(nodes):02d}"},
                "status": {"phase": "Running"},
            }
        )
    return objects
