"""`netaware agent` on the real API server with the chart's agent ServiceAccount token, shaping a node namespace
of the real kernel (the bridge of pod namespaces and the uplink of tests/integration/test_agent_kernel.py): it
publishes the NIC's speed, enforces its NodeSLO, reports a pod it cannot classify as an Event, writes the usage
it measured into the NodeSLO's status — from which the descheduler classifies the node — and on SIGTERM, its
DaemonSet absent (uninstalled), removes what it made. No request refused."""

from __future__ import annotations

import copy
import json
import pathlib
import re
import subprocess
import sys
from typing import Any

import pytest
import yaml

from hack.control_plane.cluster import ControlPlane
from operators.api.config.descheduler import DEFAULT_POLICY
from tests.support.e2e import RELEASE_NAMESPACE, eventually, forbidden, kubectl_json, running, service_account
from tests.support.kernel import (
    NODE,
    PODS,
    from_pods,
    iperf,
    kernel_node,  # noqa: F401 (the fixture "node")
    sh,
    wire,
)

pytestmark = pytest.mark.e2e

NAME, IDLE, NAMESPACE = "agent-e2e", "agent-e2e-idle", "agent-e2e"
M = 1_000_000
BANDWIDTH = "node.koordinator.sh/network-bandwidth"


def nodeslo(name: str) -> dict[str, Any]:
    percent = {"enable": True, "egressRequest": 60, "ingressRequest": 60}
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeSLO",
        "metadata": {"name": name},
        "spec": {
            "resourceQOSStrategy": {
                "lsClass": {"networkQOS": percent},
                "beClass": {"networkQOS": {**percent, "egressRequest": 20, "ingressRequest": 20}},
            }
        },
    }


def pod(name: str, qos: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"koordinator.sh/qosClass": qos}},
        "spec": {"nodeName": NAME, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                 "tolerations": [{"operator": "Exists"}]},
    }  # fmt: skip


def root_rate() -> str:
    found = re.search(r"class htb 4e41:1 root rate (\S+)", sh("tc", "class", "show", "dev", "up0", netns=NODE).stdout)
    return found.group(1) if found else ""


def test_the_agent_enforces_publishes_and_reports_with_least_privilege(
    node: None,
    cluster: ControlPlane,
    chart_rbac: dict[str, pathlib.Path],
    tmp_path: pathlib.Path,
) -> None:
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    for name in (NAME, IDLE):  # plain Nodes (no KWOK stage rewrites their pods' status); the idle one is annotated
        annotations = {BANDWIDTH: "100M"} if name == IDLE else {}
        plain = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": annotations}}
        cluster.kubectl("create", "-f", "-", stdin=json.dumps(plain))
        cluster.kubectl("create", "-f", "-", stdin=json.dumps(nodeslo(name)))
    for name, qos in (("ls", "LS"), ("be", "BE"), ("waiting", "BE")):
        cluster.kubectl("create", "-f", "-", stdin=json.dumps(pod(name, qos)))
        if name in PODS:  # the kubelet's part: the pod's address
            status = {"status": {"phase": "Running", "podIP": PODS[name][1], "podIPs": [{"ip": PODS[name][1]}]}}
            cluster.kubectl("patch", "pod", name, "-n", NAMESPACE, "--subresource=status", "--type=merge",
                            "-p", json.dumps(status))  # fmt: skip
    args = ["agent", "--kubeconfig", str(chart_rbac["agent"]), "--node-name", NAME, "--netns", NODE]
    args += ["--interface", "up0", "--publish-capacity", "--report-interval", "1", "--health-port", "0"]
    args += ["--cleanup-on-uninstall", f"{RELEASE_NAMESPACE}/netaware-agent"]  # no such DaemonSet: uninstalled
    try:
        with running(args, tmp_path / "agent.log") as process:
            # the veth's speed (10000 Mbit/s) published on a node without the annotation, and enforced
            annotated = eventually(
                lambda: kubectl_json(cluster, "get", "node", NAME)["metadata"].get("annotations", {}).get(BANDWIDTH),
                60,
                "the NIC's speed published",
            )
            assert annotated == str(10_000 * M)

            def alive() -> bool:
                if process.handle.poll() is not None:
                    raise AssertionError(f"the agent exited ({process.handle.returncode}): {process.text()[-2000:]}")
                return True

            eventually(lambda: alive() and root_rate() == "10Gbit", 30, "the tree at the node's 10G")
            # the operator's own figure wins over the published one: the tree follows the node
            cluster.kubectl("annotate", "node", NAME, f"{BANDWIDTH}=100M", "--overwrite")
            eventually(lambda: alive() and root_rate() == "100Mbit", 30, "the tree at 100M")
            events = kubectl_json(cluster, "get", "events", "-A", "--field-selector", f"involvedObject.name={NAME}")
            warnings = [e["message"] for e in events["items"] if e["reason"] == "NetworkQOSNotEnforced"]
            assert any(f"pod {NAMESPACE}/waiting has no IP of its own" in message for message in warnings), warnings

            (report,) = iperf(from_pods("ls"), 6)
            usage = eventually(
                lambda: (
                    kubectl_json(cluster, "get", "nodeslo", NAME)
                    .get("status", {})
                    .get("networkUsage", {})
                    .get("egress", 0)
                    > 50 * M
                    and kubectl_json(cluster, "get", "nodeslo", NAME)["status"]["networkUsage"]
                ),
                30,
                "the measured usage in the NodeSLO's status",
            )
            assert usage["pods"][f"{NAMESPACE}/ls"]["egress"] <= 1.05 * wire(report) + 1 * M
            assert process.handle.poll() is None, process.text()[-2000:]
        # stopped (SIGTERM) with its DaemonSet absent: everything it made is gone
        assert process.handle.returncode == 0, process.text()[-2000:]
        assert "4e41" not in sh("tc", "qdisc", "show", netns=NODE).stdout
        assert "netaware" not in sh("nft", "list", "tables", netns=NODE).stdout

        # the descheduler classifies from the agent's usage: the busy node high, an idle one (usage 1M) low. The busy
        # node's usage as the agent published it under traffic (read above): a report after iperf ended, before the
        # agent stopped, is lower (CI once classified the node "normal" from it)
        busy = {"status": {"networkUsage": usage}}
        idle = {"status": {"networkUsage": {**usage, "egress": 1 * M, "ingress": 0, "pods": {}}}}
        for name, status in ((NAME, busy), (IDLE, idle)):
            cluster.kubectl("patch", "nodeslo", name, "--subresource=status", "--type=merge", "-p", json.dumps(status))
        dump = tmp_path / "dump.yaml"
        dump.write_text(
            cluster.kubectl(
                "get", f"node/{NAME}", f"node/{IDLE}", f"nodeslo/{NAME}", f"nodeslo/{IDLE}", "-o", "yaml"
            ).stdout
        )
        document = copy.deepcopy(DEFAULT_POLICY)
        document["profiles"][0]["pluginConfig"][0]["args"] = {
            "lowThresholds": {"netBandwidth": 20},
            "highThresholds": {"netBandwidth": 40},
            "usage": {"netBandwidth": "measured"},
        }
        policy = tmp_path / "policy.yaml"
        policy.write_text(yaml.safe_dump(document))
        command = [sys.executable, "-m", "operators.cli", "deschedule", "-f", str(dump), "--policy", str(policy)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
        classes = {name: found["class"] for name, found in json.loads(done.stdout)["nodes"].items()}
        assert classes == {NAME: "high", IDLE: "low"}, classes
        assert forbidden(cluster, "agent") == []
        verbs = {(e["verb"], e["objectRef"]["resource"]) for e in cluster.audit_events(service_account("agent"))}
        assert ("patch", "nodes") in verbs and ("get", "daemonsets") in verbs and ("create", "events") in verbs
    finally:
        cluster.kubectl("delete", "node", NAME, IDLE, "--wait=false", check=False)
        cluster.kubectl("delete", "nodeslo", NAME, IDLE, "--wait=false", check=False)
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
