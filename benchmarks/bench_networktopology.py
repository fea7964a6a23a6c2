#!/usr/bin/env python3
"""NetworkTopology recompute at scale: a full node-pair netperf matrix across several ConfigMaps.

    python -m benchmarks.bench_networktopology [--nodes 1000 --zones 20 --regions 5 --per-configmap 100000]

Builds the snapshot once (as the controller's reads would), then times `networktopology_result`
(ingestion of every key, median aggregation, weights, status) over --repeat runs and prints the best
and the ratio to the 2 s budget in docs/design/contracts.md.
"""

from __future__ import annotations

import argparse
import datetime
import random
import time
from typing import Any

from benchmarks import records
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.status.networktopology import networktopology_result

BUDGET_SECONDS = 2.0
KEY = "netperf.p90.latency.milliseconds.origin.{}.destination.{}"


def objects(nodes: int, zones: int, regions: int, per_configmap: int, rng: random.Random) -> list[dict[str, Any]]:
    names = [f"node-{index:04d}" for index in range(nodes)]
    zone_of = {name: index % zones for index, name in enumerate(names)}
    result: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "topology.kubernetes.io/region": f"region-{zone_of[name] % regions}",
                    "topology.kubernetes.io/zone": f"zone-{zone_of[name]}",
                },
            },
        }
        for name in names
    ]
    data: dict[str, str] = {}
    chunks: list[dict[str, str]] = []
    for a in names:
        for b in names:
            if a != b:
                data[KEY.format(a, b)] = str(rng.randrange(1, 80))
                if len(data) == per_configmap:
                    chunks.append(data)
                    data = {}
    if data:
        chunks.append(data)
    for index, chunk in enumerate(chunks):
        meta: dict[str, Any] = {
            "name": "netperf-metrics" if index == 0 else f"netperf-metrics-{index}",
            "namespace": "default",
        }
        if index:
            meta["labels"] = {"networktopology.diktyo.x-k8s.io/netperf": "nt"}
        result.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": chunk})
    result.append(
        {
            "apiVersion": "networktopology.diktyo.x-k8s.io/v1alpha1",
            "kind": "NetworkTopology",
            "metadata": {"name": "nt", "namespace": "default"},
            "spec": {"configmapName": "netperf-metrics", "weights": []},
        }
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--zones", type=int, default=20)
    parser.add_argument("--regions", type=int, default=5)
    parser.add_argument("--per-configmap", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--record", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args()
    snapshot = build_snapshot(objects(args.nodes, args.zones, args.regions, args.per_configmap, random.Random(1)))
    keys = sum(len(cm.data) for cm in snapshot.config_maps)
    now = datetime.datetime(2026, 11, 22, tzinfo=datetime.UTC)
    timings = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        result = networktopology_result(snapshot.network_topologies[0], snapshot, now)
        timings.append(time.perf_counter() - start)
    best = min(timings)
    status = result.topology.status
    assert status is not None and status.netperf is not None
    print(
        f"NetworkTopology recompute: {args.nodes} nodes, {args.zones} zones, {args.regions} regions, "
        f"{keys} keys in {len(snapshot.config_maps)} ConfigMaps"
    )
    print(f"  measurements used {status.netperf.measurements}, skipped {status.netperf.skipped}")
    print(f"  best of {args.repeat}: {best:.3f} s  (budget {BUDGET_SECONDS:.1f} s, ratio {best / BUDGET_SECONDS:.2f})")
    if args.record:
        records.write(args.record, "bench_networktopology", vars(args), {
            f"recompute ({keys:,} keys)": records.figure(timings, "s", budget=f"<= {BUDGET_SECONDS:g} s"),
        })  # fmt: skip


if __name__ == "__main__":
    main()
