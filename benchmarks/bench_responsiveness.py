#!/usr/bin/env python3
"""Do the loops that must answer keep answering while a component computes? Measured live, on the budget table's
cluster served by the API emulator in a process of its own:

    python -m benchmarks.bench_responsiveness [--nodes 5000 --pods 100000 --groups 500 --runs 3 --seconds 30]
                                              [--only descheduler,extender] [--baseline DIR] [--record FILE]

* **descheduler**: ``netaware run --components descheduler`` (leader election: Lease renewed every 2 s; dry run,
  a cycle every 2 s), ``/healthz`` asked open loop 20 times a second and the Lease read every 50 ms for
  ``--seconds``: ``/healthz`` latency (p50, p99, max) and the gaps between the Lease's renewals as seen from outside
  (the retry period is 2 s: a gap beyond it is a renewal held back). The floor, in the same run on the same
  cluster: the same process whose next cycle is an hour away (``deschedulingInterval: 1h``).
* **extender**: ``netaware extender`` under 50 pod changes a second and a node change about every second, at random
  moments — a node's label changed in place, or a node added then deleted (the rows move: a rebuild of the
  tables) —, ``/filter`` + ``/prioritize`` open loop at 10 pods a second (as bench_live's extender): the p99; the
  floor is the same load without node changes.

``--baseline DIR`` also runs each component from another checkout of netaware (``git worktree add DIR REV``: the
revision before a change), in the same runs on the same cluster, so a change's effect is measured, not assumed.
Columns rotate from run to run (``benchmarks.support.rotated``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import itertools
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from benchmarks import records
from benchmarks.bench_live import churn, emulator, scheduler_config, scheduling_load, wait_ready
from benchmarks.figures import named_spread as spread
from benchmarks.figures import percentile
from benchmarks.support import free_port, rotated

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
LEASE = "/apis/coordination.k8s.io/v1/namespaces/default/leases/netaware"
RETRY_SECONDS = 2.0
FIGURES = {  # a column's measurement -> the record's figure: its name and unit
    "healthz_p99_ms": ("/healthz latency p99", "ms"),
    "healthz_max_ms": ("/healthz latency max", "ms"),
    "renewal_gap_max_s": ("Lease renewal gap max (retry period 2 s)", "s"),
    "p99_ms": ("extender /filter+/prioritize p99", "ms"),
    "max_ms": ("extender /filter+/prioritize max", "ms"),
}


def descheduler_policy(interval: str) -> Path:
    document = yaml.safe_load((ROOT / "hack" / "configs" / "descheduler-policy.yaml").read_text())
    document["dryRun"] = True
    document["deschedulingInterval"] = interval
    path = Path(tempfile.mkstemp(suffix=".yaml")[1])
    path.write_text(yaml.safe_dump(document))
    return path


@contextlib.asynccontextmanager
async def started(checkout: Path, *args: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """``netaware ARGS`` from ``checkout`` (its own ``operators`` package: the current directory comes first)."""
    process = await asyncio.create_subprocess_exec(
        PYTHON, "-m", "operators.cli", *args, cwd=checkout,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield process
    finally:
        process.terminate()
        await process.wait()


async def text(http: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with http.get(url) as response:
        return response.status, await response.text()


async def healthz_latencies(http: aiohttp.ClientSession, base: str, rate: float, seconds: float) -> list[float]:
    """Open loop: ``/healthz`` every 1/rate s; each answer's latency, s (a failed one counts as the window)."""
    loop = asyncio.get_running_loop()
    latencies: list[float] = []

    async def one() -> None:
        sent = loop.time()
        try:
            status, _ = await text(http, f"{base}/healthz")
        except aiohttp.ClientError:
            status = 0
        latencies.append(loop.time() - sent if status == 200 else seconds)

    tasks = []
    start = loop.time()
    for index in range(int(rate * seconds)):
        await asyncio.sleep(max(0.0, start + index / rate - loop.time()))
        tasks.append(asyncio.create_task(one()))
    await asyncio.gather(*tasks)
    return latencies


async def renewal_gaps(http: aiohttp.ClientSession, url: str, seconds: float) -> list[float]:
    """The gaps between the Lease's renewals as seen by reading it every 50 ms for ``seconds``, s."""
    loop = asyncio.get_running_loop()
    seen: list[float] = []
    last = None
    end = loop.time() + seconds
    while loop.time() < end:
        async with http.get(url + LEASE) as response:
            lease = await response.json()
        renewed = (lease.get("spec") or {}).get("renewTime")
        if renewed != last:
            if last is not None:
                seen.append(loop.time())
            last = renewed
        await asyncio.sleep(0.05)
    return [later - earlier for earlier, later in itertools.pairwise(seen)]


async def descheduler_column(
    http: aiohttp.ClientSession, url: str, checkout: Path, interval: str, seconds: float
) -> dict[str, float]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = ["run", "--server", url, "--components", "descheduler", "--descheduler-policy",
            str(descheduler_policy(interval)), "--health-address", "127.0.0.1", "--health-port", str(port),
            "--leader-election-identity", f"bench-{port}", "--lease-duration", "15", "--renew-deadline", "10",
            "--retry-period", str(int(RETRY_SECONDS))]  # fmt: skip
    async with started(checkout, *args) as process:
        deadline = time.monotonic() + 600
        while "netaware_node_utilization_percent{" not in (await _metrics(http, base)):  # the first cycle done
            if process.returncode is not None or time.monotonic() > deadline:
                raise RuntimeError("the descheduler did not complete a first cycle")
            await asyncio.sleep(0.5)
        latencies, gaps = await asyncio.gather(
            healthz_latencies(http, base, 20, seconds), renewal_gaps(http, url, seconds)
        )
    return {
        "healthz_p50_ms": statistics.median(latencies) * 1000,
        "healthz_p99_ms": percentile(latencies, 0.99) * 1000,
        "healthz_max_ms": max(latencies) * 1000,
        "renewal_gap_max_s": max(gaps, default=float("nan")),
        "renewal_gap_p99_s": percentile(gaps, 0.99),
    }


async def _metrics(http: aiohttp.ClientSession, base: str) -> str:
    with contextlib.suppress(aiohttp.ClientError):
        return (await text(http, f"{base}/metrics"))[1]
    return ""


async def node_churn(http: aiohttp.ClientSession, url: str, nodes: int, how: str, stop: asyncio.Event) -> int:
    """A node change about once a second, at random moments (changes at a fixed period would fall at the same phase
    of the requests' fixed period every time, and meet them always or never): ``in-place``, a label of one node
    (the extender computes that node's row again); ``add-delete``, a node added, then deleted (the rows move: the
    extender rebuilds its tables)."""
    changes = 0
    rng = random.Random(11)
    while not stop.is_set():
        if how == "in-place":
            patch = {"metadata": {"labels": {"bench.netaware.io/tick": str(changes)}}}
            request = http.patch(f"{url}/api/v1/nodes/node-{changes % nodes:05d}", json=patch,
                                 headers={"Content-Type": "application/merge-patch+json"})  # fmt: skip
        elif changes % 2 == 0:
            extra = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"bench-extra-{changes}"},
                     "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}  # fmt: skip
            request = http.post(f"{url}/api/v1/nodes", json=extra)
        else:
            request = http.delete(f"{url}/api/v1/nodes/bench-extra-{changes - 1}")
        async with request as response:
            await response.read()
        changes += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), rng.expovariate(1.0))
    return changes


async def extender_column(
    http: aiohttp.ClientSession, url: str, checkout: Path, args: argparse.Namespace, nodes_changing: str
) -> dict[str, float]:
    port = free_port()
    config_path = scheduler_config()
    command = ["extender", "--server", url, "--insecure", "--listen-address", "127.0.0.1", "--port", str(port),
               "--config", str(config_path)]  # fmt: skip
    async with started(checkout, *command) as process:
        base = f"http://127.0.0.1:{port}"
        await wait_ready(http, base, process)
        names = [f"node-{index:05d}" for index in range(args.nodes)]
        await scheduling_load(http, base, names, args.groups, 10, 2)  # warm up
        stop = asyncio.Event()
        pods = asyncio.create_task(churn(http, url, 50, args.nodes, stop))
        nodes = asyncio.create_task(node_churn(http, url, args.nodes, nodes_changing, stop)) if nodes_changing else None
        latencies = await scheduling_load(http, base, names, args.groups, 10, args.seconds)
        stop.set()
        await pods
        node_changes = await nodes if nodes is not None else 0
    return {"p99_ms": percentile(latencies, 0.99) * 1000, "max_ms": max(latencies) * 1000,
            "node_changes": float(node_changes)}  # fmt: skip


async def one_run(args: argparse.Namespace, run: int, checkouts: dict[str, Path]) -> dict[str, dict[str, float]]:
    """Every column of the chosen parts on one fresh cluster, in this run's order."""
    columns: list[tuple[str, Any]] = []
    for name, checkout in checkouts.items():
        if "descheduler" in args.only:
            columns.append(
                (
                    f"descheduler {name}: cycling",
                    lambda http, url, c=checkout: descheduler_column(http, url, c, "2s", args.seconds),
                )
            )
            columns.append(
                (
                    f"descheduler {name}: idle (floor)",
                    lambda http, url, c=checkout: descheduler_column(http, url, c, "1h", args.seconds),
                )
            )
        if "extender" in args.only:
            for how in ("in-place", "add-delete"):
                columns.append(
                    (
                        f"extender {name}: nodes changed {how}",
                        lambda http, url, c=checkout, h=how: extender_column(http, url, c, args, h),
                    )
                )
            columns.append((f"extender {name}: no node change (floor)",
                            lambda http, url, c=checkout: extender_column(http, url, c, args, "")))  # fmt: skip
    found = {}
    async with emulator(args.nodes, args.pods, args.groups) as url, aiohttp.ClientSession() as http:
        for name, measure in rotated(columns, run):
            found[name] = await measure(http, url)
            print(f"  run {run + 1}: {name}: {found[name]}", flush=True)
    return found


def revision(checkout: Path) -> str:
    """The checkout's commit, as the record names the baseline (not the path, which is this machine's)."""
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=False)  # fmt: skip
    return done.stdout.strip() or "another checkout"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each measuring window")
    parser.add_argument("--only", default="descheduler,extender")
    parser.add_argument("--baseline", default=None, help="another checkout whose components run as a column too")
    parser.add_argument("--record", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args()
    print(f"cluster: {args.nodes} nodes, {args.pods} pods, {args.groups} AppGroups; {os.cpu_count()} CPUs; "
          f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC", flush=True)  # fmt: skip
    checkouts = {"netaware": ROOT, **({"baseline": Path(args.baseline).resolve()} if args.baseline else {})}
    runs = [asyncio.run(one_run(args, run, checkouts)) for run in range(args.runs)]
    figures: dict[str, Any] = {}
    for key, (title, unit) in FIGURES.items():
        measured = {name: [run[name][key] for run in runs] for name in runs[0] if key in runs[0][name]}
        if measured:
            figures[title] = records.columns(measured, unit)
            print(f"\n{title}:")
            for name, values in measured.items():
                print(f"  {name:45s} {spread(values, ' ' + unit)}")
    if args.record:
        parameters = {**vars(args), "baseline": revision(Path(args.baseline)) if args.baseline else None}
        records.write(args.record, "bench_responsiveness", parameters, figures)


if __name__ == "__main__":
    main()
