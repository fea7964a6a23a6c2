#!/usr/bin/env python3
"""A cluster of the budget table's size (docs/design/contracts.md) served by the API emulator in a process of its
own, for the live benchmarks.

    python -m benchmarks.live_cluster --nodes 5000 --pods 100000 --groups 500

prints ``READY <url>`` once it serves. Objects look like a real cluster's: pods of Deployments with
managedFields, an image, env, probes, a service-account volume and the status the kubelet writes; nodes with
conditions, addresses, node info and images (so that what a component keeps of them is measured against what
the API server really sends). Every pod belongs to one of ``--groups`` AppGroups (four workloads, a chain of
dependencies) and asks for bandwidth; every fifth pod has a required anti-affinity to its replicas per hostname
or a DoNotSchedule zone spread over them (:func:`constraints`); every node has a zone (50) and a region (5) and a
capacity.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
from typing import Any

ZONES = 50
REGIONS = 5
WORKLOADS = 4


def node(index: int) -> dict[str, Any]:
    zone = index % ZONES
    name = f"node-{index:05d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m5.8xlarge",
                "topology.kubernetes.io/region": f"r{zone % REGIONS}",
                "topology.kubernetes.io/zone": f"z{zone}",
                "type": "kwok",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "kwok.x-k8s.io/node": "fake",
                "node.koordinator.sh/network-bandwidth": "10G",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "managedFields": [
                {
                    "manager": "kwok",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": {"f:conditions": {f'k:{{"type":"{c}"}}': {} for c in "ABCDE"}}},
                }
            ],
        },
        "spec": {"podCIDR": f"10.{index // 256}.{index % 256}.0/24", "providerID": f"kwok://{name}"},
        "status": {
            "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "conditions": [
                {
                    "type": kind,
                    "status": "False" if kind != "Ready" else "True",
                    "lastHeartbeatTime": "2026-11-23T00:00:00Z",
                    "lastTransitionTime": "2026-11-01T00:00:00Z",
                    "reason": f"Kubelet{kind}",
                    "message": f"kubelet reports {kind}",
                }
                for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable", "Ready")
            ],
            "addresses": [{"type": "InternalIP", "address": f"10.1.{index // 256}.{index % 256}"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": "",
                "containerRuntimeVersion": "kwok-v0.7.0",
                "kernelVersion": "6.1.0",
                "kubeProxyVersion": "v1.37.2",
                "kubeletVersion": "v1.37.2",
                "machineID": "",
                "operatingSystem": "linux",
                "osImage": "Debian GNU/Linux 12",
                "systemUUID": "",
            },
            "images": [
                {"names": [f"registry.example.com/team/app-{i}@sha256:{i:064x}"], "sizeBytes": 100_000_000 + i}
                for i in range(6)
            ],
        },
    }


CONSTRAINED_EVERY = 5  # one pod in five carries kube-scheduler's rules between pods (anti-affinity or a spread)


def constraints(index: int, app: str) -> dict[str, Any]:
    """What every fifth pod adds to its spec, as production charts do: alternately a required anti-affinity to its
    own replicas per hostname and a DoNotSchedule zone spread over them; nothing for the others."""
    if index % CONSTRAINED_EVERY:
        return {}
    mine = {"matchLabels": {"app": app}}
    if index // CONSTRAINED_EVERY % 2:
        term = {"labelSelector": mine, "topologyKey": "kubernetes.io/hostname"}
        return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    spread = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
              "labelSelector": mine}  # fmt: skip
    return {"topologySpreadConstraints": [spread]}


def pod(index: int, nodes: int, groups: int, rng: random.Random) -> dict[str, Any]:
    group = index % groups
    workload = (index // groups) % WORKLOADS
    namespace = f"team-{group % 20}"
    name = f"g{group}-w{workload}-7d4b9c8f6d-{index:06d}"
    bandwidth = rng.choice(("10M", "50M", "100M", "200M"))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "generateName": f"g{group}-w{workload}-7d4b9c8f6d-",
            "uid": f"00000000-0000-0000-0000-{index:012d}",
            "labels": {
                "app": f"g{group}-w{workload}",
                "pod-template-hash": "7d4b9c8f6d",
                "appgroup.diktyo.x-k8s.io": f"g{group}",
                "appgroup.diktyo.x-k8s.io.workload": f"w{workload}",
            },
            "annotations": {
                "kubernetes.io/ingress-bandwidth": bandwidth,
                "kubernetes.io/egress-bandwidth": bandwidth,
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"g{group}-w{workload}-7d4b9c8f6d",
                    "uid": f"11111111-0000-0000-0000-{group * WORKLOADS + workload:012d}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {"f:app": {}}}, "f:spec": {}},
                },
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "subresource": "status",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:podIP": {}}},
                },
            ],
            "creationTimestamp": "2026-11-22T10:00:00Z",
        },
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": f"registry.example.com/team/app-{workload}:1.4.{group % 10}",
                    "ports": [{"containerPort": 8080, "protocol": "TCP", "name": "http"}],
                    "env": [{"name": f"SETTING_{i}", "value": f"value-{i}"} for i in range(4)],
                    "resources": {
                        "requests": {"cpu": "250m", "memory": "256Mi"},
                        "limits": {"cpu": "1", "memory": "512Mi"},
                    },
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
                    "volumeMounts": [
                        {
                            "name": "kube-api-access",
                            "readOnly": True,
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        }
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "volumes": [
                {
                    "name": "kube-api-access",
                    "projected": {"sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]},
                }
            ],
            **constraints(index, f"g{group}-w{workload}"),
            "nodeName": f"node-{rng.randrange(nodes):05d}",
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "schedulerName": "default-scheduler",
            "priority": 0,
            "tolerations": [
                {
                    "key": f"node.kubernetes.io/{what}",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
                for what in ("not-ready", "unreachable")
            ],
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": kind, "status": "True", "lastTransitionTime": "2026-11-22T10:00:05Z"}
                for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "hostIP": "10.1.0.1",
            "podIP": f"10.{index // 65536}.{index // 256 % 256}.{index % 256}",
            "startTime": "2026-11-22T10:00:01Z",
            "containerStatuses": [
                {
                    "name": "app",
                    "ready": True,
                    "restartCount": 0,
                    "image": f"registry.example.com/team/app-{workload}:1.4.{group % 10}",
                    "imageID": "",
                    "containerID": f"kwok://{index:064x}",
                    "started": True,
                    "state": {"running": {"startedAt": "2026-11-22T10:00:04Z"}},
                }
            ],
            "qosClass": "Burstable",
        },
    }


def appgroup(group: int) -> dict[str, Any]:
    workloads = [
        {
            "workload": {"kind": "Deployment", "name": f"g{group}-w{w}", "selector": f"w{w}", "apiVersion": "apps/v1"},
            "dependencies": (
                [
                    {
                        "workload": {"kind": "Deployment", "name": f"g{group}-w{w + 1}", "selector": f"w{w + 1}"},
                        "minBandwidth": "10M",
                        "maxNetworkCost": 25,  # near regions (cost 20 + a + b) pass, far ones do not
                    }
                ]
                if w + 1 < WORKLOADS
                else []
            ),
        }
        for w in range(WORKLOADS)
    ]
    return {
        "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
        "kind": "AppGroup",
        "metadata": {"name": f"g{group}", "namespace": f"team-{group % 20}"},
        "spec": {"numMembers": WORKLOADS, "topologySortingAlgorithm": "KahnSort", "workloads": workloads},
    }


def network_topology(
    zones: int = ZONES, regions: int = REGIONS, name: str = "net-topology-test", configmap: str = "netperf-metrics"
) -> dict[str, Any]:
    """A UserDefined NetworkTopology: zone z<a> in region r<a % regions>, costs 1..9 within a region and 20+ across."""
    zone_costs = [
        {
            "origin": f"z{a}",
            "costList": [
                {"destination": f"z{b}", "networkCost": 1 + (a * b) % 9}
                for b in range(zones)
                if b != a and b % regions == a % regions
            ],
        }
        for a in range(zones)
    ]
    region_costs = [
        {
            "origin": f"r{a}",
            "costList": [{"destination": f"r{b}", "networkCost": 20 + a + b} for b in range(regions) if b != a],
        }
        for a in range(regions)
    ]
    return {
        "apiVersion": "networktopology.diktyo.x-k8s.io/v1alpha1",
        "kind": "NetworkTopology",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "configmapName": configmap,
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


def cluster(nodes: int, pods: int, groups: int, seed: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"team-{i}"}, "status": {"phase": "Active"}}
        for i in range(20)
    ]
    return [
        *namespaces,
        *(node(i) for i in range(nodes)),
        *(appgroup(g) for g in range(groups)),
        network_topology(),
        *(pod(i, nodes, groups, rng) for i in range(pods)),
    ]


async def serve(nodes: int, pods: int, groups: int, history: int) -> None:
    import kmock

    from operators import collector
    from operators.emulator import ApiEmulator

    async with ApiEmulator(history_limit=history) as emulator, kmock.Server(emulator) as server:
        emulator.base_url = str(server.url).rstrip("/")
        emulator._store_objects(cluster(nodes, pods, groups))
        # The emulator stands in for an API server whose collector runs beside it. Python's full collection stops
        # the process for the whole heap: 4 s once the seeded 50,000 nodes and pods were in it, every answer and
        # watch event held meanwhile (measured in bench_burst). The collector is set as netaware's own servers
        # set it, the seeded objects out of its sight.
        collector.for_a_long_run()
        collector.freeze_what_lives()
        # The emulator as a user gets it: its request log is not cleared (it once was, every second, which hid
        # that kmock's matching walked the whole log on every request).
        print(f"READY {emulator.base_url}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=500)
    parser.add_argument("--history", type=int, default=200_000, help="watch events kept per resource")
    args = parser.parse_args()
    asyncio.run(serve(args.nodes, args.pods, args.groups, args.history))


if __name__ == "__main__":
    main()
