"""The bandwidth guarantee on the real control plane: the webhook (through the API server's admission chain) makes
pods request netaware's extended resources, `netaware run --components nodebandwidth` (the chart's operator token)
advertises them on the nodes, and kube-scheduler itself — the default one, no extender — accounts them:

* pods created as fast as the API server takes them, scheduled at full speed: no node promised twice;
* a high-priority pod preempts a low-priority one on a full node, the other nodes untouched;
* a ResourceQuota on the resource refuses the pod over it, with the message kubectl prints;
* the webhook down: pods that ask for bandwidth are refused at creation (fail closed), never created unaccounted.
"""

from __future__ import annotations

import json
import pathlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from hack.control_plane.cluster import ControlPlane
from hack.control_plane.objects import extender_entry
from hack.control_plane.ports import free_port
from tests.support.e2e import (
    RELEASE_NAMESPACE,
    Process,
    create_namespace,
    delete_namespace,
    eventually,
    hosted_on_loopback,
    kubectl_json,
    running,
    wait_for_port,
)
from webhooks.configuration import mutating_webhook_configuration

pytestmark = pytest.mark.e2e

NAMESPACE = "bandwidth-e2e"
QUOTA_NAMESPACE = "bandwidth-quota-e2e"
EGRESS, INGRESS = "netaware.io/egress-bandwidth", "netaware.io/ingress-bandwidth"
G = 1_000_000_000


def node(name: str, pool: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"bandwidth-pool": pool},
            "annotations": {"node.kubernetes.io/network-limit": "1G"},
        },
        "status": {"allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110"}},
    }


def pod(
    name: str, pool: str, namespace: str = NAMESPACE, priority: str | None = None, **bandwidth: str
) -> dict[str, Any]:
    annotations = {f"kubernetes.io/{key}-bandwidth": value for key, value in bandwidth.items()}
    spec: dict[str, Any] = {
        "nodeSelector": {"bandwidth-pool": pool},
        "containers": [{"name": "app", "image": "registry.example/app:1"}],
        "terminationGracePeriodSeconds": 0,
    }
    if priority:
        spec["priorityClassName"] = priority
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"pool": pool}, "annotations": annotations},
        "spec": spec,
    }


def pods_of(cluster: ControlPlane, pool: str, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    return list(kubectl_json(cluster, "get", "pods", "-n", namespace, "-l", f"pool={pool}")["items"])


def advertised(cluster: ControlPlane, name: str) -> dict[str, str]:
    status = kubectl_json(cluster, "get", "node", name)["status"]
    return {k: v for k, v in (status.get("allocatable") or {}).items() if k.startswith("netaware.io/")}


@pytest.fixture(scope="module")
def guarantee(
    cluster: ControlPlane,
    chart_rbac: dict[str, pathlib.Path],
    host_tls: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Any]]:
    """The webhook (chart token, --bandwidth-resources duplex, the chart's two entries) and the nodebandwidth
    controller (chart operator token) running against the cluster; nodes of pools `fast`, `full` and `spare`."""
    folder = tmp_path_factory.mktemp("bandwidth")
    for namespace in (NAMESPACE, QUOTA_NAMESPACE):
        create_namespace(cluster, namespace)
    nodes = folder / "nodes.yaml"
    chosen = [node(f"bw-fast-{i}", "fast") for i in range(4)] + [node("bw-full", "full"), node("bw-spare", "spare")]
    nodes.write_text("\n---\n".join(json.dumps(n) for n in chosen))
    cluster.add_nodes(nodes)
    port = free_port()
    webhook_args = ["webhook", "--listen-address", "127.0.0.1", "--port", str(port)]
    webhook_args += ["--kubeconfig", str(chart_rbac["webhook"]), "--bandwidth-resources", "duplex"]
    webhook_args += ["--tls-cert-file", str(host_tls["cert"]), "--tls-private-key-file", str(host_tls["key"])]
    operator_args = ["run", "--kubeconfig", str(chart_rbac["operator"]), "--components", "nodebandwidth"]
    operator_args += ["--no-leader-elect", "--health-port", "0", "--accounting-mode", "duplex"]
    configuration = mutating_webhook_configuration(
        "netaware-bandwidth-e2e", "unused", RELEASE_NAMESPACE, host_tls["ca_b64"], bandwidth_failure_policy="Fail"
    )
    for entry in hosted_on_loopback(configuration, port, host_tls["ca_b64"])["webhooks"]:
        entry["namespaceSelector"] = {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [NAMESPACE, QUOTA_NAMESPACE]}
            ]
        }
    state: dict[str, Any] = {"port": port, "folder": folder, "webhook_args": webhook_args}
    state["webhook"] = webhook = Process(webhook_args, folder / "webhook.log")
    try:
        with running(operator_args, folder / "operator.log") as operator:
            wait_for_port(port, process=webhook)
            cluster.kubectl("apply", "-f", "-", stdin=json.dumps(configuration))
            for chosen_node in chosen:
                name = chosen_node["metadata"]["name"]
                eventually(
                    lambda name=name: advertised(cluster, name) == {EGRESS: "1G", INGRESS: "1G"},
                    60,
                    f"{name} advertising 1G each way",
                )
            yield state
            assert "Traceback" not in operator.text() + state["webhook"].text()
    finally:
        state["webhook"].stop()
        cluster.kubectl("delete", "mutatingwebhookconfiguration", "netaware-bandwidth-e2e", check=False)
        for namespace in (NAMESPACE, QUOTA_NAMESPACE):
            delete_namespace(cluster, namespace)
        # the pools' nodes go too: later modules place on the example cluster's nodes
        cluster.kubectl("delete", "node", *(n["metadata"]["name"] for n in chosen), "--ignore-not-found", check=False)


def test_full_speed_never_promises_a_node_twice(cluster: ControlPlane, guarantee: dict[str, Any]) -> None:
    # 4 nodes of 1G each way, pods of 100M + 100M: 40 fit; 60 created in one request stream, as fast as the API
    # server takes them, scheduled by the default kube-scheduler at full speed
    listing = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [pod(f"fast-{i:03d}", "fast", ingress="100M", egress="100M") for i in range(60)],
    }
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(listing))

    def settled() -> list[dict[str, Any]] | None:
        found = pods_of(cluster, "fast")
        bound = [p for p in found if p["spec"].get("nodeName")]
        return found if len(found) == 60 and len(bound) == 40 else None

    found = eventually(settled, 90, "40 of 60 pods bound")
    per_node = Counter(p["spec"]["nodeName"] for p in found if p["spec"].get("nodeName"))
    assert per_node == {f"bw-fast-{i}": 10 for i in range(4)}  # 10 x 100M = 1G each way: full, never over
    requests = found[0]["spec"]["containers"][0]["resources"]["requests"]
    assert requests == {EGRESS: "100M", INGRESS: "100M"}  # written by the webhook, canonical as the API stores it
    # the 20 left are pending, and kube-scheduler says why
    pending = next(p for p in found if not p["spec"].get("nodeName"))
    events = kubectl_json(
        cluster,
        "get",
        "events",
        "-n",
        NAMESPACE,
        "--field-selector",
        f"involvedObject.name={pending['metadata']['name']}",
    )["items"]
    assert any(e["reason"] == "FailedScheduling" and "Insufficient netaware.io/" in e["message"] for e in events)
    # nothing stays pending for ever once room is made: one deleted pod lets exactly one pending pod in
    victim = next(p for p in found if p["spec"].get("nodeName") == "bw-fast-0")
    cluster.kubectl("delete", "pod", "-n", NAMESPACE, victim["metadata"]["name"], "--grace-period=0", "--force")
    eventually(
        lambda: Counter(p["spec"].get("nodeName") for p in pods_of(cluster, "fast"))["bw-fast-0"] == 10,
        60,
        "a pending pod taking the freed room",
    )
    assert (
        max(Counter(p["spec"].get("nodeName") for p in pods_of(cluster, "fast") if p["spec"].get("nodeName")).values())
        == 10
    )


def test_a_high_priority_pod_preempts_for_bandwidth_on_a_full_node(
    cluster: ControlPlane, guarantee: dict[str, Any]
) -> None:
    for name, value in (("bandwidth-low", 0), ("bandwidth-high", 100000)):
        klass = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(klass))
    spare = [pod(f"spare-{i}", "spare", priority="bandwidth-low", egress="300M") for i in range(2)]
    low = [pod(f"low-{i}", "full", priority="bandwidth-low", egress="250M") for i in range(4)]
    cluster.kubectl("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": spare + low}))
    eventually(
        lambda: sum(1 for p in pods_of(cluster, "full") if p["spec"].get("nodeName")) == 4, 60, "4 x 250M on bw-full"
    )
    before_spare = {p["metadata"]["uid"] for p in pods_of(cluster, "spare")}
    # bw-full is full (4 x 250M = 1G egress); 300M more fits only if two low-priority pods leave
    cluster.kubectl(
        "create", "-f", "-", stdin=json.dumps(pod("high", "full", priority="bandwidth-high", egress="300M"))
    )

    def placed() -> bool:
        high = kubectl_json(cluster, "get", "pod", "-n", NAMESPACE, "high")
        return high["spec"].get("nodeName") == "bw-full"

    eventually(placed, 90, "the high-priority pod placed on bw-full")
    left = [
        p
        for p in pods_of(cluster, "full")
        if p["metadata"]["name"].startswith("low-") and not p["metadata"].get("deletionTimestamp")
    ]
    assert len(left) == 2  # kube-scheduler's rules: the fewest victims that make room (2 x 250M for 300M)
    events = kubectl_json(cluster, "get", "events", "-n", NAMESPACE, "--field-selector", "reason=Preempted")["items"]
    assert len({e["involvedObject"]["name"] for e in events}) == 2
    assert {p["metadata"]["uid"] for p in pods_of(cluster, "spare")} == before_spare  # the other node untouched


def test_a_namespace_quota_on_bandwidth_refuses_the_pod_over_it(
    cluster: ControlPlane, guarantee: dict[str, Any]
) -> None:
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "bandwidth", "namespace": QUOTA_NAMESPACE},
        "spec": {"hard": {f"requests.{EGRESS}": "300M"}},
    }
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(quota))
    eventually(
        lambda: kubectl_json(cluster, "get", "resourcequota", "-n", QUOTA_NAMESPACE, "bandwidth")["status"].get("hard"),
        30,
        "the quota's status",
    )
    first = cluster.kubectl(
        "apply", "-f", "-", stdin=json.dumps(pod("q1", "spare", QUOTA_NAMESPACE, egress="200M")), check=False
    )
    assert first.returncode == 0, first.stderr
    second = cluster.kubectl(
        "apply", "-f", "-", stdin=json.dumps(pod("q2", "spare", QUOTA_NAMESPACE, egress="200M")), check=False
    )
    assert second.returncode != 0
    message = second.stderr.strip()
    assert 'pods "q2" is forbidden: exceeded quota: bandwidth' in message, message
    assert (
        f"requested: requests.{EGRESS}=200M, used: requests.{EGRESS}=200M, limited: requests.{EGRESS}=300M" in message
    )
    guarantee["quota_message"] = message


def test_a_webhook_outage_refuses_bandwidth_pods_instead_of_creating_them_unaccounted(
    cluster: ControlPlane, guarantee: dict[str, Any]
) -> None:
    guarantee["webhook"].stop()
    try:
        refused = cluster.kubectl(
            "create", "-f", "-", stdin=json.dumps(pod("outage", "spare", egress="100M")), check=False
        )
        assert refused.returncode != 0 and 'failed calling webhook "pod-bandwidth-retry.netaware.io"' in refused.stderr
        plain = pod("no-bandwidth", "spare")
        created = cluster.kubectl("create", "-f", "-", stdin=json.dumps(plain), check=False)
        assert created.returncode == 0, created.stderr  # a pod that asks for no bandwidth is never blocked
    finally:
        guarantee["webhook"] = Process(guarantee["webhook_args"], guarantee["folder"] / "webhook-2.log")
        wait_for_port(guarantee["port"], process=guarantee["webhook"])
    again = cluster.kubectl("create", "-f", "-", stdin=json.dumps(pod("outage", "spare", egress="100M")), check=False)
    assert again.returncode == 0, again.stderr


def test_an_extender_outage_loses_the_scores_not_the_guarantee(
    cluster: ControlPlane, guarantee: dict[str, Any], tmp_path: pathlib.Path
) -> None:
    """A second scheduler whose extender (ignorable, as the chart configures it) is down keeps placing pods, and
    kube-scheduler's own accounting of the resources still refuses the pods a full node has no room for."""
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(json.dumps(node("bw-outage", "outage")))
    cluster.add_nodes(nodes)
    eventually(lambda: advertised(cluster, "bw-outage") == {EGRESS: "1G", INGRESS: "1G"}, 60, "bw-outage advertised")
    # nothing listens on that port: the extender is down
    extender = extender_entry(free_port(), None, weight=5, ignorable=True, timeout="2s")
    config = tmp_path / "scheduler.yaml"
    config.write_text(json.dumps(cluster.scheduler_config([{"schedulerName": "bandwidth-outage"}], [extender])))
    cluster.start_scheduler("bandwidth-outage", config)
    try:
        items = []
        for i in range(12):
            item = pod(f"outage-{i:02d}", "outage", egress="100M")
            item["spec"]["schedulerName"] = "bandwidth-outage"
            items.append(item)
        cluster.kubectl("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        eventually(
            lambda: sum(1 for p in pods_of(cluster, "outage") if p["spec"].get("nodeName")) == 10,
            90,
            "10 of 12 pods placed without the extender",
        )
        events = kubectl_json(cluster, "get", "events", "-n", NAMESPACE, "--field-selector", "reason=FailedScheduling")
        pending = {p["metadata"]["name"] for p in pods_of(cluster, "outage") if not p["spec"].get("nodeName")}
        # the pods left pending (a placed pod may have met a transient failure first: its events say other things)
        stuck = [e for e in events["items"] if e["involvedObject"]["name"] in pending]
        assert stuck and all(f"Insufficient {EGRESS}" in e["message"] for e in stuck), [e["message"] for e in stuck]
        assert sum(1 for p in pods_of(cluster, "outage") if p["spec"].get("nodeName")) == 10  # never 11
    finally:
        cluster.stop_component("bandwidth-outage")
