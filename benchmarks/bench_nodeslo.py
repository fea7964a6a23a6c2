#!/usr/bin/env python3
"""NodeSLO rendering at scale: parse and validate the config, then render every node.

    python -m benchmarks.bench_nodeslo [--nodes 5000 --strategies 50]

Each node strategy selects one "pool" label value; nodes are spread over the pools and carry a
bandwidth annotation. Prints the best of --repeat runs for config update and for rendering.
"""

from __future__ import annotations

import argparse
import datetime
import json
import time

from benchmarks import records
from operators.api.config.controllers import NodeSLOOptions
from operators.engine.cluster.objects import Node
from operators.engine.status.nodeslo import render_all
from operators.engine.status.sloconfig import ConfigState, update_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--strategies", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--record", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args()
    nodes = [
        Node.parse(
            {
                "metadata": {
                    "name": f"node-{i}",
                    "labels": {"pool": f"pool-{i % (args.strategies + 10)}"},
                    "annotations": {"node.koordinator.sh/network-bandwidth": "10G"},
                }
            }
        )
        for i in range(args.nodes)
    ]
    qos = {
        "clusterStrategy": {
            "lsClass": {"networkQOS": {"enable": True, "ingressRequest": 30, "egressRequest": 30}},
            "beClass": {"networkQOS": {"enable": True, "ingressRequest": 10, "ingressLimit": 50}},
        },
        "nodeStrategies": [
            {
                "name": f"s{i}",
                "nodeSelector": {"matchLabels": {"pool": f"pool-{i}"}},
                "beClass": {"networkQOS": {"ingressRequest": i % 20}},
            }
            for i in range(args.strategies)
        ],
    }
    data = {
        "resource-qos-config": json.dumps(qos),
        "system-config": json.dumps({"clusterStrategy": {"totalNetworkBandwidth": "1G"}}),
    }
    now = datetime.datetime(2026, 11, 22, tzinfo=datetime.UTC)
    configs, renders = [], []
    for _ in range(args.repeat):
        start = time.perf_counter()
        state = update_config(ConfigState(), data, nodes)
        middle = time.perf_counter()
        rendered = render_all(nodes, state, {}, NodeSLOOptions(), now)
        end = time.perf_counter()
        configs.append(middle - start)
        renders.append(end - middle)
    best_config, best_render = min(configs), min(renders)
    assert len(rendered) == args.nodes and not state.problems
    print(f"NodeSLO rendering: {args.nodes} nodes, {args.strategies} node strategies (best of {args.repeat})")
    print(f"  parse + validate config  {best_config * 1000:8.1f} ms")
    print(
        f"  render all NodeSLOs      {best_render * 1000:8.1f} ms  ({best_render / args.nodes * 1e6:.0f} us per node)"
    )
    if args.record:
        records.write(args.record, "bench_nodeslo", vars(args), {
            "parse + validate config": records.figure((t * 1000 for t in configs), "ms"),
            "render all NodeSLOs": records.figure((t * 1000 for t in renders), "ms"),
            "render, per node": records.figure((t / args.nodes * 1e6 for t in renders), "µs"),
        })  # fmt: skip


if __name__ == "__main__":
    main()
