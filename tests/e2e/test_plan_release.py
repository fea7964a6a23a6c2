"""Releases by whole-group plans on the real control plane: `netaware webhook` gates the pods of an AppGroup
annotated ``netaware.io/ordered-scheduling: plan``, `netaware run --appgroup-plans` (the chart's operator
ServiceAccount) plans them as a whole and releases each with its planned node as a required node affinity, and
the real kube-scheduler binds every pod where the plan says (the pods keep naming it: `--plan-pods-keep-scheduler`,
as the chart runs the webhook beside its second scheduler); a replica added by a scale-up is planned against the
placed ones."""

from __future__ import annotations

import json
import os
import pathlib
import signal
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from hack.control_plane.cluster import ControlPlane
from hack.control_plane.objects import member_appgroup, member_deployment
from tests.support.e2e import (
    EXAMPLES,
    bound_pods,
    create_namespace,
    delete_namespace,
    eventually,
    forbidden,
    gated_at_admission,
    gating_components,
    kubectl_json,
    running,
    wait_for_port,
)

pytestmark = pytest.mark.e2e

NAMESPACE = "plan-e2e"
HOOK = "netaware-plan-e2e"  # the webhook configuration and the leader election id
GATE = "netaware.io/topology-order"
PLANNED = "netaware.io/planned-node"
GRAPH = {"web": ["api"], "api": ["db"], "db": []}
REPLICAS = {"web": 2, "api": 2, "db": 1}


def appgroup() -> dict[str, Any]:
    annotations = {"netaware.io/ordered-scheduling": "plan", "netaware.io/ordered-scheduling-timeout": "60"}
    return member_appgroup(NAMESPACE, "shop", GRAPH, annotations)


def deployment(selector: str, replicas: int) -> dict[str, Any]:
    return member_deployment(NAMESPACE, "shop", selector, replicas, "1")


@pytest.fixture
def plan_namespace(cluster: ControlPlane) -> Iterator[str]:
    create_namespace(cluster, NAMESPACE)
    try:
        yield NAMESPACE
    finally:
        cluster.kubectl("delete", "mutatingwebhookconfiguration", HOOK, "--ignore-not-found")
        delete_namespace(cluster, NAMESPACE)


def pods(cluster: ControlPlane) -> list[dict[str, Any]]:
    return list(kubectl_json(cluster, "get", "pods", "-n", NAMESPACE)["items"])


def free_millicores(cluster: ControlPlane, node: str) -> int:
    """The cpu of ``node`` no running or pending pod bound there requests, in millicores."""
    allocatable = kubectl_json(cluster, "get", "node", node)["status"]["allocatable"]["cpu"]
    held = kubectl_json(cluster, "get", "pods", "-A", "--field-selector", f"spec.nodeName={node}")["items"]
    used = sum(
        _millicores((container.get("resources") or {}).get("requests", {}).get("cpu", "0"))
        for pod in held
        if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        for container in pod["spec"]["containers"]
    )
    return _millicores(allocatable) - used


def others_held(cluster: ControlPlane) -> dict[str, list[str]]:
    """Node -> the pods of other namespaces bound there and asking cpu (what a plan here must place around), a pod
    still leaving marked so."""
    held: dict[str, list[str]] = {}
    for pod in kubectl_json(cluster, "get", "pods", "-A")["items"]:
        node, meta, phase = pod["spec"].get("nodeName"), pod["metadata"], pod["status"].get("phase")
        asks = any((c.get("resources") or {}).get("requests", {}).get("cpu") for c in pod["spec"]["containers"])
        if node and asks and meta["namespace"] != NAMESPACE and phase not in ("Succeeded", "Failed"):
            leaving = " (leaving)" if meta.get("deletionTimestamp") else ""
            held.setdefault(node, []).append(f"{meta['namespace']}/{meta['name']}{leaving}")
    return held


def leaving(cluster: ControlPlane) -> bool:
    return any(name.endswith(" (leaving)") for names in others_held(cluster).values() for name in names)


def plan_lines(log: str) -> list[str]:
    """The operator's log lines of its plans and releases (what it decided, when a placement surprises)."""
    return [line.partition(" INFO ")[2] for line in log.splitlines() if "netaware.gates:" in line]


def gated_count(cluster: ControlPlane) -> int:
    """The pods of the namespace held by netaware's gate."""
    gates = [[gate["name"] for gate in pod["spec"].get("schedulingGates") or []] for pod in pods(cluster)]
    return sum(1 for names in gates if GATE in names)


def _millicores(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def test_an_appgroup_released_by_plan_lands_where_the_plan_says(
    cluster: ControlPlane,
    chart_rbac: dict[str, pathlib.Path],
    host_tls: dict[str, Any],
    plan_namespace: str,
    tmp_path: pathlib.Path,
) -> None:
    cluster.kubectl("apply", "-f", str(EXAMPLES / "networktopology.yaml"))  # the example's zone and region costs
    config = tmp_path / "scheduler.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"pluginConfig": [{"name": "NetworkOverhead", "args": {
            "namespaces": ["default"], "weightsName": "UserDefined", "networkTopologyName": "net-topology-test"}}]}],
    }))  # fmt: skip
    port, configuration, webhook, operator = gating_components(
        chart_rbac, host_tls, HOOK, NAMESPACE, "--appgroup-plans", "--plan-config", str(config)
    )
    # as the chart runs it with its second scheduler: that scheduler (none runs here) is not the plans' one
    webhook += ["--scheduler-name", "netaware-absent", "--plan-pods-keep-scheduler"]
    with running(operator, tmp_path / "operator.log") as run, running(webhook, tmp_path / "webhook.log") as hooked:
        eventually(lambda: "running appgroup" in run.text(), 60, "the operator running")
        wait_for_port(port, process=hooked)
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(appgroup()))
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(configuration))

        template = deployment("web", 1)["spec"]["template"]
        eventually(lambda: gated_at_admission(cluster, NAMESPACE, template), 60, "the webhook gating its pods")
        # the modules before this one on the shared plane may leave pods terminating: they hold room until gone
        eventually(lambda: not leaving(cluster), 60, "no other namespace's pod still leaving")
        manifests = "\n---\n".join(json.dumps(deployment(s, REPLICAS[s])) for s in GRAPH)
        every = sum(REPLICAS.values())
        # The operator held while the ReplicaSets create the pods: it sees the group whole and plans it once. Under
        # load they came further apart than the settle time, and the last api replica, planned alone against the
        # placed pods, tied between n-1 (its replica's node) and n-2 and went to n-1 (spread and network alike).
        os.kill(run.handle.pid, signal.SIGSTOP)
        try:
            cluster.kubectl("apply", "-f", "-", stdin=manifests)
            eventually(lambda: gated_count(cluster) == every, 60, "every pod created and gated")
        finally:
            os.kill(run.handle.pid, signal.SIGCONT)
        placed = eventually(lambda: bound_pods(cluster, NAMESPACE, every), 90, "every pod bound")
        plans = [line for line in plan_lines(run.text()) if " planned in " in line]
        assert len(plans) == 1 and ": 5 pod(s) planned" in plans[0], plan_lines(run.text())  # one plan of the five
        for pod in placed:
            annotations = pod["metadata"].get("annotations") or {}
            assert annotations.get(PLANNED) == pod["spec"]["nodeName"], pod["metadata"]["name"]
            assert pod["spec"]["schedulerName"] == "default-scheduler"  # bound by the cluster's kube-scheduler
        # 5 pods of 1 cpu on nodes of 8. Alone the network would put the chain on one node (cost 0); kube-scheduler's
        # default spread (its ReplicaSets select the replicas) prefers each Deployment's replicas on nodes apart, a
        # pair on one node weighing as much as a pair across two nodes of a zone: one zone, web and api split
        zones = {n["metadata"]["name"]: n["metadata"].get("labels", {}).get("topology.kubernetes.io/zone")
                 for n in kubectl_json(cluster, "get", "nodes")["items"]}  # fmt: skip
        where = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in placed}
        seen = f"{where}; the plans: {plan_lines(run.text())}; other pods then: {others_held(cluster)}"
        assert len({zones[node] for node in where.values()}) == 1, seen
        for selector in ("web", "api"):
            nodes = [p["spec"]["nodeName"] for p in placed if p["metadata"]["name"].startswith(f"{selector}-")]
            assert len(set(nodes)) == 2, (selector, seen)

        # the Planned Event is written after the plan's releases: it may come after the pods are bound
        def planned_event() -> bool:
            events = kubectl_json(cluster, "get", "events", "-n", NAMESPACE, "--field-selector", "reason=Planned")
            return any(" pod(s) planned in " in e["message"] for e in events["items"])

        eventually(planned_event, 30, "the AppGroup's Planned Event")
        # a scale-up: the new replica is planned against the placed pods, in their zone, and bound where planned
        cluster.kubectl("scale", "deployment", "web", "-n", NAMESPACE, "--replicas", "3")
        grown = eventually(lambda: bound_pods(cluster, NAMESPACE, every + 1), 60, "the new replica bound")
        new = [p for p in grown if p["metadata"]["name"] not in {q["metadata"]["name"] for q in placed}]
        assert len(new) == 1 and new[0]["spec"]["nodeName"] == new[0]["metadata"]["annotations"][PLANNED]
        assert zones[new[0]["spec"]["nodeName"]] == zones[placed[0]["spec"]["nodeName"]]
    assert forbidden(cluster, "operator") == []


def test_a_node_filled_between_plan_and_bind_leaves_no_pod_stranded(
    cluster: ControlPlane,
    chart_rbac: dict[str, pathlib.Path],
    host_tls: dict[str, Any],
    plan_namespace: str,
    tmp_path: pathlib.Path,
) -> None:
    """The pods name a scheduler that does not run, so that none binds after its release: then another pod is bound
    on their planned node whose required anti-affinity refuses db's pods there (kube-scheduler's existing pods'
    anti-affinity). The controller evicts them (their required affinity cannot change), names the constraint, and
    their Deployment's replacements are planned again, to another node."""
    cluster.kubectl("apply", "-f", str(EXAMPLES / "networktopology.yaml"))
    port, configuration, webhook, operator = gating_components(
        chart_rbac, host_tls, HOOK, NAMESPACE, "--appgroup-plans"
    )
    with running(operator, tmp_path / "operator.log") as run, running(webhook, tmp_path / "webhook.log") as hooked:
        eventually(lambda: "running appgroup" in run.text(), 60, "the operator running")
        wait_for_port(port, process=hooked)
        group = appgroup()
        group["spec"]["workloads"] = [group["spec"]["workloads"][2]]  # db alone
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(group))
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(configuration))
        db = deployment("db", 1)
        db["spec"]["template"]["spec"]["schedulerName"] = "nobody"  # released, never bound
        eventually(
            lambda: (
                cluster.kubectl("apply", "-f", "-", stdin=json.dumps(db)).returncode == 0
                and any((p["metadata"].get("annotations") or {}).get(PLANNED) for p in pods(cluster))
            ),
            60,
            "db-… released to a planned node",
        )
        (first,) = [p for p in pods(cluster) if (p["metadata"].get("annotations") or {}).get(PLANNED)]
        node = first["metadata"]["annotations"][PLANNED]
        assert free_millicores(cluster, node) >= 1000  # room enough: only the anti-affinity refuses the node
        apart = {"labelSelector": {"matchLabels": {"appgroup.diktyo.x-k8s.io.workload": "db"}},
                 "topologyKey": "kubernetes.io/hostname"}  # fmt: skip
        refuse = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [apart]}}
        filler = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "filler", "namespace": NAMESPACE},
                  "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                           "resources": {"requests": {"cpu": "100m"}}}],
                           "affinity": refuse}}  # fmt: skip
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(filler))

        def replanned() -> list[dict[str, Any]] | None:
            names = {p["metadata"]["name"]: p for p in pods(cluster)}
            fresh = [p for name, p in names.items() if name.startswith("db-") and name != first["metadata"]["name"]
                     and (p["metadata"].get("annotations") or {}).get(PLANNED)]  # fmt: skip
            return fresh if first["metadata"]["name"] not in names and fresh else None

        (replacement,) = eventually(replanned, 60, "the stranded pod evicted and its replacement planned again")
        assert replacement["metadata"]["annotations"][PLANNED] != node
        events = kubectl_json(cluster, "get", "events", "-n", NAMESPACE, "--field-selector", "reason=PlanAbandoned")
        why = f"its planned node {node} no longer fits it: node(s) didn't satisfy existing pods anti-affinity rules"
        assert any(why in e["message"] for e in events["items"]), events["items"]
    assert forbidden(cluster, "operator") == []
