"""`netaware probe` on the real API server with the chart's probe ServiceAccount token: it lists its peers in its
own namespace, writes its row in the NetworkTopology's namespace, owned by its Node — and the garbage
collector deletes the row with the Node. No 403."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from tests.e2e.conftest import (
    PROBE_NAMESPACE,
    RELEASE_NAMESPACE,
    eventually,
    forbidden,
    free_port,
    kubectl_json,
    running,
    service_account,
)

pytestmark = pytest.mark.e2e

NODE = "probe-node"


def row(cluster: Any) -> dict[str, Any] | None:
    done = cluster.kubectl(
        "get", "configmap", f"netperf-nt-e2e-{NODE}", "-n", PROBE_NAMESPACE, "-o", "json", check=False
    )
    return json.loads(done.stdout) if done.returncode == 0 else None


def test_the_probe_writes_its_row_with_least_privilege_and_the_row_goes_with_its_node(
    cluster: Any, chart_rbac: dict[str, pathlib.Path], tmp_path: pathlib.Path
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
