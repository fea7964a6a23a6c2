#!/usr/bin/env python3
"""A burst of plan-mode AppGroups on the API emulator: the operator's side alone (slow: not a test).

    python -m benchmarks.bench_burst [--nodes 50000 --pods 50000 --burst 1000 --within 60 --runs 1]
                                     [--record docs/figures/bench_burst_emulator.json]

The cluster (``benchmarks/live_cluster.py``: nodes in 5 regions x 50 zones, bound pods, its NetworkTopology) is
served by the emulator in a process of its own, fresh for every run. ``netaware run --components appgroup
--appgroup-plans`` follows it until its plans' index is built (``netaware_plan_index_builds`` 1). Then ``--burst``
AppGroups, each annotated ``netaware.io/ordered-scheduling: plan`` with a random dependency DAG of 2-5 workloads
and 4-12 pods, are created open loop over ``--within`` seconds, each followed at once by its pods, gated as the
webhook leaves them. A watch on those pods records when each is released, and binds each released pod to its
planned node ``--bind-after`` seconds later (1 s), as kube-scheduler would: the emulator schedules nothing.

Figures: per AppGroup, its last pod created -> the last of its releases answered by the API server (the operator's
log: the plan made and its releases written, an upper bound of last pod -> plan), p50 / p99 / max, and the same
until a watcher sees it (this process's watch); the AppGroups whose every pod was released; the pods released to
a planned node; the plans' index builds (1: the initial one only, every change after it a delta); the operator's
CPU seconds during the burst and its peak RSS; its own plan time (``netaware_plan_seconds``), mean; and, as the
harness's own pace, how long creating one AppGroup and its pods took (p99: the emulator shares the machine).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import random
import re
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from benchmarks import records
from benchmarks.bench_live import emulator, memory
from benchmarks.figures import named_spread, percentile
from benchmarks.support import free_port
from operators.api import keys

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
NAMESPACES = 20  # live_cluster's team-0 .. team-19
BURST_LABEL = "netaware.io/bench-burst"


def burst_group(index: int, rng: random.Random) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """AppGroup ``burst-INDEX`` (a random DAG: each workload after the first depends on one or two earlier ones)
    and its pods, gated."""
    namespace, name = f"team-{index % NAMESPACES}", f"burst-{index}"
    workloads = rng.randint(2, 5)
    parents = {w: sorted(rng.sample(range(w), min(w, rng.randint(1, 2)))) for w in range(1, workloads)}

    def ref(w: int) -> dict[str, str]:
        return {"kind": "Deployment", "name": f"{name}-w{w}", "selector": f"w{w}", "apiVersion": "apps/v1"}

    spec_workloads = [
        {"workload": ref(w), "dependencies": [{"workload": ref(child), "minBandwidth": "10M", "maxNetworkCost": 25}
                                              for child in range(workloads) if w in parents.get(child, ())]}
        for w in range(workloads)
    ]  # fmt: skip
    group = {
        "apiVersion": f"{keys.APPGROUP_GROUP}/{keys.V1ALPHA1}", "kind": "AppGroup",
        "metadata": {"name": name, "namespace": namespace, "annotations": {keys.ORDERED_SCHEDULING: "plan"}},
        "spec": {"numMembers": workloads, "topologySortingAlgorithm": "KahnSort", "workloads": spec_workloads},
    }  # fmt: skip
    count = rng.randint(max(4, workloads), 12)
    owners = list(range(workloads)) + [rng.randrange(workloads) for _ in range(count - workloads)]
    pods = []
    for number, w in enumerate(owners):
        cpu = rng.choice(("100m", "250m", "500m"))
        pods.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-{number}", "namespace": namespace,
                         "labels": {keys.APPGROUP_LABEL: name, keys.APPGROUP_WORKLOAD_LABEL: f"w{w}", BURST_LABEL: "1"},
                         "annotations": {keys.INGRESS_REQUEST: "10M", keys.EGRESS_REQUEST: "10M"}},
            "spec": {"schedulingGates": [{"name": keys.TOPOLOGY_ORDER_GATE}],
                     "containers": [{"name": "c", "image": "registry.example.com/app:1",
                                     "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]},
            "status": {"phase": "Pending"},
        })  # fmt: skip
    return group, pods


def metric(text: str, name: str) -> float:
    """The value of an unlabelled series ``name`` in a Prometheus exposition (nan when absent)."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return float("nan")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def bind(http: aiohttp.ClientSession, url: str, key: str, node: str, after: float) -> None:
    """Bind pod ``key`` to ``node`` ``after`` seconds from now, as kube-scheduler would bind a released pod."""
    await asyncio.sleep(after)
    namespace, name = key.split("/")
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"name": node}}
    async with http.post(f"{url}/api/v1/namespaces/{namespace}/pods/{name}/binding", json=body) as response:
        await response.read()


async def watch_releases(
    http: aiohttp.ClientSession, url: str, released: dict[str, tuple[float, str | None]], bind_after: float | None
) -> None:
    """Record, per burst pod, when it was first seen without the gate, and its planned node; with ``bind_after``,
    bind it there that much later (a released pod without a place stays pending)."""
    binding: set[asyncio.Task[None]] = set()
    params = {"watch": "true", "labelSelector": BURST_LABEL, "allowWatchBookmarks": "false"}
    try:
        async with http.get(f"{url}/api/v1/pods", params=params, timeout=aiohttp.ClientTimeout(total=None)) as response:
            async for line in response.content:
                event = orjson.loads(line)
                obj = event.get("object") or {}
                meta = obj.get("metadata") or {}
                gates = [g.get("name") for g in (obj.get("spec") or {}).get("schedulingGates") or ()]
                key = f"{meta.get('namespace')}/{meta.get('name')}"
                if event.get("type") == "MODIFIED" and keys.TOPOLOGY_ORDER_GATE not in gates and key not in released:
                    node = (meta.get("annotations") or {}).get(keys.PLANNED_NODE)
                    released[key] = (time.perf_counter(), node)
                    if bind_after is not None and node:
                        task = asyncio.create_task(bind(http, url, key, node, bind_after))
                        binding.add(task)
                        task.add_done_callback(binding.discard)
    finally:  # the bindings still waiting end with the watch, before the session closes under them
        for task in binding:
            task.cancel()


RELEASED = re.compile(r"^(\S+ \S+) INFO netaware\.gates: pod (\S+) released \((\w+)\)")


def released_in_log(path: Path) -> dict[str, float]:
    """Pod key -> when the operator's release of it was answered (its log line: wall clock, this machine's)."""
    found: dict[str, float] = {}
    for line in path.read_text(errors="replace").splitlines():
        if match := RELEASED.match(line):
            when = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f")
            found.setdefault(match.group(2), when.timestamp())
    return found


async def create(
    http: aiohttp.ClientSession, url: str, group: dict[str, Any], pods: list[dict[str, Any]]
) -> tuple[float, float]:
    """The AppGroup, then its pods one after another; when its last pod was created (wall clock), and how long the
    creations took (the emulator's pace: it shares the machine with the operator)."""
    began = time.perf_counter()
    namespace = group["metadata"]["namespace"]
    base = f"{url}/apis/{keys.APPGROUP_GROUP}/{keys.V1ALPHA1}/namespaces/{namespace}/appgroups"
    async with http.post(base, json=group) as response:
        assert response.status == 201, await response.text()
    for body in pods:
        async with http.post(f"{url}/api/v1/namespaces/{namespace}/pods", json=body) as response:
            assert response.status == 201, await response.text()
    return time.time(), time.perf_counter() - began


async def one_run(args: argparse.Namespace, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    bursts = [burst_group(index, rng) for index in range(args.burst)]
    port = free_port()
    config = ROOT / "hack" / "configs" / "scheduler-config.yaml"
    log_path = Path(tempfile.mkdtemp()) / "operator.log"
    log = log_path.open("wb")
    async with emulator(args.nodes, args.pods, args.groups) as url, aiohttp.ClientSession() as http:
        profile = ["-m", "cProfile", "-o", args.profile] if args.profile else []
        process = await asyncio.create_subprocess_exec(
            PYTHON, *profile, "-m", "operators.cli", "run", "--server", url, "--no-leader-elect",
            "--health-port", str(port), "--components", "appgroup", "--appgroup-plans", "--plan-config", str(config),
            stdout=asyncio.subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
        metrics_url = f"http://127.0.0.1:{port}/metrics"
        released: dict[str, tuple[float, str | None]] = {}
        watcher = asyncio.create_task(watch_releases(http, url, released, args.bind_after))
        try:
            started = time.perf_counter()
            while True:  # synced, and the plans' index built
                if process.returncode is not None:
                    raise RuntimeError("netaware run exited")
                with contextlib.suppress(aiohttp.ClientError):
                    async with http.get(metrics_url) as response:
                        if metric(await response.text(), "netaware_plan_index_builds") >= 1:
                            break
                if time.perf_counter() - started > 900:
                    raise RuntimeError("the operator did not sync within 900 s")
                await asyncio.sleep(0.5)
            synced = time.perf_counter() - started
            cpu_before = cpu_seconds(process.pid)
            wall_offset = time.perf_counter() - time.time()  # the watch's times are perf_counter's
            began = time.perf_counter()
            tasks = []
            for index, (group, pods) in enumerate(bursts):  # open loop: each at its time, whatever the others do
                await asyncio.sleep(max(0.0, began + index * args.within / args.burst - time.perf_counter()))
                tasks.append(asyncio.create_task(create(http, url, group, pods)))
            creations = await asyncio.gather(*tasks)
            last_pod = [when for when, _ in creations]
            every = {f"{g['metadata']['namespace']}/{p['metadata']['name']}" for g, pods in bursts for p in pods}
            deadline = time.perf_counter() + args.settle
            while len(released.keys() & every) < len(every) and time.perf_counter() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.2)
            cpu = cpu_seconds(process.pid) - cpu_before
            peak, _ = memory(process.pid)
            async with http.get(metrics_url) as response:
                text = await response.text()
        finally:
            watcher.cancel()
            process.send_signal(signal.SIGINT) if args.profile else process.terminate()  # cProfile writes on SIGINT
            stopping = time.perf_counter()
            try:
                await asyncio.wait_for(process.wait(), 60)
            except TimeoutError:
                process.kill()
                await process.wait()
            stopped = time.perf_counter() - stopping
    log.close()
    answered = released_in_log(log_path)
    waits, seen, complete = [], [], 0
    for (group, pods), created in zip(bursts, last_pod, strict=True):
        keys_ = [f"{group['metadata']['namespace']}/{p['metadata']['name']}" for p in pods]
        if all(key in answered for key in keys_):
            complete += 1
            waits.append(max(answered[key] for key in keys_) - created)
        if all(key in released for key in keys_):
            seen.append(max(released[key][0] for key in keys_) - wall_offset - created)
    placed = sum(1 for key in every if key in released and released[key][1])
    return {
        "synced_s": synced,
        "appgroups_planned": complete,
        "appgroups": len(bursts),
        "pods": len(every),
        "pods_placed": placed,
        "last_pod_to_released_p50_s": statistics.median(waits) if waits else float("nan"),
        "last_pod_to_released_p99_s": percentile(waits, 0.99),
        "last_pod_to_released_max_s": max(waits, default=float("nan")),
        "last_pod_to_seen_by_a_watch_p99_s": percentile(seen, 0.99),
        "creating_an_appgroup_and_its_pods_p99_s": percentile([took for _, took in creations], 0.99),
        "index_builds": metric(text, "netaware_plan_index_builds"),
        "plan_seconds_mean": metric(text, "netaware_plan_seconds_sum")
        / max(metric(text, "netaware_plan_seconds_count"), 1),
        "plans": metric(text, "netaware_plan_seconds_count"),
        "operator_cpu_s": cpu,
        "operator_peak_mib": peak,
        "operator_stop_s": stopped,  # SIGTERM to exit (60: it did not stop, and was killed)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=50_000)
    parser.add_argument("--pods", type=int, default=50_000, help="bound pods already there")
    parser.add_argument("--groups", type=int, default=100, help="AppGroups already there (live_cluster's)")
    parser.add_argument("--burst", type=int, default=1000, help="plan-mode AppGroups created in the burst")
    parser.add_argument("--within", type=float, default=60.0, help="seconds over which the burst arrives")
    parser.add_argument("--settle", type=float, default=120.0, help="seconds to wait for the last releases")
    parser.add_argument("--bind-after", type=float, default=1.0,
                        help="bind each released pod to its planned node this many seconds later, as kube-scheduler "
                        "would (negative: never)")  # fmt: skip
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--record", default=None, help="write the figures as JSON here")
    parser.add_argument("--profile", default=None, help="run the operator under cProfile, its stats written here")
    args = parser.parse_args()
    if args.bind_after < 0:
        args.bind_after = None
    runs = [asyncio.run(one_run(args, args.seed + run)) for run in range(args.runs)]
    for run in runs:
        print(" ".join(f"{key}={value:.4g}" for key, value in run.items()), flush=True)

    def column(key: str) -> list[float]:
        return [run[key] for run in runs]

    print(f"burst on the emulator: {args.burst} AppGroups within {args.within:g} s on {args.nodes} nodes, "
          f"{args.runs} run(s)")  # fmt: skip
    print(f"  last pod -> released, p99: {named_spread(column('last_pod_to_released_p99_s'), ' s')} (budget 2 s)")
    print(f"  AppGroups planned: {named_spread(column('appgroups_planned'), '', 0)} of {args.burst}")
    print(f"  index builds: {named_spread(column('index_builds'), '', 0)} (1: the initial one only)")
    if args.record:
        figures = {
            "burst: last pod -> released, p50": records.figure(column("last_pod_to_released_p50_s"), "s"),
            "burst: last pod -> released, p99": records.figure(column("last_pod_to_released_p99_s"), "s",
                                                               budget="<= 2 s"),
            "burst: last pod -> released, max": records.figure(column("last_pod_to_released_max_s"), "s"),
            "burst: AppGroups planned": records.figure(column("appgroups_planned"), f"of {args.burst}"),
            "burst: pods released to a planned node": records.figure(
                [run["pods_placed"] / run["pods"] for run in runs], "fraction"),
            "burst: plans' index builds": records.figure(column("index_builds"), "", budget="1 (the initial one)"),
            "burst: plan seconds, mean": records.figure(column("plan_seconds_mean"), "s"),
            "burst: operator CPU seconds": records.figure(column("operator_cpu_s"), "s"),
            "burst: operator peak RSS": records.figure(column("operator_peak_mib"), "MiB"),
            "burst: operator initial sync": records.figure(column("synced_s"), "s"),
            "burst: operator stop after SIGTERM": records.figure(column("operator_stop_s"), "s"),
            "burst: creating an AppGroup and its pods (the harness), p99": records.figure(
                column("creating_an_appgroup_and_its_pods_p99_s"), "s"),
        }  # fmt: skip
        records.write(args.record, "bench_burst", vars(args), figures)


if __name__ == "__main__":
    main()
