#!/usr/bin/env python3
"""AppGroup benchmarks: topology order of a large graph, and `reconcile` of many AppGroups.

    python -m benchmarks.bench_appgroup [--workloads 10000 --edges 50000 --groups 1000 --pods 20000]

Prints wall times (best of --repeat runs) for each algorithm and for the whole reconcile.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import random
import time
from collections.abc import Callable
from typing import Any

from benchmarks import records
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.status.reconcile import reconcile
from operators.engine.status.toposort import ALGORITHMS

NOW = datetime.datetime(2026, 11, 22, tzinfo=datetime.UTC)


def random_dag(workloads: int, edges: int, rng: random.Random) -> dict[str, list[str]]:
    names = [f"w{index}" for index in range(workloads)]
    rank = list(range(workloads))
    rng.shuffle(rank)
    graph: dict[str, set[str]] = {name: set() for name in names}
    made = 0
    while made < edges:
        a, b = rng.sample(range(workloads), 2)
        if rank[a] > rank[b]:
            a, b = b, a
        if names[b] not in graph[names[a]]:
            graph[names[a]].add(names[b])
            made += 1
    return {name: sorted(children) for name, children in graph.items()}


def timed(fn: Callable[[], Any], repeat: int) -> list[float]:
    """Seconds of each of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def cluster(groups: int, pods: int, rng: random.Random) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for index in range(100):
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": f"n{index}",
                    "labels": {
                        "topology.kubernetes.io/region": f"r{index % 2}",
                        "topology.kubernetes.io/zone": f"z{index % 8}",
                    },
                },
            }
        )
    for group in range(groups):
        workloads = [
            {
                "workload": {"kind": "Deployment", "name": f"w{w}", "selector": f"w{w}"},
                "dependencies": [
                    {
                        "workload": {"kind": "Deployment", "name": f"w{w + 1}", "selector": f"w{w + 1}"},
                        "minBandwidth": "10M",
                        "maxNetworkCost": 10,
                    }
                ]
                if w < 4
                else [],
            }
            for w in range(5)
        ]
        objects.append(
            {
                "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
                "kind": "AppGroup",
                "metadata": {"name": f"g{group}", "namespace": f"ns{group % 20}", "generation": 1},
                "spec": {"numMembers": 5, "topologySortingAlgorithm": "KahnSort", "workloads": workloads},
            }
        )
    for index in range(pods):
        group = index % groups
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"p{index}",
                    "namespace": f"ns{group % 20}",
                    "labels": {
                        "appgroup.diktyo.x-k8s.io": f"g{group}",
                        "appgroup.diktyo.x-k8s.io.workload": f"w{index % 5}",
                    },
                },
                "spec": {"nodeName": f"n{rng.randrange(100)}"},
                "status": {"phase": rng.choice(["Running", "Pending"])},
            }
        )
    return objects


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--edges", type=int, default=50_000)
    parser.add_argument("--groups", type=int, default=1_000)
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--record", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args()
    figures = {}
    rng = random.Random(args.seed)

    graph = random_dag(args.workloads, args.edges, rng)
    print(f"topology order, {args.workloads} workloads, {args.edges} edges (best of {args.repeat}):")
    for name, algorithm in ALGORITHMS.items():
        times = timed(functools.partial(algorithm, graph), args.repeat)
        figures[f"topology order, {name}"] = records.figure((t * 1000 for t in times), "ms")
        print(f"  {name:16s} {min(times) * 1000:8.1f} ms")

    objects = cluster(args.groups, args.pods, rng)
    start = time.perf_counter()
    snapshot = build_snapshot(objects)
    load = time.perf_counter() - start
    times = timed(lambda: reconcile(snapshot, NOW), args.repeat)
    seconds = min(times)
    figures["snapshot build"] = records.figure([load * 1000], "ms")
    figures["reconcile, all AppGroups"] = records.figure((t * 1000 for t in times), "ms")
    figures["reconcile, per AppGroup"] = records.figure((t / args.groups * 1e6 for t in times), "µs")
    print(f"reconcile, {args.groups} AppGroups, {args.pods} pods (best of {args.repeat}):")
    print(f"  snapshot build   {load * 1000:8.1f} ms")
    print(f"  reconcile        {seconds * 1000:8.1f} ms  ({seconds / args.groups * 1e6:.0f} us per AppGroup)")
    if args.record:
        records.write(args.record, "bench_appgroup", vars(args), figures)


if __name__ == "__main__":
    main()
