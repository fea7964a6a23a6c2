"""`netaware run` on the real API server with the chart's operator ServiceAccount token: the AppGroup,
NetworkTopology and NodeSLO scenarios of the emulator tier, leader election on real Leases; no 403."""

from __future__ import annotations

import json
import pathlib
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from hack.control_plane.cluster import ControlPlane
from tests.support.e2e import EXAMPLES, RELEASE_NAMESPACE, eventually, example, forbidden, kubectl_json, running

pytestmark = pytest.mark.e2e


def run_args(kubeconfig: pathlib.Path, *extra: str) -> list[str]:
    return [
        "run",
        "--kubeconfig",
        str(kubeconfig),
        "--leader-election-namespace",
        RELEASE_NAMESPACE,
        "--health-port",
        "0",
        *extra,
    ]


@pytest.fixture(scope="module")
def operator(
    cluster: ControlPlane, chart_rbac: dict[str, pathlib.Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    with running(run_args(chart_rbac["operator"], "--leader-election-id", "netaware-e2e"), log) as process:
        eventually(lambda: "running appgroup" in process.text(), 60, "the operator running")
        yield process


def status(cluster: ControlPlane, kind: str, name: str, namespace: str | None = "default") -> dict[str, Any]:
    where = ["-n", namespace] if namespace else []
    return dict(kubectl_json(cluster, "get", kind, name, *where).get("status") or {})


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), {})


def test_appgroup_lifecycle(cluster: ControlPlane, operator: Any) -> None:
    cluster.kubectl("apply", "-f", str(EXAMPLES / "pods.yaml"), "-f", str(EXAMPLES / "appgroup-a1.yaml"))
    first = eventually(lambda: status(cluster, "ag", "a1").get("topologyOrder") and status(cluster, "ag", "a1"), 60)
    assert [entry["workload"]["selector"] for entry in sorted(first["topologyOrder"], key=lambda e: e["index"])] == [
        "p1",
        "p2",
        "p3",
    ]
    assert condition(first, "Ready")["status"] == "True"
    placed = {pod["name"]: pod["node"] for w in first["placements"] for pod in w["pods"]}
    assert placed == {"p2-deployment-7d4b9c-abcde": "n-1", "p3-deployment-5f6c7d-fghij": "n-4"}
    cluster.kubectl("patch", "ag", "a1", "--type=merge", "-p", '{"spec": {"topologySortingAlgorithm": "ReverseKahn"}}')
    changed = eventually(
        lambda: status(cluster, "ag", "a1").get("observedGeneration") == 2 and status(cluster, "ag", "a1")
    )
    assert [e["workload"]["selector"] for e in sorted(changed["topologyOrder"], key=lambda e: e["index"])] == [
        "p3",
        "p2",
        "p1",
    ]
    cycle = example("appgroup-a1.yaml")[0]
    cycle["metadata"]["name"] = "cyclic"
    cycle["spec"]["workloads"][2]["dependencies"] = [{"workload": cycle["spec"]["workloads"][0]["workload"]}]
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(cycle))
    ready = eventually(lambda: condition(status(cluster, "ag", "cyclic"), "Ready"), 60)
    assert ready["status"] == "False" and ready["reason"] == "DependencyCycle"
    events = kubectl_json(cluster, "get", "events", "-n", "default", "--field-selector", "involvedObject.name=cyclic")
    assert any(e["reason"] == "DependencyCycle" and e["type"] == "Warning" for e in events["items"])


def test_networktopology_costs(cluster: ControlPlane, operator: Any) -> None:
    cluster.kubectl(
        "apply", "-f", str(EXAMPLES / "netperf-configmap.yaml"), "-f", str(EXAMPLES / "networktopology.yaml")
    )

    def counts() -> tuple[int, int]:  # other tests add KWOK nodes of their own: count what is there now
        nodes = len(kubectl_json(cluster, "get", "nodes")["items"])
        return status(cluster, "nt", "net-topology-test").get("nodeCount", -1), nodes

    eventually(lambda: len(set(counts())) == 1, 60, "nodeCount")

    def weights() -> set[str]:
        spec = kubectl_json(cluster, "get", "nt", "net-topology-test", "-n", "default")["spec"]
        return {weight["name"] for weight in spec["weights"]}

    # A user's `kubectl apply` of the manifest replaces spec.weights (a list without a merge key) and drops the
    # NetperfCosts weight netaware writes there, as upstream's controller does: it is written back.
    eventually(lambda: "NetperfCosts" in weights(), 60, "the NetperfCosts weight")


def test_nodeslo_per_node_and_a_deleted_node(cluster: ControlPlane, operator: Any, tmp_path: pathlib.Path) -> None:
    cluster.kubectl("create", "namespace", "koordinator-system", check=False)
    cluster.kubectl("apply", "-f", str(EXAMPLES / "slo-controller-config.yaml"))
    eventually(lambda: status(cluster, "nslo", "n-1", None).get("networkQOS"), 60)
    assert status(cluster, "nslo", "n-5", None)["networkQOS"]["classes"]["be"]["ingressRequest"] == "500M"
    # a new percentage: the owned spec field is patched, the status follows (30 % -> 40 % of 1G)
    config = example("slo-controller-config.yaml")[0]
    qos = json.loads(config["data"]["resource-qos-config"])
    qos["clusterStrategy"]["lsClass"]["networkQOS"]["ingressRequest"] = 40
    config["data"]["resource-qos-config"] = json.dumps(qos)
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(config))

    def ls_request(name: str) -> Any:
        spec = kubectl_json(cluster, "get", "nslo", name)["spec"]
        return spec["resourceQOSStrategy"]["lsClass"]["networkQOS"]["ingressRequest"]

    eventually(lambda: ls_request("n-1") == 40, 60, "the NodeSLO spec patched")
    eventually(lambda: status(cluster, "nslo", "n-1", None)["networkQOS"]["classes"]["ls"]["ingressRequest"] == "400M")
    node = tmp_path / "node.yaml"
    node.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": "n-extra",
                    "labels": {"topology.kubernetes.io/region": "us-west-1", "topology.kubernetes.io/zone": "Z1"},
                    "annotations": {"node.koordinator.sh/network-bandwidth": "2G"},
                },
            }
        )
    )
    cluster.add_nodes(node)
    eventually(
        lambda: status(cluster, "nslo", "n-extra", None).get("networkQOS", {}).get("totalNetworkBandwidth") == "2G", 60
    )
    cluster.kubectl("delete", "node", "n-extra")
    eventually(lambda: cluster.kubectl("get", "nslo", "n-extra", check=False).returncode != 0, 60, "NodeSLO deleted")


def test_the_operator_was_never_refused(cluster: ControlPlane, operator: Any) -> None:
    time.sleep(1)
    assert forbidden(cluster, "operator") == []
    assert "Forbidden" not in operator.text()


def holder(cluster: ControlPlane, lease: str) -> str:
    spec = kubectl_json(cluster, "get", "lease", lease, "-n", RELEASE_NAMESPACE).get("spec") or {}
    return str(spec.get("holderIdentity") or "")


def test_leader_election_on_real_leases(
    cluster: ControlPlane, chart_rbac: dict[str, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    timing = ["--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "1.5", "--components", "appgroup"]
    lease = ["--leader-election-id", "netaware-le"]
    first_args = run_args(chart_rbac["operator"], *timing, *lease, "--leader-election-identity", "replica-a")
    second_args = run_args(chart_rbac["operator"], *timing, *lease, "--leader-election-identity", "replica-b")
    with running(first_args, tmp_path / "a.log") as first, running(second_args, tmp_path / "b.log") as second:
        eventually(
            lambda: holder(cluster, "netaware-le") == "replica-a" or holder(cluster, "netaware-le") == "replica-b", 60
        )
        leader, follower = (first, second) if holder(cluster, "netaware-le") == "replica-a" else (second, first)
        expected = "replica-b" if leader is first else "replica-a"
        leader.handle.send_signal(signal.SIGKILL)  # dies without handing the Lease back
        leader.handle.wait()
        eventually(lambda: holder(cluster, "netaware-le") == expected, 30, "the follower takes the Lease")
        eventually(lambda: "running appgroup" in follower.text(), 30)
        assert follower.stop() == 0
        assert holder(cluster, "netaware-le") == ""  # released on SIGTERM
