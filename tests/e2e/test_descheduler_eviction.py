"""The live descheduler on the real API server: evictions through the Eviction API, a real
PodDisruptionBudget (429 while it is spent), replacements recreated by the ReplicaSet controller and placed
by kube-scheduler; run with the chart's operator token."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from hack.control_plane.cluster import ControlPlane
from tests.support.e2e import (
    RELEASE_NAMESPACE,
    create_namespace,
    delete_namespace,
    eventually,
    forbidden,
    kubectl_json,
    running,
)

pytestmark = pytest.mark.e2e

NAMESPACE = "desched-e2e"
POLICY = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerConfiguration",
    "deschedulingInterval": "2s",
    "dryRun": False,
    "maxNoOfPodsToEvictPerNode": 2,
    "profiles": [
        {
            "name": "e2e",
            "plugins": {"balance": {"enabled": ["LowNodeLoad"]}},
            "pluginConfig": [
                {
                    "name": "LowNodeLoad",
                    "args": {
                        "lowThresholds": {"netBandwidth": 30},
                        "highThresholds": {"netBandwidth": 70},
                        "accountingMode": "combined",
                        "nodeSelector": "desched=e2e",
                        "evictableNamespaces": {"include": [NAMESPACE]},
                        "nodeFit": False,
                        "anomalyCondition": {"consecutiveAbnormalities": 1},
                    },
                }
            ],
        }
    ],
}


def node(name: str, bandwidth: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"desched": "e2e"},
            "annotations": {"node.koordinator.sh/network-bandwidth": bandwidth},
        },
        "status": {"allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110"}},
    }


def replica_set(node_selector: dict[str, str]) -> dict[str, Any]:
    labels = {"app": "web"}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": NAMESPACE},
        "spec": {
            "replicas": 9,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {"kubernetes.io/ingress-bandwidth": "50M", "kubernetes.io/egress-bandwidth": "50M"},
                },
                "spec": {
                    "nodeSelector": node_selector,
                    "containers": [{"name": "web", "image": "registry.example/web:1"}],
                },
            },
        },
    }


def pods(cluster: ControlPlane) -> list[dict[str, Any]]:
    return list(kubectl_json(cluster, "get", "pods", "-n", NAMESPACE, "-l", "app=web")["items"])


def reasons(cluster: ControlPlane) -> list[str]:
    return [event["reason"] for event in kubectl_json(cluster, "get", "events", "-n", NAMESPACE)["items"]]


def test_evictions_honour_a_real_budget_and_replacements_are_recreated(
    cluster: ControlPlane, chart_rbac: dict[str, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(
        "\n---\n".join(json.dumps(n) for n in (node("hot", "1G"), node("cold-a", "10G"), node("cold-b", "10G")))
    )
    cluster.add_nodes(nodes)
    create_namespace(cluster, NAMESPACE)
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": NAMESPACE},
        "spec": {"minAvailable": 9, "selector": {"matchLabels": {"app": "web"}}},
    }
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(budget))
    # all nine on `hot`: 9 x 100M of 1G = 90 % > 70 %
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(replica_set({"kubernetes.io/hostname": "hot"})))
    eventually(lambda: len([p for p in pods(cluster) if p["status"].get("phase") == "Running"]) == 9, 90, "9 pods up")
    # new replicas may go anywhere of the pool; the running ones stay where they are
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(replica_set({"desched": "e2e"})))
    policy = tmp_path / "policy.yaml"
    policy.write_text(json.dumps(POLICY))
    args = ["run", "--kubeconfig", str(chart_rbac["operator"]), "--components", "descheduler"]
    args += ["--descheduler-policy", str(policy), "--leader-election-namespace", RELEASE_NAMESPACE]
    args += ["--leader-election-id", "netaware-descheduler-e2e", "--health-port", "0"]
    try:
        with running(args, tmp_path / "descheduler.log") as process:
            # 1. the budget is spent (minAvailable 9 of 9): the API answers 429, nothing is evicted
            eventually(lambda: "EvictionRefused" in reasons(cluster), 60, "a refused eviction")
            assert len(pods(cluster)) == 9 and all(p["spec"]["nodeName"] == "hot" for p in pods(cluster))
            # 2. the budget allows disruptions: evictions go through, the ReplicaSet recreates the pods elsewhere
            cluster.kubectl(
                "patch", "pdb", "web", "-n", NAMESPACE, "--type=merge", "-p", '{"spec": {"minAvailable": 7}}'
            )
            eventually(lambda: "Descheduled" in reasons(cluster), 60, "an eviction")
            eventually(
                lambda: (
                    sum(1 for p in pods(cluster) if p["spec"].get("nodeName", "hot") != "hot") >= 1
                    and len([p for p in pods(cluster) if p["status"].get("phase") == "Running"]) == 9
                ),
                90,
                "a replacement running off the hot node",
            )
            assert "Traceback" not in process.text()
        assert forbidden(cluster, "operator") == []
    finally:
        delete_namespace(cluster, NAMESPACE)
