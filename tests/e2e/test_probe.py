"""`netaware probe` on the real API server with the chart's probe ServiceAccount token: it lists its peers in its
own namespace, writes its row in the NetworkTopology's namespace, owned by its Node — and the garbage
collector deletes the row with the Node. No 403."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from hack.control_plane.cluster import ControlPlane
from hack.control_plane.ports import free_port
from tests.support.e2e import (
    PROBE_NAMESPACE,
    RELEASE_NAMESPACE,
    apply_netperf_topology,
    eventually,
    forbidden,
    kubectl_json,
    netperf_costs,
    running,
    service_account,
)

pytestmark = pytest.mark.e2e

NODE = "probe-node"


def row(cluster: ControlPlane) -> dict[str, Any] | None:
    done = cluster.kubectl(
        "get", "configmap", f"netperf-nt-e2e-{NODE}", "-n", PROBE_NAMESPACE, "-o", "json", check=False
    )
    return json.loads(done.stdout) if done.returncode == 0 else None


def test_the_probe_writes_its_row_with_least_privilege_and_the_row_goes_with_its_node(
    cluster: ControlPlane, chart_rbac: dict[str, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    nodes = tmp_path / "node.yaml"
    labels = {"topology.kubernetes.io/region": "r9", "topology.kubernetes.io/zone": "z9"}
    nodes.write_text(json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "labels": labels}}))
    cluster.add_nodes(nodes)
    uid = kubectl_json(cluster, "get", "node", NODE)["metadata"]["uid"]
    args = ["probe", "--kubeconfig", str(chart_rbac["probe"]), "--node-name", NODE, "--topology", "nt-e2e"]
    args += ["--namespace", PROBE_NAMESPACE, "--peer-namespace", RELEASE_NAMESPACE, "--listen-address", "127.0.0.1"]
    args += ["--port", str(free_port()), "--health-port", "0", "--interval", "0.5", "--report-interval", "1"]
    with running(args, tmp_path / "probe.log") as process:
        eventually(lambda: row(cluster), 60, "the probe's row, created")
        assert process.handle.poll() is None
    # a stale key (a peer of an earlier life, gone since): the next probe replaces the row, it does not merge
    stale = {"data": {"netperf.p90.latency.milliseconds.origin.probe-node.destination.gone": "7"}}
    cluster.kubectl("patch", "configmap", f"netperf-nt-e2e-{NODE}", "-n", PROBE_NAMESPACE, "-p", json.dumps(stale))
    with running(args, tmp_path / "probe-again.log"):
        written = eventually(lambda: not (row(cluster) or {}).get("data") and row(cluster), 60, "the row, replaced")
    meta = written["metadata"]
    assert meta["labels"]["networktopology.diktyo.x-k8s.io/netperf"] == "nt-e2e"
    assert meta["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": uid}]
    assert forbidden(cluster, "probe") == []
    lists = [
        (event["objectRef"]["resource"], event["objectRef"].get("namespace"))
        for event in cluster.audit_events(service_account("probe"))
        if event["verb"] == "list"
    ]
    assert ("pods", RELEASE_NAMESPACE) in lists and ("nodes", None) in lists
    assert all(namespace == RELEASE_NAMESPACE for resource, namespace in lists if resource == "pods")
    cluster.kubectl("delete", "node", NODE)
    eventually(lambda: row(cluster) is None, 90, "the garbage collector deleting the row with its Node")


def test_two_probes_measure_each_other_and_the_controller_computes_the_costs(
    cluster: ControlPlane, chart_rbac: dict[str, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    """Two plain Nodes (no KWOK: nothing overwrites their pods' status) in zones za and zb, a probe pod on each
    whose pod IP is a loopback address, two `netaware probe` processes there with the chart's token, and
    `netaware run --components networktopology` with the operator's: the rows, then the zone costs."""
    peers = {"probe-za": ("za", "127.0.0.2"), "probe-zb": ("zb", "127.0.0.3")}
    port = free_port()
    for node, (zone, address) in peers.items():
        labels = {"topology.kubernetes.io/region": "rp", "topology.kubernetes.io/zone": zone}
        plain = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": labels}}
        cluster.kubectl("create", "-f", "-", stdin=json.dumps(plain))
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"probe-{node}", "namespace": RELEASE_NAMESPACE,
                         "labels": {"app.kubernetes.io/component": "probe", "test": "probe-pair"}},
            "spec": {"nodeName": node, "containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10"}],
                     "tolerations": [{"operator": "Exists"}]},
        }  # fmt: skip
        cluster.kubectl("create", "-f", "-", stdin=json.dumps(pod))
        status = {"status": {"phase": "Running", "podIP": address, "podIPs": [{"ip": address}]}}
        cluster.kubectl("patch", "pod", f"probe-{node}", "-n", RELEASE_NAMESPACE, "--subresource=status",
                        "--type=merge", "-p", json.dumps(status))  # fmt: skip
    apply_netperf_topology(cluster, PROBE_NAMESPACE, "nt-pair")

    def probe(node: str) -> list[str]:
        args = ["probe", "--kubeconfig", str(chart_rbac["probe"]), "--node-name", node, "--topology", "nt-pair"]
        args += ["--namespace", PROBE_NAMESPACE, "--peer-namespace", RELEASE_NAMESPACE]
        args += ["--peer-selector", "test=probe-pair", "--listen-address", peers[node][1], "--port", str(port)]
        return [*args, "--health-port", "0", "--interval", "0.5", "--report-interval", "1"]

    def rows() -> dict[str, dict[str, str]]:
        found = {}
        for node in peers:
            done = cluster.kubectl("get", "configmap", f"netperf-nt-pair-{node}", "-n", PROBE_NAMESPACE, "-o", "json",
                                   check=False)  # fmt: skip
            found[node] = json.loads(done.stdout).get("data") or {} if done.returncode == 0 else {}
        return found

    def costs() -> dict[tuple[str, str], int]:
        return netperf_costs(cluster, PROBE_NAMESPACE, "nt-pair")

    operator = ["run", "--kubeconfig", str(chart_rbac["operator"]), "--components", "networktopology"]
    operator += ["--health-port", "0", "--leader-election-namespace", RELEASE_NAMESPACE]
    operator += ["--leader-election-id", "netaware-probe-e2e"]
    try:
        with (
            running(probe("probe-za"), tmp_path / "za.log"),
            running(probe("probe-zb"), tmp_path / "zb.log"),
            running(operator, tmp_path / "operator.log"),
        ):
            key = "netperf.p90.latency.milliseconds.origin.{}.destination.{}"
            measured = eventually(
                lambda: (
                    rows()["probe-za"].get(key.format("probe-za", "probe-zb"))
                    and rows()["probe-zb"].get(key.format("probe-zb", "probe-za"))
                    and rows()
                ),
                60,
                "each probe's row with the other",
            )
            za_to_zb = int(measured["probe-za"][key.format("probe-za", "probe-zb")])
            assert 1 <= za_to_zb < 50  # loopback
            # both directions (the controller recomputes at most every 10 s: the first pass may see one row)
            both = {("za", "zb"), ("zb", "za")}
            found = eventually(lambda: set(costs()) == both and costs(), 60, "the zone costs")
            assert all(1 <= cost < 50 for cost in found.values())
        assert forbidden(cluster, "probe") == [] and forbidden(cluster, "operator") == []
    finally:
        cluster.kubectl("delete", "pod", "-n", RELEASE_NAMESPACE, "-l", "test=probe-pair", "--wait=false")
        cluster.kubectl("delete", "node", *peers, "--wait=false", check=False)
