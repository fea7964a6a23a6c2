#!/usr/bin/env python3
"""The node agent's cost on a real kernel (root; a network namespace it makes and removes itself):

    python -m benchmarks.bench_agent [--pods 110 --changes 200 --runs 3]

A node namespace with a veth uplink; ``--pods`` pods (kubelet's default maximum is 110) with addresses, LS and
BE alternating. Measured, min/median/max over ``--runs``:

* **from nothing**: one pass that builds both trees, the nftables map and the ingress filters — seconds and
  kernel operations (netlink requests + nftables elements);
* **one pod added / removed**: operations (must not grow with the node's pods) and seconds;
* **idle pass**: a pass with nothing to change (reads both directions back) — seconds, operations (0);
* **churn**: ``--changes`` pod additions/removals applied one pass each, back to back: changes/s the agent can
  follow, its CPU seconds per change and its RSS;
* **floor**: ``tc -s class show`` of the same tree as a subprocess — what reading the tree costs the tool an
  operator would use, in the same run.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import time

from benchmarks import records
from benchmarks.figures import spread
from benchmarks.support import sh
from operators.agent.enforce import enforce
from operators.agent.kernel import Kernel
from operators.engine.cluster.objects import Node, Pod
from operators.engine.enforcement.plan import node_plan

NETNS = "naw-bench"
NODE = Node.parse({"metadata": {"name": "n1", "annotations": {"node.koordinator.sh/network-bandwidth": "10G"}}})


def pod(index: int) -> Pod:
    return Pod.parse(
        {
            "metadata": {
                "name": f"p{index}",
                "namespace": "bench",
                "labels": {"koordinator.sh/qosClass": "LS" if index % 2 else "BE"},
            },
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running", "podIP": f"10.{100 + index // 250}.{index % 250}.2"},
        }
    )


def timed_pass(kernel: Kernel, pods: list[Pod]) -> tuple[float, int]:
    started = time.perf_counter()
    result = enforce(kernel, lambda previous: node_plan(NODE, None, pods, None, previous))
    assert result.applied, result.problems
    return time.perf_counter() - started, result.operations


def one_run(pods_count: int, changes: int) -> dict[str, float]:
    subprocess.run(["ip", "netns", "del", NETNS], capture_output=True, check=False)
    sh("ip", "netns", "add", NETNS)
    try:
        sh("ip", "-n", NETNS, "link", "add", "up0", "type", "veth", "peer", "name", "up0p")  # no dummy module here
        sh("ip", "-n", NETNS, "link", "set", "up0", "up")
        kernel = Kernel("up0", "netaware-ifb", NETNS)
        pods = [pod(i) for i in range(pods_count)]
        built, built_ops = timed_pass(kernel, pods)
        idle, idle_ops = timed_pass(kernel, pods)
        added, added_ops = timed_pass(kernel, [*pods, pod(pods_count)])
        removed, removed_ops = timed_pass(kernel, pods)
        started = time.perf_counter()
        sh("ip", "netns", "exec", NETNS, "tc", "-s", "class", "show", "dev", "up0")
        floor = time.perf_counter() - started
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for step in range(changes):
            timed_pass(kernel, pods if step % 2 else [*pods, pod(pods_count)])
        churn_wall, churn_cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        kernel.close()
        return {
            "build seconds": built,
            "build operations": built_ops,
            "idle pass seconds": idle,
            "idle pass operations": idle_ops,
            "pod added operations": added_ops,
            "pod added seconds": added,
            "pod removed operations": removed_ops,
            "pod removed seconds": removed,
            "churn changes/s": changes / churn_wall,
            "churn cpu ms/change": 1000 * churn_cpu / changes,
            "floor tc -s class show seconds": floor,
            "idle pass / floor": idle / floor,
        }
    finally:
        subprocess.run(["ip", "netns", "del", NETNS], capture_output=True, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=110)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--record", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args()
    runs = [one_run(args.pods, args.changes) for _ in range(args.runs)]
    print(f"node agent, {args.pods} pods, {args.runs} runs (min / median / max)")
    for key in runs[0]:
        print(f"  {key:32} {spread((run[key] for run in runs), '.4g')}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  {'max RSS MiB (whole process)':32} {rss:.0f}")
    if args.record:
        figures = {key: records.figure(run[key] for run in runs) for key in runs[0]}
        figures["max RSS (whole process)"] = records.figure([rss], "MiB")
        records.write(args.record, "bench_agent", vars(args), figures)


if __name__ == "__main__":
    main()
