"""Conformance against the real upstream binary: kubernetes-sigs/scheduler-plugins' own scheduler (built by
``hack/control-plane/build-peer.sh``, which the README's test command runs through ``build.sh``; when it is not
built, skipped with that instruction, and failed under CI: ``tests/support/prerequisites``) with NetworkOverhead alone
places pods of an Online Boutique AppGroup where netaware's offline ``schedule`` predicts for NetworkOverhead
alone: among the nodes netaware gives the top score to (same costs, same filter verdicts), and those are not
every node."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import Any

import pytest
import yaml

from hack.control_plane.cluster import ControlPlane
from tests.support.e2e import EXAMPLES, ROOT, create_namespace, delete_namespace, eventually, kubectl_json
from tests.support.prerequisites import peer_built, require

pytestmark = pytest.mark.e2e

SCHEDULER, NAMESPACE, GROUP = "scheduler-plugins", "peer-e2e", "ob-peer"
ARGS = {"namespaces": [NAMESPACE], "weightsName": "UserDefined", "networkTopologyName": "net-topology-test"}
PLACED = {"p2": "n-1", "p3": "n-5", "p4": "n-3", "p6": "n-8"}  # dependencies already running, in both regions


def moved(document: dict[str, Any]) -> dict[str, Any]:
    """An example object in this test's namespace (the AppGroup renamed: no other test's pods count for it)."""
    text = json.dumps(document).replace('"namespace": "default"', f'"namespace": "{NAMESPACE}"')
    found: dict[str, Any] = json.loads(text)
    if found["kind"] == "AppGroup":
        found["metadata"]["name"] = GROUP
    return found


def pod(workload: str, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
                            "tolerations": [{"operator": "Exists"}]}  # fmt: skip
    if node:
        spec["nodeName"] = node
    else:
        spec["schedulerName"] = SCHEDULER
    labels = {"appgroup.diktyo.x-k8s.io": GROUP, "appgroup.diktyo.x-k8s.io.workload": workload}
    name = f"{workload}-{node or 'peer'}"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
            "spec": spec}  # fmt: skip


def netaware_best(cluster: ControlPlane, candidate: dict[str, Any], folder: pathlib.Path) -> tuple[set[str], int]:
    """The nodes netaware's `schedule` (NetworkOverhead alone) gives the top total to, and how many nodes pass."""
    dump = folder / "cluster.yaml"
    dump.write_text(
        cluster.kubectl("get", "nodes,pods,appgroups,networktopologies,namespaces", "-A", "-o", "yaml").stdout
    )
    (folder / "pod.yaml").write_text(yaml.safe_dump(candidate))
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": SCHEDULER,
                      "plugins": {"multiPoint": {"enabled": [{"name": "NetworkOverhead", "weight": 1}]}},
                      "pluginConfig": [{"name": "NetworkOverhead", "args": ARGS}]}],
    }  # fmt: skip
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    command = ["schedule", "-f", str(dump), "--pod", str(folder / "pod.yaml"), "--config", str(folder / "config.yaml")]
    done = subprocess.run([sys.executable, "-m", "operators.cli", *command, "-o", "json"],
                          capture_output=True, text=True, check=True, cwd=ROOT)  # fmt: skip
    totals: dict[str, int] = json.loads(done.stdout)["totalScore"]
    best = max(totals.values())
    return {node for node, total in totals.items() if total == best}, len(totals)


@pytest.fixture
def peer() -> None:
    require(peer_built())


def test_scheduler_plugins_places_where_netaware_predicts_for_network_overhead(
    peer: None, cluster: ControlPlane, tmp_path: pathlib.Path
) -> None:
    create_namespace(cluster, NAMESPACE)
    for example in ("appgroup-onlineboutique.yaml", "networktopology.yaml"):
        for document in yaml.safe_load_all((EXAMPLES / example).read_text()):
            cluster.kubectl("apply", "-f", "-", stdin=json.dumps(moved(document)))
    for workload, node in PLACED.items():
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(pod(workload, node)))
    profile = {
        "schedulerName": SCHEDULER,
        "plugins": {  # upstream's sample: NetworkOverhead at preFilter, filter and score; no other score plugin
            "preFilter": {"enabled": [{"name": "NetworkOverhead"}]},
            "filter": {"enabled": [{"name": "NetworkOverhead"}]},
            "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "NetworkOverhead", "weight": 1}]},
        },
        "pluginConfig": [{"name": "NetworkOverhead", "args": ARGS}],
    }
    config = tmp_path / "peer.yaml"
    config.write_text(json.dumps(cluster.scheduler_config([profile], [])))
    cluster.start_scheduler(SCHEDULER, config, binary="scheduler-plugins")
    try:
        for workload in ("p1", "p8", "p9"):  # frontend, checkoutservice, recommendationservice: their dependencies run
            candidate = pod(workload)
            best, nodes = netaware_best(cluster, candidate, tmp_path)
            assert len(best) < nodes, (best, nodes)  # the choice meant something: not every node ties
            cluster.kubectl("apply", "-f", "-", stdin=json.dumps(candidate))
            name = candidate["metadata"]["name"]
            placed = eventually(
                lambda name=name: kubectl_json(cluster, "get", "pod", name, "-n", NAMESPACE)["spec"].get("nodeName"),
                60,
                f"{name} placed by scheduler-plugins",
            )
            assert placed in best, (workload, placed, best)
    finally:
        cluster.stop_component(SCHEDULER)
        delete_namespace(cluster, NAMESPACE)
