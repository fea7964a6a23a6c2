#!/usr/bin/env python3
"""Extender latency: filter + prioritize per pod on a large cluster, in-process and over HTTP.

    python -m benchmarks.bench_extender [--nodes 5000 --zones 50 --pods 10000 --groups 500 --samples 200]

Builds the cluster once, then for --samples pending AppGroup pods measures filter+prioritize
(two `schedule` passes, as the two HTTP verbs do) in-process and through the aiohttp server on
loopback (NodeNames form), and prints p50/p99/max against the 20 ms p99 budget.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson
from aiohttp.test_utils import TestClient, TestServer

from benchmarks import records
from benchmarks.figures import percentile
from benchmarks.live_cluster import network_topology
from operators.api.config.scheduler import NetworkOverheadArgs, SchedulerConfig
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.scheduling.framework import PodInputs
from operators.engine.scheduling.schedule import schedule
from operators.extender.answers import ExtenderState
from operators.extender.server import build_app

BUDGET_MS = 20.0
ROOT = Path(__file__).resolve().parent.parent


def cluster(
    nodes: int, zones: int, pods: int, groups: int, rng: random.Random, max_cost: int = 10
) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    regions = max(1, zones // 10)
    for index in range(nodes):
        zone = index % zones
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": f"node-{index:05d}",
                    "labels": {
                        "topology.kubernetes.io/region": f"r{zone % regions}",
                        "topology.kubernetes.io/zone": f"z{zone}",
                    },
                    "annotations": {"node.koordinator.sh/network-bandwidth": "10G"},
                },
                "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
            }
        )
    objects.append(network_topology(zones, regions, name="nt", configmap="x"))
    for group in range(groups):
        workloads = [
            {
                "workload": {"kind": "Deployment", "name": f"w{w}", "selector": f"w{w}"},
                "dependencies": [
                    {
                        "workload": {"kind": "Deployment", "name": f"w{d}", "selector": f"w{d}"},
                        "minBandwidth": "10M",
                        "maxNetworkCost": 10,
                    }
                    for d in range(w + 1, 4)
                ],
            }
            for w in range(4)
        ]
        objects.append(
            {
                "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
                "kind": "AppGroup",
                "metadata": {"name": f"g{group}", "namespace": "default"},
                "spec": {"numMembers": 4, "topologySortingAlgorithm": "KahnSort", "workloads": workloads},
            }
        )
    for index in range(pods):
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"p{index}",
                    "namespace": "default",
                    "labels": {
                        "appgroup.diktyo.x-k8s.io": f"g{index % groups}",
                        "appgroup.diktyo.x-k8s.io.workload": f"w{1 + index % 3}",
                    },
                    "annotations": {"kubernetes.io/ingress-bandwidth": "50M", "kubernetes.io/egress-bandwidth": "50M"},
                },
                "spec": {"nodeName": f"node-{rng.randrange(nodes):05d}"},
                "status": {"phase": "Running"},
            }
        )
    return objects


def percentiles(samples: list[float]) -> str:
    p99 = percentile(samples, 0.99)
    return (
        f"p50 {statistics.median(samples):6.1f} ms  p99 {p99:6.1f} ms  max {max(samples):6.1f} ms  "
        f"(budget p99 {BUDGET_MS:.0f} ms, ratio {p99 / BUDGET_MS:.2f})"
    )


async def over_http(state: ExtenderState, pods: list[dict[str, Any]], names: list[str]) -> list[float]:
    """Round trips through the real aiohttp app on loopback (client in the same loop, orjson like Go's
    encoding/json is not the bottleneck kube-scheduler would add)."""
    timings = []
    headers = {"Content-Type": "application/json"}
    async with TestClient(TestServer(build_app(state))) as client:
        for pod in pods:
            started = time.perf_counter()
            response = await client.post(
                "/filter", data=orjson.dumps({"Pod": pod, "NodeNames": names}), headers=headers
            )
            passing = orjson.loads(await response.read())["NodeNames"]
            response = await client.post(
                "/prioritize", data=orjson.dumps({"Pod": pod, "NodeNames": passing}), headers=headers
            )
            orjson.loads(await response.read())
            timings.append((time.perf_counter() - started) * 1000)
    return timings


async def over_http_process(objects: list[dict[str, Any]], pods: list[dict[str, Any]], names: list[str]) -> list[float]:
    """The same round trips against `netaware extender` running in its own process (as in a cluster)."""
    import json as stdlib_json
    import socket
    import subprocess
    import tempfile

    import aiohttp

    with tempfile.TemporaryDirectory() as folder:
        snapshot_file = Path(folder) / "cluster.json"
        snapshot_file.write_text(stdlib_json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
        config_file = Path(folder) / "config.yaml"
        config_file.write_text(
            stdlib_json.dumps(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "profiles": [
                        {"pluginConfig": [{"name": "NetworkOverhead", "args": {"networkTopologyName": "nt"}}]}
                    ],
                }
            )
        )
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        server = subprocess.Popen(  # noqa: ASYNC220 - started once, before any request is timed
            [
                sys.executable,
                "-m",
                "operators.cli",
                "extender",
                "--insecure",
                "--listen-address",
                "127.0.0.1",
                "--port",
                str(port),
                "-f",
                str(snapshot_file),
                "--config",
                str(config_file),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            timings = []
            headers = {"Content-Type": "application/json"}
            async with aiohttp.ClientSession() as session:
                for _ in range(300):
                    try:
                        async with session.get(url + "/readyz") as response:
                            if response.status == 200:
                                break
                    except aiohttp.ClientError:
                        await asyncio.sleep(0.2)
                for pod in [pods[0], *pods]:  # the first warms the index up
                    started = time.perf_counter()
                    async with session.post(
                        url + "/filter", data=orjson.dumps({"Pod": pod, "NodeNames": names}), headers=headers
                    ) as response:
                        passing = orjson.loads(await response.read())["NodeNames"]
                    async with session.post(
                        url + "/prioritize", headers=headers, data=orjson.dumps({"Pod": pod, "NodeNames": passing})
                    ) as response:
                        orjson.loads(await response.read())
                    timings.append((time.perf_counter() - started) * 1000)
            return timings[1:]
        finally:
            server.terminate()
            server.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--zones", type=int, default=50)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--groups", type=int, default=500)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument(
        "--max-network-cost",
        type=int,
        default=10,
        help="maxNetworkCost of every dependency (10: most nodes rejected; 100: most accepted)",
    )
    parser.add_argument("--record", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args()
    rng = random.Random(7)
    objects = cluster(args.nodes, args.zones, args.pods, args.groups, rng, args.max_network_cost)
    snapshot = build_snapshot(objects)
    config = SchedulerConfig(overhead=NetworkOverheadArgs(network_topology_name="nt"))
    state = ExtenderState(lambda: snapshot, config)
    start = time.perf_counter()
    index = state.index()  # as the server builds it (and freezes it out of the garbage collector's way)
    build_ms = (time.perf_counter() - start) * 1000
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"new-{i}",
                "namespace": "default",
                "labels": {
                    "appgroup.diktyo.x-k8s.io": f"g{rng.randrange(args.groups)}",
                    "appgroup.diktyo.x-k8s.io.workload": "w0",
                },
                "annotations": {"kubernetes.io/ingress-bandwidth": "100M", "kubernetes.io/egress-bandwidth": "100M"},
            },
        }
        for i in range(args.samples)
    ]
    in_process = []
    for raw in pods:
        pod = Pod.parse(raw)
        started = time.perf_counter()
        cycle = state.cycle(PodInputs.of(pod), index)  # shared by the two verbs, as in the server
        first = schedule(pod, index, config, stages=("filter",), detail=False, state=cycle)
        passing = index.rows_of([name for name in index.position if name not in first.failed])
        table = index.table(config.bandwidth.default_node_bandwidth).rows(passing)
        schedule(pod, index, config, table, stages=("score",), detail=False, state=cycle)
        in_process.append((time.perf_counter() - started) * 1000)
    names = [node.name for node in snapshot.nodes]
    http = asyncio.run(over_http(state, pods, names))
    separate = asyncio.run(over_http_process(objects, pods, names))
    print(
        f"extender filter+prioritize: {args.nodes} nodes, {args.zones} zones, {args.pods} placed pods, "
        f"{args.groups} AppGroups, {args.samples} pods, maxNetworkCost {args.max_network_cost}"
    )
    print(f"  cluster index build: {build_ms:.0f} ms (once per snapshot change)")
    print(f"  in-process  {percentiles(in_process)}")
    print(f"  over HTTP   {percentiles(http)}  (client in the server's event loop)")
    print(f"  over HTTP   {percentiles(separate)}  (`netaware extender` in its own process)")
    if args.record:
        budget = f"< {BUDGET_MS:g} ms"
        figures = {"cluster index build": records.figure([build_ms], "ms")}
        for name, samples in (("in-process", in_process), ("over HTTP", http), ("over HTTP, own process", separate)):
            figures[f"{name}: p50"] = records.figure([statistics.median(samples)], "ms")
            figures[f"{name}: p99"] = records.figure([percentile(samples, 0.99)], "ms", budget=budget)
        records.write(args.record, "bench_extender", vars(args), figures)


if __name__ == "__main__":
    main()
