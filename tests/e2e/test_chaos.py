"""Chaos on the real control plane: kube-apiserver is killed (SIGKILL: every connection reset, every watch broken),
left down, and started again, three times, while an AppGroup rolls out in plan mode (the webhook gating its pods,
`netaware run --appgroup-plans` planning and releasing them, kube-scheduler binding them) and the descheduler runs
LowNodeLoad on a hot node under a PodDisruptionBudget; the extender reaches the API server through a transport-fault
proxy that also refuses it for a while after each restart. Every component runs with its chart ServiceAccount.

After each outage: every pod of the AppGroup is bound where its plan said and none is gated, the AppGroup's status
is current (its generation observed, its placements naming exactly the pods that exist), the extender knows a node
created after the outage, the descheduler never evicted a pod twice, ``/healthz`` answers 200 and no task was
restarted (every failure an outage causes is one the loops expect)."""

from __future__ import annotations

import collections
import json
import pathlib
import ssl
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from hack.control_plane.cluster import ControlPlane
from hack.control_plane.objects import member_appgroup, member_deployment
from hack.control_plane.ports import free_port
from tests.support.e2e import (
    ProxyThread,
    create_namespace,
    delete_namespace,
    eventually,
    extender_command,
    gating_components,
    https_get,
    kubectl_json,
    running,
    wait_for_port,
)

pytestmark = pytest.mark.e2e

NAMESPACE, EVICTABLE = "chaos-e2e", "chaos-desched-e2e"
HOOK = "netaware-chaos-e2e"  # the webhook configuration and the leader election id
PLANNED = "netaware.io/planned-node"
GRAPH = {"web": ["api"], "api": ["db"], "db": []}
ROUNDS = 3
POLICY = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerConfiguration",
    "deschedulingInterval": "2s",
    "maxNoOfPodsToEvictPerNode": 2,
    "profiles": [{"name": "chaos", "plugins": {"balance": {"enabled": ["LowNodeLoad"]}},
                  "pluginConfig": [{"name": "LowNodeLoad", "args": {
                      "lowThresholds": {"netBandwidth": 30}, "highThresholds": {"netBandwidth": 70},
                      "accountingMode": "combined", "nodeSelector": "chaos=e2e", "nodeFit": False,
                      "evictableNamespaces": {"include": [EVICTABLE]},
                      "anomalyCondition": {"consecutiveAbnormalities": 1}}}]}],
}  # fmt: skip


def replicas(round_: int) -> dict[str, int]:
    """Each round scales the application up, so that pods are in flight when the API server dies."""
    return {"web": 2 * round_, "api": round_, "db": 1}


def node(name: str, bandwidth: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels,
                         "annotations": {"node.koordinator.sh/network-bandwidth": bandwidth}},
            "status": {"allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110"}}}  # fmt: skip


def hot_replica_set(selector: dict[str, str]) -> dict[str, Any]:
    """Nine pods of 100M (ingress and egress, combined accounting)."""
    labels = {"app": "web"}
    bandwidth = {"kubernetes.io/ingress-bandwidth": "50M", "kubernetes.io/egress-bandwidth": "50M"}
    container = {"name": "web", "image": "registry.example/web:1"}
    template = {"metadata": {"labels": labels, "annotations": bandwidth},
                "spec": {"nodeSelector": selector, "containers": [container]}}  # fmt: skip
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "namespace": EVICTABLE},
            "spec": {"replicas": 9, "selector": {"matchLabels": labels}, "template": template}}  # fmt: skip


@pytest.fixture
def namespaces(cluster: ControlPlane) -> Iterator[None]:
    for namespace in (NAMESPACE, EVICTABLE):
        create_namespace(cluster, namespace)
    try:
        yield
    finally:
        cluster.kubectl("delete", "mutatingwebhookconfiguration", HOOK, "--ignore-not-found")
        for namespace in (NAMESPACE, EVICTABLE):
            delete_namespace(cluster, namespace)
        cluster.kubectl("delete", "nodes", "-l", "chaos", "--ignore-not-found", check=False)


def add_nodes(cluster: ControlPlane, folder: pathlib.Path, nodes: list[dict[str, Any]]) -> None:
    file = folder / f"nodes-{nodes[0]['metadata']['name']}.yaml"
    file.write_text("\n---\n".join(json.dumps(item) for item in nodes))
    cluster.add_nodes(file)


def status_current(cluster: ControlPlane) -> bool:
    """The AppGroup's status observed its generation and places exactly the pods that exist, each bound."""
    group = kubectl_json(cluster, "get", "appgroup", "shop", "-n", NAMESPACE)
    status = group.get("status") or {}
    if status.get("observedGeneration") != group["metadata"]["generation"]:
        return False
    pods = kubectl_json(cluster, "get", "pods", "-n", NAMESPACE)["items"]
    actual = {(p["metadata"]["name"], p["spec"].get("nodeName")) for p in pods}
    placed = {(p["name"], p.get("node")) for w in status.get("placements") or () for p in w.get("pods") or ()}
    return placed == actual and all(node for _, node in actual)


def rolled_out(cluster: ControlPlane, round_: int) -> bool:
    """Every pod of the round's replicas exists, bound where its plan said, none gated, none terminating."""
    pods = kubectl_json(cluster, "get", "pods", "-n", NAMESPACE)["items"]
    if len(pods) != sum(replicas(round_).values()):
        return False
    return all(
        not p["spec"].get("schedulingGates") and not p["metadata"].get("deletionTimestamp")
        and p["spec"].get("nodeName") and (p["metadata"].get("annotations") or {}).get(PLANNED) == p["spec"]["nodeName"]
        for p in pods
    )  # fmt: skip


def knows_node(port: int, ca: pathlib.Path, name: str) -> bool:
    """The extender (over TLS) answers a filter for ``name`` without calling it unknown."""
    pod = {"metadata": {"name": "probe", "namespace": "default"}, "spec": {"containers": [{"name": "c"}]}}
    body = json.dumps({"Pod": pod, "NodeNames": [name]}).encode()
    request = urllib.request.Request(f"https://127.0.0.1:{port}/filter", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=str(ca)), timeout=10) as answer:
            return "not known to the extender" not in answer.read().decode()
    except OSError:
        return False


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as error:
        return int(error.code), ""
    except OSError:
        return 0, ""


def evictions(cluster: ControlPlane) -> collections.Counter[str]:
    """Per pod of the evictable namespace, how many times the descheduler evicted it (a Descheduled Event each; an
    eviction the PodDisruptionBudget refused is an EvictionRefused one, and is tried again next cycle)."""
    events = kubectl_json(cluster, "get", "events", "-n", EVICTABLE)["items"]
    return collections.Counter(e["involvedObject"]["name"] for e in events if e["reason"] == "Descheduled")


def test_the_api_server_killed_three_times_during_a_rollout_leaves_everything_current(
    cluster: ControlPlane,
    chart_rbac: dict[str, pathlib.Path],
    host_tls: dict[str, Any],
    namespaces: None,
    tmp_path: pathlib.Path,
) -> None:
    hot = {"chaos": "e2e"}
    add_nodes(cluster, tmp_path, [node("chaos-hot", "1G", hot), node("chaos-cold-a", "10G", hot),
                                  node("chaos-cold-b", "10G", hot)])  # fmt: skip
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
              "metadata": {"name": "web", "namespace": EVICTABLE},
              "spec": {"minAvailable": 7, "selector": {"matchLabels": {"app": "web"}}}}  # fmt: skip
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(budget))
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(hot_replica_set({"kubernetes.io/hostname": "chaos-hot"})))

    def hot_running() -> bool:
        pods = kubectl_json(cluster, "get", "pods", "-n", EVICTABLE)["items"]
        return len([p for p in pods if p["status"].get("phase") == "Running"]) == 9

    eventually(hot_running, 90, "nine pods running on the hot node (90 % of its 1G)")
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(hot_replica_set(hot)))  # replacements go anywhere

    policy, config = tmp_path / "policy.yaml", tmp_path / "scheduler.yaml"
    policy.write_text(json.dumps(POLICY))
    config.write_text(yaml.safe_dump({"apiVersion": "kubescheduler.config.k8s.io/v1",
                                      "kind": "KubeSchedulerConfiguration", "profiles": [{}]}))  # fmt: skip
    health = free_port()
    # the Lease outlives an outage on a loaded machine: a leader whose renew deadline passes stops by design
    port, configuration, webhook, operator = gating_components(
        chart_rbac, host_tls, HOOK, NAMESPACE, "--appgroup-plans", "--components", "appgroup,descheduler",
        "--descheduler-policy", str(policy), "--health-address", "127.0.0.1", "--health-port", str(health),
        "--lease-duration", "60", "--renew-deadline", "45",
    )  # fmt: skip
    extender_port = free_port()
    with ProxyThread(cluster) as proxy:
        extender_rbac = {**chart_rbac, "extender": proxy.kubeconfig(chart_rbac["extender"])}
        extender = extender_command(extender_port, extender_rbac, host_tls, config)
        with (
            running(operator, tmp_path / "operator.log") as run,
            running(webhook, tmp_path / "webhook.log") as hooked,
            running(extender, tmp_path / "extender.log") as extending,
        ):
            eventually(lambda: "running appgroup, descheduler" in run.text(), 60, "the operator running")
            wait_for_port(port, process=hooked)
            wait_for_port(extender_port, process=extending)
            annotations = {"netaware.io/ordered-scheduling": "plan", "netaware.io/ordered-scheduling-timeout": "300"}
            cluster.kubectl(
                "apply", "-f", "-", stdin=json.dumps(member_appgroup(NAMESPACE, "shop", GRAPH, annotations))
            )
            cluster.kubectl("apply", "-f", "-", stdin=json.dumps(configuration))
            for round_ in range(1, ROUNDS + 1):
                counts = replicas(round_)
                manifests = [json.dumps(member_deployment(NAMESPACE, "shop", s, counts[s], "1")) for s in GRAPH]
                cluster.kubectl("apply", "-f", "-", stdin="\n---\n".join(manifests))
                cluster.crash_apiserver(down_seconds=2.0)
                proxy.reset_all()
                proxy.refuse(2.0)  # the extender is refused a while longer
                late = f"chaos-late-{round_}"
                add_nodes(cluster, tmp_path, [node(late, "10G", {"chaos": "late"})])
                eventually(lambda round_=round_: rolled_out(cluster, round_), 120, f"round {round_}: every pod placed")
                eventually(lambda: status_current(cluster), 60, f"round {round_}: the AppGroup's status current")
                eventually(lambda late=late: knows_node(extender_port, host_tls["ca"], late), 60,
                           f"round {round_}: the extender following nodes")  # fmt: skip
                assert http_get(health, "/healthz") == (200, "ok"), run.text()[-3000:]
                assert https_get(extender_port, "/healthz", host_tls["ca"])[0] == 200
                for process in (run, hooked, extending):
                    assert process.handle.poll() is None, process.text()[-3000:]
            eventually(lambda: sum(evictions(cluster).values()) >= 1, 60, "the descheduler evicting")
            repeated = {pod: count for pod, count in evictions(cluster).items() if count > 1}
            metrics = http_get(health, "/metrics")[1]
            # every task's series is there from its start, at 0 while it never had to be restarted
            restarts = [line for line in metrics.splitlines()
                        if line.startswith("netaware_task_restarts_total{") and not line.endswith(" 0.0")]  # fmt: skip
            extender_restarts = [line for line in https_get(extender_port, "/metrics", host_tls["ca"])[1].splitlines()
                                 if line.startswith("netaware_task_restarts_total{")
                                 and not line.endswith(" 0.0")]  # fmt: skip
            assert 'netaware_task_restarts_total{task="watch"} 0.0' in metrics  # a restart would show here
    assert repeated == {}, repeated
    assert restarts == [] and extender_restarts == [], (restarts, extender_restarts)
    for log in ("operator.log", "webhook.log", "extender.log"):
        assert "Traceback" not in (tmp_path / log).read_text(), log
