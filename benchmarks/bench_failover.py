#!/usr/bin/env python3
"""Failover of `netaware run` at the budget table's size: seconds from the leader's death to the next decision, a
warm follower (the default: it lists and watches while it waits) against a cold one (``--no-warm-standby``: it
lists the cluster after it takes the Lease, the behaviour before 0.2.0).

    python -m benchmarks.bench_failover [--nodes 5000 --pods 100000 --groups 500 --repeat 3]
                                        [--modes warm,cold] [--lease 15] [--api emulator|real] [--record FILE]

The cluster of ``benchmarks/live_cluster.py`` served by the API emulator in a process of its own, fresh for every
run, or (``--api real``) loaded into hack/control-plane's kube-apiserver and etcd with KWOK
(``check_initial_sync.real_api``: every pod Running before anything starts; this machine holds 5,000 nodes and
20,000 pods there). Per run and mode: replica A starts and takes the Lease; once an AppGroup created then has its
status (A has synced and decides), replica B starts with the same flags and is given until its ``/readyz`` answers
(a warm follower: synced) and 10 s more. A is SIGKILLed (no Lease handed back) and an AppGroup is created at once;
the figures are the seconds from the kill to B holding the Lease (the lease duration and B's retry: the floor no
follower beats) and to that AppGroup's status written by B (the next decision), and the decision's seconds after the
takeover. The budget (docs/design/contracts.md): the next decision within the lease duration + 5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from benchmarks import records
from benchmarks.bench_live import PYTHON, emulator, get_json, new_appgroup
from benchmarks.check_initial_sync import real_api
from benchmarks.support import free_port

LEASE = "/apis/coordination.k8s.io/v1/namespaces/default/leases/netaware"
RETRY_SECONDS = 1  # the chart's operator.leaderElection.retryPeriod
CREATE = "/apis/appgroup.diktyo.x-k8s.io/v1alpha1/namespaces/team-0/appgroups"


@contextlib.asynccontextmanager
async def replica(connect: list[str], name: str, warm: bool, lease: int, health: int) -> AsyncIterator[Any]:
    process = await asyncio.create_subprocess_exec(
        PYTHON, "-m", "operators.cli", "run", *connect, "--components", "appgroup,networktopology,nodeslo",
        "--leader-election-identity", name, "--lease-duration", str(lease), "--renew-deadline", str(lease * 2 // 3),
        "--retry-period", str(RETRY_SECONDS), "--health-port", str(health),
        *(() if warm else ("--no-warm-standby",)),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield process
    finally:
        if process.returncode is None:
            process.terminate()
            await process.wait()


async def holder(http: aiohttp.ClientSession, url: str) -> str:
    lease = await get_json(http, url + LEASE)
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


async def decided(http: aiohttp.ClientSession, url: str, name: str) -> bool:
    group = await get_json(http, f"{url}{CREATE}/{name}")
    return bool(((group or {}).get("status") or {}).get("conditions"))


async def until(check: Any, within: float, what: str) -> float:
    """Poll ``check()`` every 50 ms until true; the monotonic time it became true."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await check():
            return time.monotonic()
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{what} not within {within:g} s")


async def ready(http: aiohttp.ClientSession, port: int) -> bool:
    try:
        async with http.get(f"http://127.0.0.1:{port}/readyz") as answer:
            return answer.status == 200
    except aiohttp.ClientError:
        return False


@contextlib.asynccontextmanager
async def cluster(args: argparse.Namespace) -> AsyncIterator[tuple[aiohttp.ClientSession, str, list[str]]]:
    """A session to the API server, its URL, and how ``netaware run`` reaches it."""
    if args.api == "real":
        async with real_api(args.nodes, args.pods, args.groups, wait_running=True) as found:
            yield found
    else:
        async with emulator(args.nodes, args.pods, args.groups) as url, aiohttp.ClientSession() as http:
            yield http, url, ["--server", url]


async def one_run(args: argparse.Namespace, warm: bool) -> dict[str, float]:
    async with cluster(args) as (http, url, connect), replica(connect, "a", warm, args.lease, free_port()) as first:
        await until(lambda: holder_is(http, url, "a"), 120, "A leading")
        async with http.post(url + CREATE, json=new_appgroup(0)) as response:
            assert response.status == 201
        await until(lambda: decided(http, url, "created-0"), 600, "A's first decision")
        health = free_port()
        async with replica(connect, "b", warm, args.lease, health):
            waited = time.monotonic()
            await until(lambda: ready(http, health), 600, "B ready")
            follower_ready = time.monotonic() - waited
            await asyncio.sleep(10)
            first.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            async with http.post(url + CREATE, json=new_appgroup(1)) as response:
                assert response.status == 201
            takeover = await until(lambda: holder_is(http, url, "b"), args.lease + 60, "B leading")
            decision = await until(lambda: decided(http, url, "created-1"), 600, "B's first decision")
    return {
        "follower_ready_s": follower_ready,
        "takeover_s": takeover - killed,
        "decision_s": decision - killed,
        "after_takeover_s": decision - takeover,
    }


async def holder_is(http: aiohttp.ClientSession, url: str, name: str) -> bool:
    return await holder(http, url) == name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--lease", type=int, default=15, help="the lease duration, seconds (the chart's default)")
    parser.add_argument("--modes", default="warm,cold")
    parser.add_argument("--api", choices=("emulator", "real"), default="emulator")
    parser.add_argument("--record", default=None, help="write the figures as JSON to this file")
    args = parser.parse_args()
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    for run in range(args.repeat):
        for mode in modes if run % 2 == 0 else reversed(modes):  # neither mode always first on a warming machine
            result = asyncio.run(one_run(args, mode == "warm"))
            runs[mode].append(result)
            print(f"run {run + 1} {mode}: " + ", ".join(f"{key} {value:.1f}" for key, value in result.items()))
    budget = args.lease + 5
    figures: dict[str, Any] = {}
    labels = {
        "follower_ready_s": "follower ready (its cache synced, or at once when cold)",
        "takeover_s": "leader killed -> the follower holds the Lease",
        "decision_s": "leader killed -> the next AppGroup decided",
        "after_takeover_s": "the Lease taken -> the next AppGroup decided",
    }
    for mode, results in runs.items():
        for key, label in labels.items():
            extra = {"budget": budget} if key == "decision_s" else {}
            figures[f"{mode}: {label}"] = records.figure([r[key] for r in results], "s", **extra)
    for name, value in figures.items():
        print(f"{name}: min {value['min']} median {value['median']} max {value['max']} {value['unit']}")
    if "warm" in runs and "cold" in runs:
        ratio = statistics.median(r["decision_s"] for r in runs["cold"]) / statistics.median(
            r["decision_s"] for r in runs["warm"]
        )
        print(f"cold / warm, the next decision: {ratio:.2f}x")
    if args.record:
        parameters = {"nodes": args.nodes, "pods": args.pods, "groups": args.groups, "repeat": args.repeat,
                      "lease": args.lease, "modes": ",".join(modes), "api": args.api}  # fmt: skip
        records.write(args.record, "bench_failover", parameters, figures)


if __name__ == "__main__":
    main()
