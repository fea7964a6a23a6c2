#!/usr/bin/env python3
"""Simulator throughput: the network-aware scheduler on 5,000 nodes and 10,000 pods.

    python -m benchmarks.bench_simulate [--nodes 5000 --pods 10000 --accounting duplex]

Schedules thesis-1-shaped network pods pod by pod (adaptive percentageOfNodesToScore: 500 feasible
nodes per pod at this size) and prints pods/s against the 270 pods/s floor of scheduler_perf's
SchedulingBasic/5000Nodes_10000Pods (docs/design/contracts.md). Also runs the default model for comparison.
"""

from __future__ import annotations

import argparse

from benchmarks import records
from operators.engine.simulation.cluster import Cluster
from operators.engine.simulation.scenarios import scenario
from operators.engine.simulation.simulate import Options, expand, report, run_scheduler

FLOOR = 270.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--accounting", choices=("duplex", "combined"), default="duplex")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--record", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args()
    rates: dict[str, list[float]] = {"network-aware": [], "default": []}
    chosen = scenario("thesis-1", args.nodes, args.pods)
    shapes = expand(chosen.pods)
    print(f"simulate: {args.nodes} nodes, {args.pods} pods, {args.accounting} accounting")
    for name, network_aware in (("network-aware", True), ("default", False)) * args.runs:
        outcome = run_scheduler(
            Cluster.generated(chosen.nodes, chosen.node), shapes, network_aware, Options(args.accounting), seed=1
        )
        result = report(outcome, args.accounting)
        rate = result["podsPerSecond"]
        rates[name].append(rate)
        print(
            f"  {name:13s} scheduled {result['scheduled']}, pending {result['pending']}, {outcome.seconds:.1f} s: "
            f"{rate:.0f} pods/s (budget >= {FLOOR:.0f} pods/s, ratio {rate / FLOOR:.2f})"
        )
    if args.record:
        records.write(args.record, "bench_simulate", vars(args), {
            "network-aware": records.figure(rates["network-aware"], "pods/s", budget=f">= {FLOOR:g} pods/s"),
            "default (kube-scheduler's model)": records.figure(rates["default"], "pods/s"),
        })  # fmt: skip


if __name__ == "__main__":
    main()
