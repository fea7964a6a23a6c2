#!/usr/bin/env python3
"""The operator's initial sync seen from outside, apart from ``bench_live.py``: the way a user's check sees it.

    python benchmarks/check_initial_sync.py [--nodes 5000 --pods 100000 --groups 500]
                                            [--components appgroup,networktopology,nodeslo]

The API emulator in a process of its own (``live_cluster.py``: nodes in 50 zones, AppGroups of 4 workloads,
pods with bandwidth annotations); ``netaware run --components ...`` started; every AppGroup then polled **one by
one** (GET each, 8 at a time, as a script with kubectl would) for ``status.topologyOrder``, and the NodeSLOs
counted. Prints when the first and the last AppGroup had their order,
when all NodeSLOs existed, and the operator's peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_live import APPGROUPS, PYTHON, emulator, memory

NODESLOS = "/apis/slo.koordinator.sh/v1alpha1/nodeslos"


async def get(http: aiohttp.ClientSession, url: str) -> Any:
    async with http.get(url) as response:
        return await response.json(content_type=None)


async def check(url: str, nodes: int, components: str) -> dict[str, float]:
    async with aiohttp.ClientSession() as http:
        names = [
            (g["metadata"]["namespace"], g["metadata"]["name"]) for g in (await get(http, url + APPGROUPS))["items"]
        ]
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(
            PYTHON, "-m", "operators.cli", "run", "--server", url, "--no-leader-elect", "--health-port", "0",
            "--components", components,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        ordered: dict[tuple[str, str], float] = {}
        slos_at: float | None = None
        gate = asyncio.Semaphore(8)

        async def one(namespace: str, name: str) -> None:
            async with gate:
                found = await get(
                    http, f"{url}/apis/appgroup.diktyo.x-k8s.io/v1alpha1/namespaces/{namespace}/appgroups/{name}"
                )
            if (found.get("status") or {}).get("topologyOrder"):
                ordered.setdefault((namespace, name), time.perf_counter() - started)

        try:
            while time.perf_counter() - started < 900:
                if process.returncode is not None:
                    raise RuntimeError("netaware run exited")
                await asyncio.gather(*(one(ns, name) for ns, name in names if (ns, name) not in ordered))
                if "nodeslo" in components and slos_at is None:
                    count = len((await get(http, url + NODESLOS)).get("items") or [])
                    if count >= nodes:
                        slos_at = time.perf_counter() - started
                if len(ordered) == len(names) and ("nodeslo" not in components or slos_at is not None):
                    break
                await asyncio.sleep(0.5)
            peak, _ = memory(process.pid)
        finally:
            process.terminate()
            await process.wait()
    times = sorted(ordered.values())
    return {
        "first AppGroup ordered s": times[0] if times else float("nan"),
        "all AppGroups ordered s": times[-1] if len(times) == len(names) else float("nan"),
        "all NodeSLOs created s": slos_at if slos_at is not None else float("nan"),
        "operator peak RSS MiB": peak,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=500)
    parser.add_argument("--components", default="appgroup,networktopology,nodeslo")
    args = parser.parse_args()
    async with emulator(args.nodes, args.pods, args.groups) as url:
        figures = await check(url, args.nodes, args.components)
    print(f"initial sync seen from outside: {args.nodes} nodes, {args.pods} pods, {args.groups} AppGroups, "
          f"components {args.components}")  # fmt: skip
    for key, value in figures.items():
        print(f"  {key:28} {value:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
