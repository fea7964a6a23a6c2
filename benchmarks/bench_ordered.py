#!/usr/bin/env python3
"""Online Boutique on the real kube-scheduler + netaware's extender, with and without topology-ordered
scheduling (slow: not a test).

    python -m benchmarks.bench_ordered [--replicas 3 --runs 3]

A KWOK cluster of 16 nodes in 2 regions x 2 zones (1G each, zone pairs cost 5, region pairs 20) on the
loopback control plane (hack/control-plane, built first), a NetworkTopology with those costs, the Online
Boutique AppGroup (every dependency 50M, maxNetworkCost 10). Per run, the 11 Deployments are applied at
once, dependents first, with ``schedulerName: network-aware-scheduler``: a kube-scheduler profile calling
`netaware extender` (NetworkOverhead weight 5, NetworkBandwidth and NodeResourcesAllocatable 1; extender
weight 10). `netaware webhook` adds the pods' bandwidth requests and, when the AppGroup is annotated
``netaware.io/ordered-scheduling: "true"``, the gate; `netaware run --components appgroup` releases it.

Per mode (``gates`` and ``arrival``, the annotation ``"false"``): the network cost per dependency pair of
the final placement (mean, p90, fraction within maxNetworkCost; the rules of ``netaware simulate``), and the
seconds from the apply to the last binding, min / median / max over ``--runs``; beside what
``netaware simulate --scenario boutique`` predicts with netaware's plugins alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks import records
from benchmarks.figures import spread
from benchmarks.support import loopback_tls, tls_flags
from hack.control_plane import cluster as control_plane
from hack.control_plane.cluster import ControlPlane
from hack.control_plane.objects import extender_entry, member_deployment
from hack.control_plane.ports import free_port
from operators.engine.cluster.objects import Pod
from operators.engine.simulation import ordered
from webhooks.configuration import mutating_webhook_configuration

ROOT = pathlib.Path(__file__).resolve().parent.parent


NAMESPACE = "bench"
SCHEDULER = "network-aware-scheduler"


def in_namespace(document: dict[str, Any]) -> dict[str, Any]:
    if document["kind"] in ("AppGroup", "NetworkTopology"):
        return {**document, "metadata": {**document["metadata"], "namespace": NAMESPACE}}
    return document


def appgroup(scenario: ordered.AppScenario, gated: bool) -> dict[str, Any]:
    wire = scenario.group.model_dump(mode="json", by_alias=True, exclude_none=True)
    wire.pop("status", None)
    wire["metadata"] = {
        "name": scenario.group.metadata.name,
        "namespace": NAMESPACE,
        "annotations": {"netaware.io/ordered-scheduling": "true" if gated else "false"},
    }
    return wire


def deployments(scenario: ordered.AppScenario, replicas: int) -> str:
    """The Deployments, dependents first (status.topologyOrder's own order: the worst for NetworkOverhead)."""
    order = sorted(scenario.group.status.topology_order or (), key=lambda entry: entry.index)  # type: ignore[union-attr]
    documents = []
    for entry in order:
        group = scenario.group.metadata.name
        documents.append(member_deployment(NAMESPACE, group, entry.workload.selector, replicas, scheduler=SCHEDULER))
    return "\n---\n".join(json.dumps(document) for document in documents)


def listed(plane: ControlPlane) -> list[dict[str, Any]]:
    return list(json.loads(plane.kubectl("get", "pods", "-n", NAMESPACE, "-o", "json").stdout)["items"])


def measure(plane: ControlPlane, scenario: ordered.AppScenario, replicas: int, gated: bool) -> dict[str, Any]:
    plane.kubectl("apply", "-f", "-", stdin=json.dumps(appgroup(scenario, gated)))
    time.sleep(3)  # the webhook's view sees the annotation
    started = time.monotonic()
    plane.kubectl("apply", "-f", "-", stdin=deployments(scenario, replicas))
    expected = replicas * len(scenario.group.spec.workloads)
    bound, last = 0, time.monotonic()
    pods: list[dict[str, Any]] = []
    while time.monotonic() - last < 60:
        pods = listed(plane)
        now_bound = sum(1 for pod in pods if pod["spec"].get("nodeName"))
        if now_bound != bound:
            bound, last = now_bound, time.monotonic()
        if bound == expected:
            break
        time.sleep(0.2)
    seconds = last - started
    gates = sum(1 for pod in pods if pod["spec"].get("schedulingGates"))
    real = tuple(Pod.parse(pod) for pod in pods)
    placement = {pod.name: pod.node_name or None for pod in real}
    costs = ordered.edge_costs(dataclasses.replace(scenario, pods=real), placement)
    plane.kubectl("delete", "deployments", "--all", "-n", NAMESPACE, "--wait=false")
    deadline = time.monotonic() + 120
    while listed(plane) and time.monotonic() < deadline:
        time.sleep(0.5)
    return {**costs.to_json(), "seconds": round(seconds, 2), "stillGated": gates}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--record", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args()
    subprocess.run(["bash", str(ROOT / "hack" / "control-plane" / "build.sh")], check=True, stdout=subprocess.DEVNULL)
    folder = pathlib.Path(tempfile.mkdtemp(prefix="netaware-bench-ordered-"))
    cluster = ordered.zoned_cluster()
    scenario = ordered.boutique(args.replicas, cluster)
    nodes = [document for document in cluster if document["kind"] == "Node"]
    topology = [in_namespace(document) for document in cluster if document["kind"] == "NetworkTopology"]
    (folder / "nodes.yaml").write_text("\n---\n".join(json.dumps(node) for node in nodes))
    plane = control_plane.ControlPlane(folder / "plane")
    plane.start([folder / "nodes.yaml"])
    processes: list[subprocess.Popen[bytes]] = []
    try:
        plane.kubectl("create", "namespace", NAMESPACE)
        plane.kubectl("apply", "-f", str(ROOT / "crds"))
        plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        plane.kubectl("apply", "-f", "-", stdin=json.dumps(topology[0]))
        ca_b64 = loopback_tls(folder)
        tls = tls_flags(folder)
        config = folder / "extender-config.yaml"
        config.write_text(
            json.dumps(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "profiles": [
                        {
                            "plugins": {
                                "multiPoint": {
                                    "enabled": [
                                        {"name": "NetworkOverhead", "weight": 5},
                                        {"name": "NetworkBandwidth", "weight": 1},
                                        {"name": "NodeResourcesAllocatable", "weight": 1},
                                    ]
                                }
                            },
                            "pluginConfig": [
                                {
                                    "name": "NetworkOverhead",
                                    "args": {"namespaces": [NAMESPACE], "networkTopologyName": ordered.TOPOLOGY},
                                }
                            ],
                        }
                    ],
                }
            )
        )
        extender_port, webhook_port = free_port(), free_port()

        def start(name: str, *command: str) -> None:
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", "operators.cli", *command, "--kubeconfig", str(plane.kubeconfig)],
                    cwd=ROOT,
                    stdout=(folder / f"{name}.log").open("w"),
                    stderr=subprocess.STDOUT,
                )
            )

        start(
            "extender",
            "extender",
            "--listen-address",
            "127.0.0.1",
            "--port",
            str(extender_port),
            "--config",
            str(config),
            *tls,
        )
        start("webhook", "webhook", "--listen-address", "127.0.0.1", "--port", str(webhook_port), *tls)
        start("operator", "run", "--components", "appgroup", "--no-leader-elect", "--health-port", "0")
        hook = mutating_webhook_configuration("netaware-bench", "unused", "netaware-system", ca_b64)
        hook["webhooks"][0]["clientConfig"] = {
            "url": f"https://127.0.0.1:{webhook_port}/mutate-pods",
            "caBundle": ca_b64,
        }
        hook["webhooks"][0]["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}
        hook["webhooks"][0]["failurePolicy"] = "Fail"
        time.sleep(5)  # the webhook listens before the API server calls it
        plane.kubectl("apply", "-f", "-", stdin=json.dumps(hook))
        scheduler = plane.scheduler_config(
            [{"schedulerName": SCHEDULER}],
            [extender_entry(extender_port, ca_b64, weight=10, ignorable=False, timeout="10s")],
        )
        (folder / "scheduler.yaml").write_text(json.dumps(scheduler))
        plane.start_scheduler(SCHEDULER, folder / "scheduler.yaml")
        time.sleep(5)  # the extender lists the cluster, the scheduler syncs its informers
        results: dict[str, list[dict[str, Any]]] = {"arrival": [], "gates": []}
        for _ in range(args.runs):
            for mode in ("arrival", "gates"):
                results[mode].append(measure(plane, scenario, args.replicas, mode == "gates"))
        predicted = ordered.compare(scenario, seeds=5)
        print(
            f"Online Boutique, {args.replicas} replicas, real kube-scheduler + extender + KWOK (16 nodes), "
            f"{args.runs} runs"
        )
        print("min / median / max   mean cost          p90 cost           within maxNetworkCost   seconds")
        for mode in ("arrival", "gates"):
            rows = results[mode]
            columns = [
                spread([r[key] for r in rows]) for key in ("meanCost", "p90Cost", "withinMaxNetworkCost", "seconds")
            ]
            print(f"  {mode:8s} (real)     {columns[0]:18s} {columns[1]:18s} {columns[2]:23s} {columns[3]}")
            p = predicted[mode]
            print(f"  {mode:8s} (simulate) {p['meanCost']:<18} {p['p90Cost']:<18} {p['withinMaxNetworkCost']:<23}")
        print(json.dumps({"real": results, "simulate": predicted}))
        if args.record:
            keys = ("meanCost", "p90Cost", "withinMaxNetworkCost", "seconds")
            figures = records.measured_and_simulated(results, predicted, keys)
            records.write(args.record, "bench_ordered", vars(args), figures)
        print(f"logs: {folder}")
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
        plane.stop()


if __name__ == "__main__":
    main()
