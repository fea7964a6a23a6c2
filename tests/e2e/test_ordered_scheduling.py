"""Topology-ordered scheduling on the real control plane: the API server calls `netaware webhook` (which adds the
gate), the real kube-scheduler leaves gated pods alone, `netaware run` (the chart's operator ServiceAccount)
removes the gates dependencies first, and the kube-controller-manager's Deployments create the pods, all at
once, dependents first in one `kubectl apply`."""

from __future__ import annotations

import json
import pathlib
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from hack.control_plane import cluster as control_plane
from hack.control_plane.cluster import ControlPlane
from hack.control_plane.objects import member_deployment
from tests.support.e2e import (
    create_namespace,
    delete_namespace,
    eventually,
    forbidden,
    gated_at_admission,
    gating_components,
    kubectl_json,
    running,
    service_account,
    wait_for_port,
)

pytestmark = pytest.mark.e2e

NAMESPACE = "ordered-e2e"
HOOK = "netaware-ordered-e2e"  # the webhook configuration and the leader election id
FOREIGN = "example.com/quota"
GRAPH = {"frontend": ["cart", "catalog"], "cart": ["redis"], "catalog": [], "redis": [], "batch": []}
REPLICAS = {"frontend": 2, "cart": 2, "catalog": 1, "redis": 2, "batch": 1}


def appgroup() -> dict[str, Any]:
    return {
        "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
        "kind": "AppGroup",
        "metadata": {
            "name": "shop",
            "namespace": NAMESPACE,
            "annotations": {"netaware.io/ordered-scheduling": "true", "netaware.io/ordered-scheduling-timeout": "40"},
        },
        "spec": {
            "numMembers": len(GRAPH),
            "topologySortingAlgorithm": "KahnSort",
            "workloads": [
                {
                    "workload": {"kind": "Deployment", "name": s, "selector": s, "apiVersion": "apps/v1"},
                    "dependencies": [
                        {"workload": {"kind": "Deployment", "name": d, "selector": d, "apiVersion": "apps/v1"}}
                        for d in children
                    ],
                }
                for s, children in GRAPH.items()
            ],
        },
    }


def deployment(selector: str) -> dict[str, Any]:
    gates = (FOREIGN,) if selector == "batch" else ()
    return member_deployment(NAMESPACE, "shop", selector, REPLICAS[selector], gates=gates)


class BindingWatch:
    """`kubectl get pods --watch` in a thread: when each pod was first seen bound to a node (this host's clock)."""

    def __init__(self, cluster: ControlPlane) -> None:
        template = (
            '{.metadata.name} {.metadata.labels.appgroup\\.diktyo\\.x-k8s\\.io\\.workload} {.spec.nodeName}{"\\n"}'
        )
        command = [str(control_plane.BIN / "kubectl"), "--kubeconfig", str(cluster.kubeconfig)]
        command += ["get", "pods", "-n", NAMESPACE, "--watch", "-o", f"jsonpath={template}"]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        self.bound: dict[str, tuple[str, float]] = {}  # pod -> (workload, when)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            parts = line.split()
            if len(parts) == 3 and parts[0] not in self.bound:
                self.bound[parts[0]] = (parts[1], time.time())

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


@pytest.fixture
def ordered_namespace(cluster: ControlPlane) -> Iterator[str]:
    create_namespace(cluster, NAMESPACE)
    try:
        yield NAMESPACE
    finally:
        delete_namespace(cluster, NAMESPACE)
        cluster.kubectl("delete", "mutatingwebhookconfiguration", HOOK, "--ignore-not-found")


def gates(pod: dict[str, Any]) -> list[str]:
    return [gate["name"] for gate in pod["spec"].get("schedulingGates") or ()]


def pods(cluster: ControlPlane) -> list[dict[str, Any]]:
    return list(kubectl_json(cluster, "get", "pods", "-n", NAMESPACE)["items"])


def test_deployments_created_dependents_first_are_bound_dependencies_first(
    cluster: ControlPlane,
    chart_rbac: dict[str, pathlib.Path],
    host_tls: dict[str, Any],
    ordered_namespace: str,
    tmp_path: pathlib.Path,
) -> None:
    port, configuration, webhook, operator = gating_components(chart_rbac, host_tls, HOOK, NAMESPACE)
    with running(operator, tmp_path / "operator.log") as run, running(webhook, tmp_path / "webhook.log") as hooked:
        eventually(lambda: "running appgroup" in run.text(), 60, "the operator running")
        wait_for_port(port, process=hooked)
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(appgroup()))
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(configuration))

        template = deployment("frontend")["spec"]["template"]
        eventually(lambda: gated_at_admission(cluster, NAMESPACE, template), 60, "the webhook gating its pods")
        watch = BindingWatch(cluster)
        try:
            started = time.time()
            manifests = "\n---\n".join(
                json.dumps(deployment(s)) for s in ("frontend", "cart", "catalog", "redis", "batch")
            )
            cluster.kubectl("apply", "-f", "-", stdin=manifests)  # dependents first: the worst order
            every = sum(count for selector, count in REPLICAS.items() if selector != "batch")
            eventually(lambda: len(watch.bound) >= every, 120, "every pod but batch bound")
            batch = eventually(lambda: [p for p in pods(cluster) if p["metadata"]["name"].startswith("batch-")], 30)
            eventually(lambda: gates(pods_named(cluster, batch[0]["metadata"]["name"])) == [FOREIGN], 30, "batch")
        finally:
            watch.stop()
    times: dict[str, list[float]] = {}
    for workload, when in watch.bound.values():
        times.setdefault(workload, []).append(when)
    assert {workload: len(when) for workload, when in times.items()} == {
        "frontend": 2,
        "cart": 2,
        "catalog": 1,
        "redis": 2,
    }
    assert max(times["redis"]) < min(times["cart"])  # cart depends on redis
    assert max(times["cart"] + times["catalog"]) < min(times["frontend"])  # frontend depends on both
    assert max(max(when) for when in times.values()) - started < 40  # in order, not by the 40 s timeout
    # one gate removal per pod (the 7 of the graph and batch's), through the chart's ServiceAccount, no 403
    patches = [
        event["objectRef"]["name"]
        for event in cluster.audit_events(service_account("operator"))
        if event["verb"] == "patch" and event["objectRef"].get("resource") == "pods"
        and event["objectRef"].get("namespace") == NAMESPACE
    ]  # fmt: skip
    assert len(patches) == len(set(patches)) == every + 1, patches
    assert forbidden(cluster, "operator") == []


def pods_named(cluster: ControlPlane, name: str) -> dict[str, Any]:
    return dict(kubectl_json(cluster, "get", "pod", name, "-n", NAMESPACE))
