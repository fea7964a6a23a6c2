#!/usr/bin/env python3
"""The memory floor the live components are measured against: a process that lists nodes and pods (paged,
aiohttp + orjson, as the cluster cache does) and keeps the raw dicts, nothing else.

    python -m benchmarks.raw_floor URL [--selector LABELSELECTOR]

prints ``FLOOR <seconds> <peak RSS MiB> <objects>``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import aiohttp
import orjson


def peak_rss_mib() -> float:
    """VmHWM of this process (Linux), in MiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def list_all(session: aiohttp.ClientSession, url: str, params: dict[str, str]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    query = {"limit": "500", **params}
    while True:
        async with session.get(url, params=query) as response:
            page = orjson.loads(await response.read())
        items.extend(page.get("items") or [])
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return items
        query = {"limit": "500", **params, "continue": token}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--selector", default="", help="a label selector for pods (what the process follows)")
    args = parser.parse_args()
    started = time.perf_counter()
    async with aiohttp.ClientSession() as session:
        nodes = await list_all(session, f"{args.url}/api/v1/nodes", {})
        selected = {"labelSelector": args.selector} if args.selector else {}
        pods = await list_all(session, f"{args.url}/api/v1/pods", selected)
    print(f"FLOOR {time.perf_counter() - started:.2f} {peak_rss_mib():.0f} {len(nodes) + len(pods)}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
