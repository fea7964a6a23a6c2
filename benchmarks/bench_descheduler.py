#!/usr/bin/env python3
"""Descheduler plan time: LowNodeLoad (netBandwidth and cpu) on a large cluster.

    python -m benchmarks.bench_descheduler [--nodes 5000 --pods 100000 --repeat 3]

Builds a cluster where a tenth of the nodes are hot, a third cold, then times `plan()` (usage,
classification, candidate sorting, fit and reservation) against the 2 s budget in docs/design/contracts.md. The
snapshot build (YAML objects to the typed snapshot) is reported apart: the live descheduler gets it
from its informers.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import random
import time
from typing import Any

from benchmarks import records
from operators.api.config.descheduler import DEFAULT_POLICY, parse_policy
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.descheduling.lownodeload import plan

BUDGET_S = 2.0
NOW = datetime.datetime(2026, 11, 22, tzinfo=datetime.UTC)


def cluster(nodes: int, pods: int, rng: random.Random) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for index in range(nodes):
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": f"node-{index:05d}",
                    "labels": {"topology.kubernetes.io/zone": f"z{index % 50}"},
                    "annotations": {"node.koordinator.sh/network-bandwidth": "10G"},
                },
                "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}},
            }
        )
    # Hot nodes (every 10th) get 3x the pods of the others; cold ones (every 3rd, not hot) a few.
    weights = [30 if i % 10 == 0 else 1 if i % 3 == 0 else 10 for i in range(nodes)]
    placement = rng.choices(range(nodes), weights=weights, k=pods)
    sizes = ("50M", "100M", "200M", "400M")
    for index, host in enumerate(placement):
        size = rng.choice(sizes)
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"p{index}",
                    "namespace": f"ns{index % 100}",
                    "labels": {"app": f"a{index % 1000}"},
                    "annotations": {"kubernetes.io/ingress-bandwidth": size, "kubernetes.io/egress-bandwidth": size},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u"}],
                    "creationTimestamp": f"2026-11-{1 + index % 20:02d}T00:00:00Z",
                },
                "spec": {
                    "nodeName": f"node-{host:05d}",
                    "priority": rng.choice((0, 0, 100, 1000)),
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}],
                },
                "status": {"phase": "Running"},
            }
        )
    return objects


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--record", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args()
    objects = cluster(args.nodes, args.pods, random.Random(3))
    started = time.perf_counter()
    snapshot = build_snapshot(objects)
    build_s = time.perf_counter() - started
    document = copy.deepcopy(DEFAULT_POLICY)
    document["profiles"][0]["pluginConfig"][0]["args"] = {
        "lowThresholds": {"netBandwidth": 30, "cpu": 30},
        "highThresholds": {"netBandwidth": 70, "cpu": 80},
    }
    policy = parse_policy(document)
    timings = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        result = plan(snapshot, policy, NOW)
        timings.append(time.perf_counter() - started)
    classes = list(result.classes.values())
    best = min(timings)
    print(f"descheduler plan: {args.nodes} nodes, {args.pods} pods (netBandwidth 30/70, cpu 30/80)")
    print(f"  snapshot build: {build_s:.2f} s (apart: the live descheduler rebuilds it from its watch cache per cycle)")
    print(
        f"  classes: {classes.count('high')} high, {classes.count('low')} low, {classes.count('normal')} normal; "
        f"{len(result.evictions)} evictions planned"
    )
    print(
        f"  plan: best {best:.2f} s, worst {max(timings):.2f} s of {args.repeat} "
        f"(budget {BUDGET_S:.0f} s, ratio {best / BUDGET_S:.2f})"
    )
    if args.record:
        records.write(args.record, "bench_descheduler", vars(args), {
            "plan (one cycle, snapshot built)": records.figure(timings, "s", budget=f"<= {BUDGET_S:g} s"),
            "snapshot build": records.figure([build_s], "s"),
            "evictions planned": records.figure([len(result.evictions)]),
        })  # fmt: skip


if __name__ == "__main__":
    main()
