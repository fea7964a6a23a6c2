#!/usr/bin/env python3
"""The thesis' scenario 1 on the real kube-scheduler, with and without netaware's extender (slow: not a test).

    python -m benchmarks.bench_real_scheduler [--nodes 200 --pods 1500 --runs 3]

A KWOK cluster of ``--nodes`` thesis nodes (32 cpu, 256Gi, 110 pods, ``node.kubernetes.io/network-limit:
1Gi``) on the loopback control plane (hack/control-plane, built first); ``--pods`` pods of 100M ingress +
100M egress and no cpu/memory requests, created at once, scheduled

(a) by kube-scheduler alone (its default profile: it does not see bandwidth);
(b) ``extender``: a kube-scheduler profile that calls `netaware extender` (NetworkBandwidth, ``combined``
    accounting as the thesis' 1000-of-1500 result implies; extender weight 5, nodeCacheCapable, over TLS) —
    the pure-extender mode (chart ``bandwidth.guarantee: extender``);
(c) ``guaranteed``: the same profile and extender, the pods created through `netaware webhook
    --bandwidth-resources combined` (the API server's admission chain, over TLS) and the nodes advertised by
    `netaware run --components nodebandwidth --accounting-mode combined` (chart ``bandwidth.guarantee:
    resources``): kube-scheduler accounts ``netaware.io/bandwidth`` itself.

For each: scheduled, pending, overcommitted nodes (requested in+out above the capacity) and pods/s (pods
bound / seconds from the first creation to the last binding), min/median/max over ``--runs``, beside what
``netaware simulate --scenario thesis-1 --accounting combined`` predicts for the same cluster. The ratios to
(a) are the budget (docs/design/contracts.md): at least 0.5.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from benchmarks import records
from benchmarks.figures import spread
from benchmarks.support import loopback_tls, tls_flags, wait_listening
from hack.control_plane import cluster as control_plane
from hack.control_plane.cluster import ControlPlane
from hack.control_plane.objects import extender_entry
from hack.control_plane.ports import free_port
from operators.engine.simulation.cluster import Cluster
from operators.engine.simulation.scenarios import scenario
from operators.engine.simulation.simulate import Options, expand, report, run_scheduler

ROOT = pathlib.Path(__file__).resolve().parent.parent


GI = 1024**3
GUARANTEED = "bench-guaranteed"  # the namespace the webhook admits
BANDWIDTH = 100_000_000  # per direction, per pod


def nodes_yaml(count: int) -> str:
    nodes = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": f"node-{i:04d}",
                "labels": {"topology.kubernetes.io/region": "r1", "topology.kubernetes.io/zone": f"z{i % 10}"},
                "annotations": {"node.kubernetes.io/network-limit": "1Gi"},
            },
            "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"}},
        }
        for i in range(count)
    ]
    return "\n---\n".join(json.dumps(node) for node in nodes)


def pods(count: int, scheduler: str, run: int, namespace: str = "bench") -> dict[str, Any]:
    items = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"net-{run}-{i:05d}",
                "namespace": namespace,
                "labels": {"run": str(run)},
                "annotations": {"kubernetes.io/ingress-bandwidth": "100M", "kubernetes.io/egress-bandwidth": "100M"},
            },
            "spec": {"schedulerName": scheduler, "containers": [{"name": "app", "image": "registry.example/app:1"}]},
        }
        for i in range(count)
    ]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def measure(
    plane: ControlPlane, count: int, scheduler: str, run: int, settle: float, namespace: str = "bench"
) -> dict[str, Any]:
    """Create the pods at once; poll the bindings until nothing changes for ``settle`` seconds."""
    started = time.monotonic()
    plane.kubectl("create", "-f", "-", stdin=json.dumps(pods(count, scheduler, run, namespace)))
    last_change, bound = time.monotonic(), 0
    placed: list[dict[str, Any]] = []
    while time.monotonic() - last_change < settle:
        listing = json.loads(plane.kubectl("get", "pods", "-n", namespace, "-l", f"run={run}", "-o", "json").stdout)
        placed = [pod for pod in listing["items"] if pod["spec"].get("nodeName")]
        if len(placed) != bound:
            bound, last_change = len(placed), time.monotonic()
        if bound == count:
            break
        time.sleep(0.2)
    seconds = last_change - started
    per_node: dict[str, int] = {}
    for pod in placed:
        per_node[pod["spec"]["nodeName"]] = per_node.get(pod["spec"]["nodeName"], 0) + 2 * BANDWIDTH
    over = [used - GI for used in per_node.values() if used > GI]
    plane.kubectl("delete", "pods", "-n", namespace, "-l", f"run={run}", "--wait=false", "--grace-period=0", "--force")
    return {
        "scheduled": bound,
        "pending": count - bound,
        "overcommittedNodes": len(over),
        "maxOvercommitBitsPerSecond": max(over, default=0),
        "seconds": round(seconds, 2),
        "podsPerSecond": round(bound / seconds, 1) if seconds > 0 else 0.0,
    }


def wait_empty(plane: ControlPlane) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        listed = [
            json.loads(plane.kubectl("get", "pods", "-n", ns, "-o", "json").stdout) for ns in ("bench", GUARANTEED)
        ]
        if not any(listing["items"] for listing in listed):
            return
        time.sleep(0.5)


def start_webhook(
    plane: ControlPlane,
    folder: pathlib.Path,
    ca_bundle: str,
    namespace: str,
    *more: str,
    server: Sequence[str] = (),
    name: str = "bench",
    flags: Sequence[str] = (),
    timeout_seconds: int = 2,
) -> subprocess.Popen[bytes]:
    """`netaware webhook --bandwidth-resources combined` (TLS from ``folder``, and ``flags``) admitting ``namespace``
    (and ``more``) only, as the chart deploys it for ``bandwidth.guarantee: resources``; its configuration
    (``name``, each call given ``timeout_seconds``) is applied once it listens. ``server``: another webhook's
    command instead, given the port as its last argument."""
    from webhooks.configuration import mutating_webhook_configuration

    port = free_port()
    if server:
        command = [*server, str(port)]
    else:
        command = [sys.executable, "-m", "operators.cli", "webhook", "--listen-address", "127.0.0.1", "--port",
                   str(port), "--kubeconfig", str(plane.kubeconfig), "--bandwidth-resources", "combined",
                   *tls_flags(folder), *flags]  # fmt: skip
    log = folder / f"{name}-webhook.log"
    process = subprocess.Popen(command, cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT)
    configuration = mutating_webhook_configuration(
        name, "unused", "netaware-system", ca_bundle, bandwidth_failure_policy="Fail", timeout_seconds=timeout_seconds
    )
    for entry in configuration["webhooks"]:
        entry["clientConfig"] = {"url": f"https://127.0.0.1:{port}/mutate-pods", "caBundle": ca_bundle}
        entry["namespaceSelector"] = {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace, *more]}]}  # fmt: skip
    wait_listening(port, "webhook", log, process)
    plane.kubectl("apply", "-f", "-", stdin=json.dumps(configuration))
    return process


def wait_advertised(plane: ControlPlane, nodes: int, within: float = 120.0, every: float = 1.0) -> None:
    """Until the nodebandwidth controller has advertised ``netaware.io/bandwidth`` on ``nodes`` nodes (listed
    ``every`` seconds: a listing of thousands of nodes costs kubectl a second)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        listing = json.loads(plane.kubectl("get", "nodes", "-o", "json").stdout)["items"]
        if sum(1 for n in listing if "netaware.io/bandwidth" in (n["status"].get("allocatable") or {})) >= nodes:
            return
        time.sleep(every)
    raise SystemExit(f"the nodes were not advertised within {within:g} s (see the operator's log)")


def start_guarantee(
    plane: ControlPlane, folder: pathlib.Path, ca_bundle: str, nodes: int
) -> list[subprocess.Popen[bytes]]:
    """The webhook (admitting the GUARANTEED namespace) and the nodebandwidth controller (combined), until every
    node advertises netaware.io/bandwidth."""
    operator = ["run", "--components", "nodebandwidth", "--accounting-mode", "combined", "--no-leader-elect"]
    operator += ["--health-port", "0", "--kubeconfig", str(plane.kubeconfig)]
    processes = [
        subprocess.Popen([sys.executable, "-m", "operators.cli", *operator], cwd=ROOT,
                         stdout=(folder / "run.log").open("w"), stderr=subprocess.STDOUT),
    ]  # fmt: skip
    processes.append(start_webhook(plane, folder, ca_bundle, GUARANTEED))
    wait_advertised(plane, nodes)
    return processes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--pods", type=int, default=1500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--settle", type=float, default=15.0, help="seconds without a new binding that end a run")
    parser.add_argument("--record", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args()
    subprocess.run(["bash", str(ROOT / "hack" / "control-plane" / "build.sh")], check=True, stdout=subprocess.DEVNULL)
    folder = pathlib.Path(tempfile.mkdtemp(prefix="netaware-bench-"))
    plane = control_plane.ControlPlane(folder / "plane")
    (folder / "nodes.yaml").write_text(nodes_yaml(args.nodes))
    plane.start([folder / "nodes.yaml"])
    extender = None
    guarantee: list[subprocess.Popen[bytes]] = []
    try:
        plane.kubectl("create", "namespace", "bench")
        plane.kubectl("apply", "-f", str(ROOT / "crds"))  # the extender follows netaware's kinds, as in a cluster
        ca_bundle = loopback_tls(folder)
        config = folder / "extender-config.yaml"
        config.write_text(
            json.dumps(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "profiles": [
                        {
                            "plugins": {"multiPoint": {"enabled": [{"name": "NetworkBandwidth"}]}},
                            "pluginConfig": [{"name": "NetworkBandwidth", "args": {"accountingMode": "combined"}}],
                        }
                    ],
                }
            )
        )
        port = free_port()
        command = ["extender", "--listen-address", "127.0.0.1", "--port", str(port), "--config", str(config)]
        command += ["--kubeconfig", str(plane.kubeconfig)]
        command += tls_flags(folder)
        extender = subprocess.Popen(
            [sys.executable, "-m", "operators.cli", *command],
            cwd=ROOT,
            stdout=(folder / "extender.log").open("w"),
            stderr=subprocess.STDOUT,
        )

        scheduler = plane.scheduler_config(
            [{"schedulerName": "network-aware-scheduler"}],
            [extender_entry(port, ca_bundle, weight=5, ignorable=False, timeout="10s")],
        )
        (folder / "scheduler.yaml").write_text(json.dumps(scheduler))
        plane.start_scheduler("network-aware-scheduler", folder / "scheduler.yaml")
        time.sleep(5)  # the extender lists the cluster, the scheduler syncs its informers
        plane.kubectl("create", "namespace", GUARANTEED)
        guarantee = start_guarantee(plane, folder, ca_bundle, args.nodes)
        time.sleep(5)  # the extender lists the cluster, the scheduler syncs its informers
        modes = (
            ("default", "default-scheduler", "bench"),
            ("extender", "network-aware-scheduler", "bench"),
            ("guaranteed", "network-aware-scheduler", GUARANTEED),
        )
        results: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in modes}
        for run in range(args.runs):
            for index, (name, scheduler_name, namespace) in enumerate(modes):
                results[name].append(
                    measure(plane, args.pods, scheduler_name, run * len(modes) + index, args.settle, namespace)
                )
                wait_empty(plane)
                time.sleep(2)
        chosen = scenario("thesis-1", args.nodes, args.pods)
        shapes = expand(chosen.pods)
        predicted = {}
        for name, aware in (("default", False), ("extender", True), ("guaranteed", True)):
            cluster = Cluster.generated(chosen.nodes, chosen.node)
            predicted[name] = report(run_scheduler(cluster, shapes, aware, Options("combined"), seed=1), "combined")
        print(f"thesis-1, real kube-scheduler v1.37.2 + KWOK: {args.nodes} nodes, {args.pods} pods, {args.runs} runs")
        print("min / median / max         scheduled         pending           overcommitted nodes   pods/s")
        for name, _, _ in modes:
            rows = results[name]
            columns = [spread([r[key] for r in rows]) for key in ("scheduled", "pending", "overcommittedNodes")]
            rate = spread([r["podsPerSecond"] for r in rows])
            print(f"  {name:13s} (real)     {columns[0]:17s} {columns[1]:17s} {columns[2]:21s} {rate}")
            p = predicted[name]
            print(
                f"  {name:13s} (simulate) {p['scheduled']:<17} {p['pending']:<17} {p['overcommittedNodes']:<21} "
                f"{p['podsPerSecond']}"
            )
        floor = max(statistics.median(r["podsPerSecond"] for r in results["default"]), 1e-9)
        for name in ("extender", "guaranteed"):
            ratio = statistics.median(r["podsPerSecond"] for r in results[name]) / floor
            over = [r["overcommittedNodes"] for r in results[name]]
            print(
                f"  {name}: pods/s / kube-scheduler alone {ratio:.2f} (budget >= 0.5); "
                f"overcommitted nodes per run {over}"
            )
        print(json.dumps({"real": results, "simulate": predicted}, default=str))
        if args.record:
            keys = ("scheduled", "pending", "overcommittedNodes", "podsPerSecond")
            figures = records.measured_and_simulated(results, predicted, keys)
            records.write(args.record, "bench_real_scheduler", vars(args), figures)
    finally:
        for process in guarantee:
            process.terminate()
            process.wait(timeout=30)
        if extender is not None:
            extender.terminate()
            extender.wait(timeout=30)
        plane.stop()
        shutil.rmtree(folder / "plane" / "etcd", ignore_errors=True)  # hundreds of MB; the logs stay
        print(f"logs in {folder}", file=sys.stderr)


if __name__ == "__main__":
    main()
