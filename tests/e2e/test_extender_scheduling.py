"""The extender called by the real kube-scheduler: a second scheduler (profile ``network-aware-scheduler``)
with the extender over TLS, ``nodeCacheCapable``, ``ignorable``; the extender runs with the chart's token."""

from __future__ import annotations

import datetime
import json
import pathlib
import re
import subprocess
import sys
import time
from typing import Any

import pytest
import yaml

from hack.control_plane.cluster import ControlPlane
from hack.control_plane.objects import extender_entry
from hack.control_plane.ports import free_port
from tests.support.e2e import (
    EXAMPLES,
    ROOT,
    eventually,
    extender_command,
    forbidden,
    https_get,
    kubectl_json,
    running,
    service_account,
    wait_for_port,
)

pytestmark = pytest.mark.e2e

SCHEDULER = "network-aware-scheduler"


def p1_pod(name: str) -> dict[str, Any]:
    pod = yaml.safe_load((ROOT / "hack" / "pod-p1.yaml").read_text())
    pod["metadata"]["name"] = name
    pod["metadata"].pop("annotations", None)
    pod["spec"]["schedulerName"] = SCHEDULER
    pod["spec"].pop("nodeName", None)
    return dict(pod)


def node_of(cluster: ControlPlane, name: str) -> str:
    return str(kubectl_json(cluster, "get", "pod", name, "-n", "default")["spec"].get("nodeName") or "")


def expected_nodes(cluster: ControlPlane, pod: dict[str, Any], folder: pathlib.Path) -> set[str]:
    """The nodes `netaware schedule` gives the top total to, on a dump of the cluster as it is now."""
    dump = folder / "cluster.yaml"
    listing = cluster.kubectl("get", "nodes,pods,appgroups,networktopologies,namespaces", "-A", "-o", "yaml").stdout
    dump.write_text(listing)
    pod_file = folder / "pod.yaml"
    pod_file.write_text(yaml.safe_dump(pod))
    config = ROOT / "hack" / "configs" / "scheduler-config.yaml"
    command = ["schedule", "-f", str(dump), "--pod", str(pod_file), "--config", str(config), "-o", "json"]
    done = subprocess.run(
        [sys.executable, "-m", "operators.cli", *command],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    totals = json.loads(done.stdout)["totalScore"]
    # kube-scheduler sees the extender's 0..10 scale: the weighted total over 100 x the weights (5 + 2 + 1 in
    # hack/configs/scheduler-config.yaml), truncated; nodes that tie there are told apart by its in-tree scores.
    scale = {node: total * 10 // (100 * 8) for node, total in totals.items()}
    best = max(scale.values())
    return {node for node, score in scale.items() if score == best}


def network_warnings(cluster: ControlPlane, pod: str) -> list[dict[str, Any]]:
    events = kubectl_json(cluster, "get", "events", "-n", "default", "--field-selector", f"involvedObject.name={pod}")
    return [event for event in events["items"] if event["reason"] == "NetworkUnschedulable"]


def probe(port: int, path: str, ca_file: pathlib.Path) -> int:
    """The HTTP status of a GET on the extender (0 when it does not answer)."""
    return https_get(port, path, ca_file)[0]


def extender_calls(port: int, ca_file: pathlib.Path) -> dict[str, float]:
    """How many /filter and /prioritize calls the extender served (its latency histogram's counts)."""
    text = https_get(port, "/metrics", ca_file)[1]
    counts = dict.fromkeys(("filter", "prioritize"), 0.0)
    for verb in counts:
        match = re.search(rf'netaware_extender_latency_seconds_count{{verb="{verb}"}} ([\d.]+)', text)
        counts[verb] = float(match.group(1)) if match else 0.0
    return counts


def test_pods_land_where_netaware_schedule_says_and_ignorable_survives_an_outage(
    cluster: ControlPlane, chart_rbac: dict[str, pathlib.Path], host_tls: dict[str, Any], tmp_path: pathlib.Path
) -> None:
    cluster.kubectl(
        "apply",
        "-f",
        str(EXAMPLES / "pods.yaml"),
        "-f",
        str(EXAMPLES / "appgroup-a1.yaml"),
        "-f",
        str(EXAMPLES / "networktopology.yaml"),
    )
    started = datetime.datetime.now(datetime.UTC)  # the extender's ServiceAccount serves other tests' processes too
    port = free_port()
    # weight 20: the extender's 0..10 decides over the in-tree scores (KWOK nodes are alike)
    extender = extender_entry(port, host_tls["ca_b64"], weight=20, ignorable=True, timeout="5s")
    config = tmp_path / "scheduler.yaml"
    config.write_text(json.dumps(cluster.scheduler_config([{"schedulerName": SCHEDULER}], [extender])))
    args = extender_command(port, chart_rbac, host_tls, ROOT / "hack" / "configs" / "scheduler-config.yaml")
    cluster.start_scheduler(SCHEDULER, config)
    try:
        with running(args, tmp_path / "extender.log") as process:
            wait_for_port(port, process=process)
            eventually(lambda: "listening" in process.text(), 30)
            eventually(lambda: probe(port, "/readyz", host_tls["ca"]) == 200, 60, "extender synced")
            pod = p1_pod("p1-scheduled")
            expected = expected_nodes(cluster, pod, tmp_path)
            cluster.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
            placed = eventually(lambda: node_of(cluster, "p1-scheduled"), 60, "p1 scheduled")
            assert placed in expected, (placed, expected)
            assert len(expected) < 8, expected  # the choice meant something: not every node ties
            calls = extender_calls(port, host_tls["ca"])
            assert calls["filter"] >= 1 and calls["prioritize"] >= 1, calls
            # a pod no node fits: one Warning Event from the extender with why, whatever kube-scheduler's retries
            huge = p1_pod("p1-too-big")
            huge["metadata"]["annotations"] = {"kubernetes.io/ingress-request": "50G"}
            cluster.kubectl("apply", "-f", "-", stdin=json.dumps(huge))
            warned = eventually(lambda: network_warnings(cluster, "p1-too-big"), 60, "the extender's Warning Event")
            # every node the extender knows (the session's other tests add some) lacks the bandwidth
            assert re.match(
                r"no node fits: NetworkBandwidth: (\d+) of \1 nodes: insufficient ingress bandwidth \(\S+: requested "
                r"50G bits/s, free",
                warned[0]["message"],
            ), warned[0]["message"]
            time.sleep(5)  # kube-scheduler retries the pod (backoff 1 s, 2 s, ...): still one Event
            assert len(network_warnings(cluster, "p1-too-big")) == 1
        assert forbidden(cluster, "extender") == []
        # its cache followed the cluster by watch, never a re-list loop (which listed every 0.5 s, dozens of times
        # in this test): one list per kind, two where the API server's watch cache of a just-created CRD answered
        # 429 "storage is (re)initializing"
        mine = cluster.audit_events(service_account("extender"), since=started)
        requests = [(e["verb"], e["objectRef"]["resource"]) for e in mine]
        for kind in ("nodes", "pods", "appgroups", "networktopologies", "nodeslos"):
            assert 1 <= requests.count(("list", kind)) <= 2, (kind, requests.count(("list", kind)))
            assert requests.count(("watch", kind)) >= 1, kind
        # the extender is down: ignorable lets the scheduler go on without it
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(p1_pod("p1-without-extender")))
        assert eventually(lambda: node_of(cluster, "p1-without-extender"), 60, "scheduled without the extender")
    finally:
        cluster.stop_component(SCHEDULER)
        cluster.kubectl(
            "delete", "pod", "p1-scheduled", "p1-without-extender", "p1-too-big", "--ignore-not-found", "--wait=false"
        )
