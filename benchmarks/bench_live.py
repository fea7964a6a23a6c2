#!/usr/bin/env python3
"""Live components at the budget table's size (docs/design/contracts.md), measured live: watches, initial sync,
memory, churn.

    python -m benchmarks.bench_live [--nodes 5000 --pods 100000 --groups 500 --repeat 3]
                                    [--only operator,extender,descheduler,static20k]

The cluster (``benchmarks/live_cluster.py``: realistic pods and nodes) is served by the API emulator in a
process of its own, fresh for every run. Per run:

* **operator**: ``netaware run`` (default components) from start until every AppGroup's status equals the one
  computed offline from the same objects (initial sync); its peak RSS (VmHWM) against the raw-dict floor
  (``benchmarks.raw_floor``: nodes and the pods it follows, listed and kept as dicts) measured on the same
  emulator; then AppGroups created one by one on the synced cluster: create -> status.
* **extender**: ``netaware extender`` until ready, its peak RSS against the floor (nodes and all pods), then
  ``/filter`` + ``/prioritize`` (all node names, replicas of a Deployment one after another, as
  kube-scheduler sends them) open loop at 10 pods/s while pods are created and deleted at 50/s; then the same
  load, churn included, on the protocol floor (``benchmarks/extender_floor.py``: parses the bodies and answers
  every node, deciding nothing) on the same cluster.
* **descheduler**: a full cycle (snapshot of the cache included, dry run) on a synced cache after a pod
  changed, so the pods' part of the snapshot is derived again.
* **static20k**: the extender on 20,000 nodes (and as many pods), no churn.

Figures are min / median / max over the runs, with the ratios and budgets in docs/design/contracts.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from benchmarks import live_cluster, records
from benchmarks.figures import named_spread as spread
from benchmarks.figures import percentile
from benchmarks.support import free_port
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.status.appgroup import appgroup_status

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
APPGROUPS = "/apis/appgroup.diktyo.x-k8s.io/v1alpha1/appgroups"
BUDGETS = {
    "sync_s": 60.0,
    "rss_mib": 400.0,
    "create_p99_s": 1.0,
    "extender_p99_ms": 20.0,
    "cycle_s": 2.0,
}


def memory(pid: int) -> tuple[float, float]:
    """(VmHWM, VmRSS) of a process, MiB."""
    found = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(("VmHWM:", "VmRSS:")):
                found[line.split(":")[0]] = int(line.split()[1]) / 1024
    return found.get("VmHWM", 0.0), found.get("VmRSS", 0.0)


@contextlib.asynccontextmanager
async def emulator(nodes: int, pods: int, groups: int) -> AsyncIterator[str]:
    process = await asyncio.create_subprocess_exec(
        PYTHON,
        "-m",
        "benchmarks.live_cluster",
        "--nodes",
        str(nodes),
        "--pods",
        str(pods),
        "--groups",
        str(groups),
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), timeout=600)).decode()
        if not line.startswith("READY "):
            raise RuntimeError(f"the emulator did not start: {line!r}")
        yield line.split()[1]
    finally:
        process.terminate()
        await process.wait()


async def floor(url: str, selector: str = "") -> float:
    """The raw-dict floor's peak RSS, MiB."""
    command = [PYTHON, "-m", "benchmarks.raw_floor", url] + (["--selector", selector] if selector else [])
    process = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE, cwd=ROOT)
    out, _ = await process.communicate()
    return float(out.decode().split()[2])


def expected_statuses(nodes: int, pods: int, groups: int) -> dict[str, dict[str, Any]]:
    """Per AppGroup, the status fields the operator must write (computed offline from the same objects)."""
    snapshot = build_snapshot(live_cluster.cluster(nodes, pods, groups))
    now = datetime.datetime.now(datetime.UTC)
    return {
        group.metadata.name: _comparable(appgroup_status(group, snapshot, now).to_wire())
        for group in snapshot.app_groups
    }


def _comparable(status: dict[str, Any]) -> dict[str, Any]:
    return {key: status.get(key) for key in ("runningWorkloads", "topologyOrder", "placements")}


async def get_json(http: aiohttp.ClientSession, url: str, **params: str) -> Any:
    async with http.get(url, params=params) as response:
        return orjson.loads(await response.read())


def new_appgroup(index: int) -> dict[str, Any]:
    group = live_cluster.appgroup(0)
    group["metadata"] = {"name": f"created-{index}", "namespace": "team-0"}
    return group


async def operator_run(args: argparse.Namespace, expected: dict[str, dict[str, Any]]) -> dict[str, float]:
    async with emulator(args.nodes, args.pods, args.groups) as url, aiohttp.ClientSession() as http:
        floor_mib = await floor(url, "appgroup.diktyo.x-k8s.io")
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(
            PYTHON, "-m", "operators.cli", "run", "--server", url, "--no-leader-elect", "--health-port", "0",
            "--components", args.components,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        try:
            # AppGroups created while the operator syncs: their status comes once the cache has synced
            during: dict[str, float] = {}
            await asyncio.sleep(2)
            for index in range(5):
                async with http.post(url + "/apis/appgroup.diktyo.x-k8s.io/v1alpha1/namespaces/team-0/appgroups",
                                     json=new_appgroup(1000 + index)) as response:  # fmt: skip
                    assert response.status == 201
                during[f"created-{1000 + index}"] = time.perf_counter()
            sync = None
            waited_during: list[float] = []
            while time.perf_counter() - started < 600:
                if process.returncode is not None:
                    raise RuntimeError("netaware run exited")
                listing = await get_json(http, url + APPGROUPS)
                for item in listing["items"]:
                    name = item["metadata"]["name"]
                    if name in during and (item.get("status") or {}).get("conditions"):
                        waited_during.append(time.perf_counter() - during.pop(name))
                good = sum(
                    1
                    for item in listing["items"]
                    if item["metadata"]["name"] in expected
                    and _comparable(item.get("status") or {}) == expected[item["metadata"]["name"]]
                )
                if good == len(expected):
                    sync = time.perf_counter() - started
                    break
                await asyncio.sleep(0.5)
            if sync is None:
                raise RuntimeError("the operator did not converge within 600 s")
            peak_at_sync, _ = memory(process.pid)
            latencies = []
            for index in range(args.creates):
                name = f"created-{index}"
                path = f"/apis/appgroup.diktyo.x-k8s.io/v1alpha1/namespaces/team-0/appgroups/{name}"
                sent = time.perf_counter()
                async with http.post(url + "/apis/appgroup.diktyo.x-k8s.io/v1alpha1/namespaces/team-0/appgroups",
                                     json=new_appgroup(index)) as response:  # fmt: skip
                    assert response.status == 201
                while not ((await get_json(http, url + path)).get("status") or {}).get("conditions"):  # noqa: ASYNC110
                    await asyncio.sleep(0.01)  # polling the API server, as a user's kubectl would
                latencies.append(time.perf_counter() - sent)
            await asyncio.sleep(3)
            peak, rss = memory(process.pid)
        finally:
            process.terminate()
            await process.wait()
    return {
        "sync_s": sync,
        "peak_at_sync_mib": peak_at_sync,
        "rss_mib": peak,
        "settled_mib": rss,
        "floor_mib": floor_mib,
        "create_p50_s": statistics.median(latencies),
        "create_p99_s": percentile(latencies, 0.99),
        "during_sync_max_s": max(waited_during) if waited_during else float("nan"),
    }


def pending(index: int, shape: int, groups: int) -> dict[str, Any]:
    group, workload = shape % groups, shape % 3
    bandwidth = ("50M", "100M", "200M")[shape % 3]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"pending-{index}",
            "namespace": f"team-{group % 20}",
            "uid": f"pending-{index}",
            "labels": {
                "appgroup.diktyo.x-k8s.io": f"g{group}",
                "appgroup.diktyo.x-k8s.io.workload": f"w{workload}",
                "pod-template-hash": f"h{shape}",
            },
            "annotations": {"kubernetes.io/ingress-request": bandwidth, "kubernetes.io/egress-request": bandwidth},
        },
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    }


async def churn(http: aiohttp.ClientSession, url: str, rate: float, nodes: int, stop: asyncio.Event) -> int:
    """Create a pod and delete the oldest churned one, ``rate`` changes per second."""
    made: list[tuple[str, str]] = []
    changes = 0
    loop = asyncio.get_running_loop()
    start = loop.time()
    rng = random.Random(7)
    while not stop.is_set():
        if made and len(made) > 20:
            namespace, name = made.pop(0)
            async with http.delete(f"{url}/api/v1/namespaces/{namespace}/pods/{name}") as response:
                await response.read()
        else:
            pod = live_cluster.pod(1_000_000 + changes, nodes, 500, rng)
            pod["metadata"]["name"] = f"churn-{changes}"
            async with http.post(f"{url}/api/v1/namespaces/{pod['metadata']['namespace']}/pods", json=pod) as response:
                await response.read()
            made.append((pod["metadata"]["namespace"], pod["metadata"]["name"]))
        changes += 1
        delay = start + changes / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
    return changes


async def scheduling_load(
    http: aiohttp.ClientSession, extender: str, names: list[str], groups: int, rate: float, seconds: float
) -> list[float]:
    """Open loop: a pod every 1/rate s (replicas of five per shape), /filter then /prioritize; latencies, s."""
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    tasks = []

    async def one(index: int) -> None:
        body = orjson.dumps({"Pod": pending(index, index // 5, groups), "NodeNames": names})
        sent = loop.time()
        for verb in ("filter", "prioritize"):
            async with http.post(f"{extender}/{verb}", data=body,
                                 headers={"Content-Type": "application/json"}) as response:  # fmt: skip
                assert response.status == 200, await response.text()
                await response.read()
        latencies.append(loop.time() - sent)

    start = loop.time()
    for index in range(int(rate * seconds)):
        delay = start + index / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(index)))
    await asyncio.gather(*tasks)
    return latencies


async def wait_ready(http: aiohttp.ClientSession, base: str, process: asyncio.subprocess.Process) -> None:
    while True:
        with contextlib.suppress(aiohttp.ClientError):
            async with http.get(f"{base}/readyz") as response:
                if response.status == 200:
                    return
        if process.returncode is not None:
            raise RuntimeError(f"the server on {base} exited")
        await asyncio.sleep(0.2)


async def loaded(
    args: argparse.Namespace, http: aiohttp.ClientSession, url: str, base: str, nodes: int, churn_rate: float
) -> tuple[list[float], int]:
    """Warm up, then the scheduling load on ``base`` (with ``churn_rate`` pod changes/s on the cluster meanwhile):
    the latencies and the number of changes."""
    names = [f"node-{index:05d}" for index in range(nodes)]
    await scheduling_load(http, base, names, args.groups, 10, 2)
    stop = asyncio.Event()
    churner = asyncio.create_task(churn(http, url, churn_rate, nodes, stop)) if churn_rate else None
    latencies = await scheduling_load(http, base, names, args.groups, 10, args.seconds)
    stop.set()
    return latencies, await churner if churner else 0


async def floor_latencies(
    args: argparse.Namespace, http: aiohttp.ClientSession, url: str, nodes: int, churn_rate: float
) -> list[float]:
    """The same load on the protocol floor (``benchmarks/extender_floor.py``) on the same cluster."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        PYTHON, "-m", "benchmarks.extender_floor", str(port), stdout=asyncio.subprocess.DEVNULL, cwd=ROOT
    )
    try:
        await wait_ready(http, f"http://127.0.0.1:{port}", process)
        return (await loaded(args, http, url, f"http://127.0.0.1:{port}", nodes, churn_rate))[0]
    finally:
        process.terminate()
        await process.wait()


def scheduler_config() -> Path:
    """The extender's configuration for the live cluster (NetworkOverhead reading the teams' AppGroups), as a file."""
    config = yaml.safe_load((ROOT / "hack" / "configs" / "scheduler-config.yaml").read_text())
    for plugin in config["profiles"][0]["pluginConfig"]:
        if plugin["name"] == "NetworkOverhead":  # the AppGroups live in the teams' namespaces
            plugin["args"]["namespaces"] = ["default", *(f"team-{i}" for i in range(20))]
    path = Path(tempfile.mkstemp(suffix=".yaml")[1])
    path.write_text(yaml.safe_dump(config))
    return path


async def extender_run(args: argparse.Namespace, nodes: int, pods: int, churn_rate: float) -> dict[str, float]:
    async with emulator(nodes, pods, args.groups) as url, aiohttp.ClientSession() as http:
        floor_mib = await floor(url)
        port = free_port()
        config_path = scheduler_config()
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(
            PYTHON, "-m", "operators.cli", "extender", "--server", url, "--insecure",
            "--listen-address", "127.0.0.1", "--port", str(port),
            "--config", str(config_path),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        try:
            await wait_ready(http, f"http://127.0.0.1:{port}", process)
            ready = time.perf_counter() - started
            peak_at_ready, _ = memory(process.pid)
            latencies, changes = await loaded(args, http, url, f"http://127.0.0.1:{port}", nodes, churn_rate)
            peak, rss = memory(process.pid)
        finally:
            process.terminate()
            await process.wait()
        floor_ms = percentile(await floor_latencies(args, http, url, nodes, churn_rate), 0.99) * 1000
    return {
        "ready_s": ready,
        "peak_at_ready_mib": peak_at_ready,
        "rss_mib": peak,
        "settled_mib": rss,
        "floor_mib": floor_mib,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "max_ms": max(latencies) * 1000,
        "floor_p99_ms": floor_ms,
        "changes_per_s": changes / args.seconds,
    }


async def descheduler_run(args: argparse.Namespace) -> list[float]:
    from operators.api.config.descheduler import parse_policy
    from operators.controllers.descheduler import Descheduler, followed_kinds
    from operators.kube import url_api_client
    from operators.sources.cache import ClusterCache

    document = yaml.safe_load((ROOT / "hack" / "configs" / "descheduler-policy.yaml").read_text())
    document["dryRun"] = True
    policy = parse_policy(document)
    async with emulator(args.nodes, args.pods, args.groups) as url, aiohttp.ClientSession() as http:
        cache = ClusterCache(followed_kinds(policy))
        api = await url_api_client(url)()
        stop = asyncio.Event()
        follower = asyncio.create_task(cache.follow(api, stop))
        await cache.wait_synced()
        descheduler = Descheduler(api, policy, cache.snapshot)
        cycles = []
        rng = random.Random(3)
        for index in range(args.repeat + 1):
            pod = live_cluster.pod(2_000_000 + index, args.nodes, args.groups, rng)
            async with http.post(f"{url}/api/v1/namespaces/{pod['metadata']['namespace']}/pods", json=pod) as response:
                await response.read()
            while len(cache.objects(followed_kinds(policy)[1])) < args.pods + index + 1:  # noqa: ASYNC110
                await asyncio.sleep(0.01)  # until the cache has the new pod
            started = time.perf_counter()
            await descheduler.cycle()
            cycles.append(time.perf_counter() - started)
        stop.set()
        await follower
        await api.close()
    return cycles[1:]  # the first cycle also builds the node part of the snapshot


def report_operator(runs: list[dict[str, float]], figures: dict[str, Any]) -> None:
    figures.update({
        "netaware run: initial sync": records.figure((r["sync_s"] for r in runs), "s",
                                                     budget=f"< {BUDGETS['sync_s']:g} s"),
        "netaware run: peak RSS": records.figure((r["rss_mib"] for r in runs), "MiB",
                                                 budget=f"< {BUDGETS['rss_mib']:g} MiB"),
        "netaware run: raw-dict floor": records.figure((r["floor_mib"] for r in runs), "MiB"),
        "netaware run: RSS / floor": records.figure((r["rss_mib"] / r["floor_mib"] for r in runs), "x",
                                                    budget="<= 1.0x"),
        "AppGroup create -> status, synced, p50": records.figure((r["create_p50_s"] for r in runs), "s"),
        "AppGroup create -> status, synced, p99": records.figure((r["create_p99_s"] for r in runs), "s",
                                                                 budget=f"< {BUDGETS['create_p99_s']:g} s"),
        "AppGroup created during sync -> status, max": records.figure((r["during_sync_max_s"] for r in runs), "s"),
    })  # fmt: skip
    print("\nnetaware run, 5k nodes + 100k pods, emulator:")
    print(f"  initial sync, every AppGroup's status correct: {spread([r['sync_s'] for r in runs], ' s', 1)}"
          f"   (budget < {BUDGETS['sync_s']:.0f} s)")  # fmt: skip
    print(f"  peak RSS (VmHWM):                  {spread([r['rss_mib'] for r in runs], ' MiB', 0)}"
          f"   (budget < {BUDGETS['rss_mib']:.0f} MiB)")  # fmt: skip
    print(f"  raw-dict floor (nodes + its pods):  {spread([r['floor_mib'] for r in runs], ' MiB', 0)}")
    print(f"  ratio to the floor:                {spread([r['rss_mib'] / r['floor_mib'] for r in runs], 'x')}"
          "   (budget <= 1.0x)")  # fmt: skip
    print(f"  AppGroup create -> status, synced, p50: {spread([r['create_p50_s'] for r in runs], ' s', 3)}")
    print(f"  AppGroup create -> status, synced, p99: {spread([r['create_p99_s'] for r in runs], ' s', 3)}"
          f"   (budget < {BUDGETS['create_p99_s']:.0f} s)")  # fmt: skip
    print(f"  AppGroup created during sync -> status (max): {spread([r['during_sync_max_s'] for r in runs], ' s', 1)}"
          "   (written once the cache has synced)")  # fmt: skip


def report_extender(title: str, runs: list[dict[str, float]], figures: dict[str, Any], label: str) -> None:
    figures.update({
        f"extender {label}: peak RSS": records.figure((r["rss_mib"] for r in runs), "MiB",
                                                      budget=f"< {BUDGETS['rss_mib']:g} MiB"),
        f"extender {label}: RSS / floor": records.figure((r["rss_mib"] / r["floor_mib"] for r in runs), "x"),
        f"extender {label}: p50": records.figure((r["p50_ms"] for r in runs), "ms"),
        f"extender {label}: p99": records.figure((r["p99_ms"] for r in runs), "ms",
                                                 budget=f"< {BUDGETS['extender_p99_ms']:g} ms"),
        f"extender {label}: protocol floor p99": records.figure((r["floor_p99_ms"] for r in runs), "ms"),
        f"extender {label}: p99 / floor": records.figure((r["p99_ms"] / r["floor_p99_ms"] for r in runs), "x"),
    })  # fmt: skip
    print(f"\n{title}")
    print(f"  ready (cache synced, tables built): {spread([r['ready_s'] for r in runs], ' s', 1)}")
    print(f"  peak RSS (VmHWM):                  {spread([r['rss_mib'] for r in runs], ' MiB', 0)}"
          f"   (budget < {BUDGETS['rss_mib']:.0f} MiB)")  # fmt: skip
    print(f"  raw-dict floor (nodes + all pods): {spread([r['floor_mib'] for r in runs], ' MiB', 0)}")
    print(f"  ratio to the floor:                {spread([r['rss_mib'] / r['floor_mib'] for r in runs], 'x')}"
          "   (budget <= 1.0x)")  # fmt: skip
    print(f"  /filter+/prioritize p50: {spread([r['p50_ms'] for r in runs], ' ms', 1)}")
    print(f"  /filter+/prioritize p99: {spread([r['p99_ms'] for r in runs], ' ms', 1)}"
          f"   (budget < {BUDGETS['extender_p99_ms']:.0f} ms)")  # fmt: skip
    floor_p99 = spread([r["floor_p99_ms"] for r in runs], " ms", 1)
    print(f"  protocol floor p99 (benchmarks/extender_floor.py, same load): {floor_p99}")
    print(f"  p99 ratio to the floor:  {spread([r['p99_ms'] / r['floor_p99_ms'] for r in runs], 'x')}")
    print(f"  /filter+/prioritize max: {spread([r['max_ms'] for r in runs], ' ms', 1)}")
    print(f"  pod changes applied per second: {spread([r['changes_per_s'] for r in runs], '', 0)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the extender's load")
    parser.add_argument("--creates", type=int, default=50, help="AppGroups created one by one on the synced cluster")
    parser.add_argument("--churn", type=float, default=50.0, help="pod changes per second during the extender load")
    parser.add_argument("--only", default="operator,extender,descheduler,static20k")
    parser.add_argument("--components", default="appgroup,networktopology,nodeslo", help="of netaware run")
    parser.add_argument("--record", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    chosen = set(args.only.split(","))
    print(f"cluster: {args.nodes} nodes, {args.pods} pods, {args.groups} AppGroups; {os.cpu_count()} CPUs")
    if "operator" in chosen:
        expected = expected_statuses(args.nodes, args.pods, args.groups)
        runs = [asyncio.run(operator_run(args, expected)) for _ in range(args.repeat)]
        report_operator(runs, figures)
    if "extender" in chosen:
        runs = [asyncio.run(extender_run(args, args.nodes, args.pods, args.churn)) for _ in range(args.repeat)]
        report_extender(
            f"netaware extender, {args.nodes} nodes + {args.pods} pods, {args.churn:.0f} pod changes/s:",
            runs,
            figures,
            "churn",
        )
    if "static20k" in chosen:
        runs = [asyncio.run(extender_run(args, 20_000, 20_000, 0)) for _ in range(args.repeat)]
        report_extender("netaware extender, 20,000 nodes + 20,000 pods, no churn:", runs, figures, "20k nodes")
    if "descheduler" in chosen:
        cycles = [cycle for _ in range(1) for cycle in asyncio.run(descheduler_run(args))]
        print(f"\ndescheduler full cycle (snapshot included, dry run), {args.nodes} nodes + {args.pods} pods:")
        print(f"  {spread(cycles, ' s')}   (budget < {BUDGETS['cycle_s']:.0f} s)")
        figures["descheduler full cycle"] = records.figure(cycles, "s", budget=f"< {BUDGETS['cycle_s']:g} s")
    if args.record:
        records.write(args.record, "bench_live", vars(args), figures)


if __name__ == "__main__":
    main()
