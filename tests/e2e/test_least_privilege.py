"""A compromised probe or agent pod changes only its own objects, proven on the real API server with the tokens such
a pod holds: the chart's RBAC and its ValidatingAdmissionPolicies applied, a pod of each ServiceAccount on two KWOK
nodes, and a token bound to each pod (it carries the pod's node, as the token a kubelet mounts does).

* the probe on n-1 writes its own row, and nothing else: not n-2's row, not a row claiming n-2's round trips, not
  the scheduler's ConfigMap beside the rows; a token bound to no pod writes nothing;
* the agent on n-1 annotates its own Node and writes its own NodeSLO's status and Events about its Node; not n-2's,
  and never its own Node's labels;
* the extender nominates a pending pod to a node (``status.nominatedNodeName``, what its plans write), and changes
  nothing else of a pod through the status it may patch: not its phase, conditions or addresses, not its labels.
"""

from __future__ import annotations

import itertools
import json
import pathlib
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from hack.control_plane import cluster as control_plane
from hack.control_plane.cluster import ControlPlane
from tests.support.e2e import PROBE_NAMESPACE, RELEASE_NAMESPACE, ROOT, forbidden, kubectl_json

TOPOLOGY = "nt-default"
ROW_LABEL = "networktopology.diktyo.x-k8s.io/netperf"
KEY = "netperf.p90.latency.milliseconds.origin.{}.destination.{}"


def rendered_policies() -> list[dict[str, Any]]:
    command = [str(control_plane.BIN / "helm"), "template", "netaware", str(ROOT / "helm" / "netaware"),
               "--namespace", RELEASE_NAMESPACE, "--set", "probe.enabled=true", "--set", f"probe.topology={TOPOLOGY}",
               "--set", f"probe.topologyNamespace={PROBE_NAMESPACE}", "--set", "agent.enabled=true",
               "--set", "agent.publishCapacity=true", "--show-only", "templates/least-privilege.yaml",
               "--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"]  # fmt: skip
    rendered = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return [d for d in yaml.safe_load_all(rendered) if d]


@pytest.fixture(scope="module")
def tokens(cluster: ControlPlane, chart_rbac: dict[str, pathlib.Path]) -> Iterator[dict[str, pathlib.Path]]:
    """The policies applied (removed afterwards: the other modules run the probe and the agent on the host with
    tokens bound to no pod); kubeconfigs for the probe and the agent on n-1, and for the probe with no pod. The
    session's cluster is left as it was found: what the scenarios write (rows, NodeSLOs, n-1's annotation, Events)
    goes with the module."""
    existing_slos = {item["metadata"]["name"] for item in kubectl_json(cluster, "get", "nodeslos")["items"]}
    annotation = "node.koordinator.sh/network-bandwidth"
    before = (kubectl_json(cluster, "get", "node", "n-1")["metadata"].get("annotations") or {}).get(annotation)
    policies = rendered_policies()
    assert (
        sorted(d["kind"] for d in policies)
        == ["ValidatingAdmissionPolicy"] * 3 + ["ValidatingAdmissionPolicyBinding"] * 3
    )
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(policies))
    configs: dict[str, pathlib.Path] = {}
    try:
        for component in ("probe", "agent"):
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": f"{component}-on-n-1", "namespace": RELEASE_NAMESPACE},
                   "spec": {"nodeName": "n-1", "serviceAccountName": f"netaware-{component}",
                            "tolerations": [{"operator": "Exists"}],
                            "containers": [{"name": "c", "image": "x"}]}}  # fmt: skip
            cluster.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
            token = cluster.kubectl("create", "token", f"netaware-{component}", "-n", RELEASE_NAMESPACE,
                                    "--bound-object-kind", "Pod", "--bound-object-name", f"{component}-on-n-1",
                                    "--duration=1h").stdout.strip()  # fmt: skip
            configs[component] = cluster.token_kubeconfig(f"{component}-on-n-1", token)
        unbound = cluster.kubectl("create", "token", "netaware-probe", "-n", RELEASE_NAMESPACE, "--duration=1h")
        configs["probe-unbound"] = cluster.token_kubeconfig("probe-unbound", unbound.stdout.strip())
        wait_until_enforced(cluster, configs["probe-unbound"])
        configs["extender"] = chart_rbac["extender"]  # its ServiceAccount's token: the policy needs no node
        yield configs
    finally:
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", stdin=yaml.safe_dump_all(policies), check=False)
        for component in ("probe", "agent"):
            cluster.kubectl("delete", "pod", f"{component}-on-n-1", "-n", RELEASE_NAMESPACE, "--wait=false",
                            check=False)  # fmt: skip
        cluster.kubectl("delete", "configmap", f"netperf-{TOPOLOGY}-n-1", f"netperf-{TOPOLOGY}-n-2",
                        "netaware-scheduler-cfg", "probe-check", "-n", PROBE_NAMESPACE, "--ignore-not-found",
                        check=False)  # fmt: skip
        created = {"n-1", "n-2"} - existing_slos
        if created:
            cluster.kubectl("delete", "nodeslo", *sorted(created), "--ignore-not-found", check=False)
        restore = f"{annotation}={before}" if before is not None else f"{annotation}-"
        cluster.kubectl("annotate", "node", "n-1", restore, "--overwrite", check=False)
        cluster.kubectl("delete", "event", "about-n-1", "about-n-2", "-n", "default", "--ignore-not-found", check=False)
        cluster.kubectl("delete", "pod", "nominated", "-n", RELEASE_NAMESPACE, "--ignore-not-found", "--wait=false",
                        check=False)  # fmt: skip


def wait_until_enforced(cluster: ControlPlane, kubeconfig: pathlib.Path) -> None:
    """A policy takes effect once the API server has compiled it (about a second): until a write it must refuse is
    refused."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status, text = request(kubeconfig, "POST", ROWS, row("probe-check", "n-1", {}))
        if status == 403 and "ValidatingAdmissionPolicy" in text:
            return
        cluster.kubectl("delete", "configmap", "probe-check", "-n", PROBE_NAMESPACE, "--ignore-not-found", check=False)
        time.sleep(0.5)
    raise AssertionError("the probe's policy never took effect")


def request(kubeconfig: pathlib.Path, method: str, path: str, body: dict[str, Any]) -> tuple[int, str]:
    """One request with the kubeconfig's token, as the probe or the agent sends it (kubectl would send others
    first, a GET or a discovery, that these ServiceAccounts may not and the audit would count as refused)."""
    import http.client
    import ssl
    import urllib.parse

    config = json.loads(kubeconfig.read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    context = ssl.create_default_context(cafile=cluster["certificate-authority"])
    server = urllib.parse.urlsplit(cluster["server"])
    connection = http.client.HTTPSConnection(server.hostname or "", server.port, context=context, timeout=30)
    kind = "application/merge-patch+json" if method == "PATCH" else "application/json"
    connection.request(method, path, json.dumps(body), {"Authorization": f"Bearer {user['token']}",
                                                        "Content-Type": kind})  # fmt: skip
    answer = connection.getresponse()
    return answer.status, answer.read().decode()


def patch(kubeconfig: pathlib.Path, path: str, body: dict[str, Any]) -> tuple[int, str]:
    return request(kubeconfig, "PATCH", path, body)


ROWS = f"/api/v1/namespaces/{PROBE_NAMESPACE}/configmaps"


def refused(answer: tuple[int, str], says: str) -> bool:
    status, text = answer
    return status == 403 and "ValidatingAdmissionPolicy" in text and says in text


def node_uid(cluster: ControlPlane, name: str) -> str:
    return str(kubectl_json(cluster, "get", "node", name)["metadata"]["uid"])


def row(name: str, owner: str, data: dict[str, str], uid: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": PROBE_NAMESPACE, "labels": {ROW_LABEL: TOPOLOGY}}
    if uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": owner, "uid": uid}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def test_the_probe_writes_its_own_row_and_nothing_else(cluster: ControlPlane, tokens: dict[str, pathlib.Path]) -> None:
    probe, n1, n2 = tokens["probe"], node_uid(cluster, "n-1"), node_uid(cluster, "n-2")
    own = row(f"netperf-{TOPOLOGY}-n-1", "n-1", {KEY.format("n-1", "n-2"): "2"}, n1)
    status, text = request(probe, "POST", ROWS, own)
    assert status == 201, text
    own["data"][KEY.format("n-1", "n-3")] = "5"
    status, text = request(probe, "PUT", f"{ROWS}/{own['metadata']['name']}", own)
    assert status == 200, text
    # another node's row, by its name and owner
    other = row(f"netperf-{TOPOLOGY}-n-2", "n-2", {KEY.format("n-2", "n-1"): "1"}, n2)
    assert refused(request(probe, "POST", ROWS, other), "writes only the row its Node")
    # its own row claiming n-2's round trips (the costs of another node)
    forged = dict(own, data={KEY.format("n-2", "n-1"): "1"})
    assert refused(request(probe, "PUT", f"{ROWS}/{own['metadata']['name']}", forged), "measured from n-1")
    # the scheduler's configuration beside the rows
    cluster.kubectl("create", "configmap", "netaware-scheduler-cfg", "-n", PROBE_NAMESPACE, "--from-literal=a=b")
    steer = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "netaware-scheduler-cfg",
             "namespace": PROBE_NAMESPACE}, "data": {"a": "redirected"}}  # fmt: skip
    assert refused(request(probe, "PUT", f"{ROWS}/netaware-scheduler-cfg", steer), "writes only ConfigMaps named")
    assert kubectl_json(cluster, "get", "configmap", "netaware-scheduler-cfg", "-n", PROBE_NAMESPACE)["data"] == {
        "a": "b"
    }
    # a token bound to no pod carries no node: nothing
    theirs = row(f"netperf-{TOPOLOGY}-n-2", "n-2", {}, n2)
    assert refused(request(tokens["probe-unbound"], "POST", ROWS, theirs), "carries no node")
    rows = kubectl_json(cluster, "get", "configmaps", "-n", PROBE_NAMESPACE, "-l", ROW_LABEL)["items"]
    assert [d["metadata"]["name"] for d in rows] == [f"netperf-{TOPOLOGY}-n-1"]
    assert forbidden(cluster, "probe") == []  # the policy refused those, not RBAC: nothing asked beyond its rights


def test_the_agent_changes_only_its_own_node_and_nodeslo(
    cluster: ControlPlane, tokens: dict[str, pathlib.Path]
) -> None:
    agent = tokens["agent"]
    annotate = {"metadata": {"annotations": {"node.koordinator.sh/network-bandwidth": "10G"}}}
    status, text = patch(agent, "/api/v1/nodes/n-1", annotate)
    assert status == 200, text
    status, text = patch(agent, "/api/v1/nodes/n-2", annotate)
    assert status == 403 and "changes only its own Node and NodeSLO, not n-2" in text, text
    label = {"metadata": {"labels": {"topology.kubernetes.io/zone": "elsewhere"}}}
    status, text = patch(agent, "/api/v1/nodes/n-1", label)
    assert status == 403 and "never its labels" in text, text
    for node in ("n-1", "n-2"):
        slo = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": {"name": node}, "spec": {}}
        cluster.kubectl("create", "-f", "-", stdin=json.dumps(slo), check=False)  # an existing one stays as it is
    usage = {"status": {"networkUsage": {"ingress": 0, "egress": 1000000, "updateTime": "2026-11-28T00:00:00Z",
                                         "windowSeconds": 10}}}  # fmt: skip
    status, text = patch(agent, "/apis/slo.koordinator.sh/v1alpha1/nodeslos/n-1/status", usage)
    assert status == 200, text
    status, text = patch(agent, "/apis/slo.koordinator.sh/v1alpha1/nodeslos/n-2/status", usage)
    assert status == 403 and "only its own Node and NodeSLO" in text, text
    for node, allowed in (("n-1", True), ("n-2", False)):
        event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"about-{node}", "namespace": "default"},
                 "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node}, "reason": "R", "message": "m",
                 "type": "Normal"}  # fmt: skip
        answer = request(agent, "POST", "/api/v1/namespaces/default/events", event)
        assert (answer[0] == 201) == allowed, (node, answer)
        if not allowed:
            assert refused(answer, "Events only about its own Node")
    node = kubectl_json(cluster, "get", "node", "n-1")["metadata"]
    assert node["labels"]["topology.kubernetes.io/zone"] != "elsewhere"
    assert node["annotations"]["node.koordinator.sh/network-bandwidth"] == "10G"
    assert forbidden(cluster, "agent") == []


def test_the_extender_changes_only_a_pod_s_nominated_node(
    cluster: ControlPlane, tokens: dict[str, pathlib.Path]
) -> None:
    extender = tokens["extender"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nominated", "namespace": RELEASE_NAMESPACE,
                                                           "labels": {"app": "shop"}},
           "spec": {"schedulerName": "no-such-scheduler", "containers": [{"name": "c", "image": "x"}]}}  # fmt: skip
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    path = f"/api/v1/namespaces/{RELEASE_NAMESPACE}/pods/nominated/status"
    deadline = time.monotonic() + 30
    for attempt in itertools.count():
        # Harmless if let through before the policy is compiled; a new message each time, since a probe that
        # repeats one already let through changes nothing, and the policy rightly allows a write that changes nothing.
        probe = {"status": {"message": f"policy compiled? ({attempt})"}}
        if refused(answer := patch(extender, path, probe), "only a pod's status.nominatedNodeName"):
            break
        assert time.monotonic() < deadline, answer
        time.sleep(0.5)
    status, text = patch(extender, path, {"status": {"nominatedNodeName": "n-1"}})
    assert status == 200, text
    assert refused(patch(extender, path, {"status": {"phase": "Failed"}}), "only a pod's status.nominatedNodeName")
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert refused(patch(extender, path, ready), "only a pod's status.nominatedNodeName")
    address = {"status": {"podIP": "10.9.9.9", "podIPs": [{"ip": "10.9.9.9"}]}}
    assert refused(patch(extender, path, address), "only a pod's status.nominatedNodeName")
    label = {"metadata": {"labels": {"app": "elsewhere"}}}  # the status subresource writes labels too
    assert refused(patch(extender, path, label), "never its labels or annotations")
    written = kubectl_json(cluster, "get", "pod", "nominated", "-n", RELEASE_NAMESPACE)
    assert written["status"].get("nominatedNodeName") == "n-1" and written["status"].get("phase") == "Pending"
    assert written["metadata"]["labels"] == {"app": "shop"} and "podIP" not in written["status"]
    assert forbidden(cluster, "extender") == []
