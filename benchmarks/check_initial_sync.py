#!/usr/bin/env python3
"""The operator's initial sync seen from outside, apart from ``bench_live.py``: the way a user's check sees it.

    python -m benchmarks.check_initial_sync [--nodes 5000 --pods 100000 --groups 500]
                                            [--components appgroup,networktopology,nodeslo]
                                            [--api emulator,real]

The cluster of ``live_cluster.py`` (nodes in 50 zones, AppGroups of 4 workloads, pods with bandwidth
annotations), served by the API emulator in a process of its own (``emulator``) and/or loaded into the real
control plane (``real``: hack/control-plane's kube-apiserver, etcd and KWOK, which keeps the nodes Ready and
sets the pods Running; the load is done, and KWOK has set every pod Running, before the operator starts).
Then ``netaware run --components ...`` started; every AppGroup polled **one by one** (GET each, 8 at a time, as
a script with kubectl would) for ``status.topologyOrder``, and the NodeSLOs counted. Prints when the first and
the last AppGroup had their order, when all NodeSLOs existed, and the operator's peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks import live_cluster
from benchmarks.bench_live import APPGROUPS, PYTHON, ROOT, emulator, memory
from benchmarks.raw_floor import list_all

NODESLOS = "/apis/slo.koordinator.sh/v1alpha1/nodeslos"


async def get(http: aiohttp.ClientSession, url: str) -> Any:
    async with http.get(url) as response:
        return await response.json(content_type=None)


COLLECTIONS = {  # where each kind of live_cluster.py is created
    "Namespace": "/api/v1/namespaces",
    "Node": "/api/v1/nodes",
    "Pod": "/api/v1/namespaces/{namespace}/pods",
    "AppGroup": "/apis/appgroup.diktyo.x-k8s.io/v1alpha1/namespaces/{namespace}/appgroups",
    "NetworkTopology": "/apis/networktopology.diktyo.x-k8s.io/v1alpha1/namespaces/{namespace}/networktopologies",
}


SERVER_WRITES = ("uid", "ownerReferences", "managedFields", "resourceVersion", "creationTimestamp")


def creatable(document: dict[str, Any]) -> dict[str, Any]:
    """The object as a client creates it: no uid, no owner (the garbage collector would delete a pod whose
    ReplicaSet does not exist), no managedFields (the API server writes its own), no pod status (KWOK writes it)."""
    metadata = {key: value for key, value in document["metadata"].items() if key not in SERVER_WRITES}
    created = {**document, "metadata": metadata}
    if document["kind"] in ("Pod", "Namespace"):
        created.pop("status", None)
    return created


async def load(http: aiohttp.ClientSession, url: str, documents: list[dict[str, Any]]) -> None:
    """Create ``documents`` in order of kind (namespaces first), 32 at a time; any refusal stops the check."""
    gate = asyncio.Semaphore(32)

    async def create(document: dict[str, Any]) -> None:
        path = COLLECTIONS[document["kind"]].format(namespace=document["metadata"].get("namespace", ""))
        async with gate, http.post(url + path, json=creatable(document)) as response:
            if response.status != 201:
                raise RuntimeError(f"create {document['kind']} {document['metadata']['name']}: "
                                   f"{response.status} {await response.text()}")  # fmt: skip

    for kind in ("Namespace", "Node", "NetworkTopology", "AppGroup", "Pod"):
        await asyncio.gather(*(create(d) for d in documents if d["kind"] == kind))


async def all_running(http: aiohttp.ClientSession, url: str, deadline_s: float = 1800) -> None:
    """Until KWOK has set every pod Running (so that the operator starts on a quiet cluster)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        waiting = await get(http, f"{url}/api/v1/pods?fieldSelector=status.phase!%3DRunning&limit=1")
        if not waiting.get("items"):
            return
        await asyncio.sleep(2)
    raise RuntimeError("KWOK did not set every pod Running in time")


@contextlib.asynccontextmanager
async def real_api(
    nodes: int, pods: int, groups: int, wait_running: bool
) -> AsyncIterator[tuple[aiohttp.ClientSession, str, list[str]]]:
    """hack/control-plane with live_cluster.py's objects loaded: a session as its admin, its URL, and how
    ``netaware run`` reaches it."""
    from hack.control_plane import cluster as control_plane

    build = ["bash", str(ROOT / "hack" / "control-plane" / "build.sh")]
    subprocess.run(build, check=True, stdout=subprocess.DEVNULL)  # noqa: ASYNC221 (before anything is measured)
    folder = Path(tempfile.mkdtemp(prefix="netaware-sync-"))
    plane = control_plane.ControlPlane(folder / "plane")
    plane.start()
    try:
        plane.kubectl("apply", "-f", str(ROOT / "crds"))
        plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        context = plane.admin_context()
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context, limit=64)) as http:
            started = time.perf_counter()
            await load(http, plane.server, live_cluster.cluster(nodes, pods, groups))
            loaded = time.perf_counter() - started
            print(f"real API server: loaded in {loaded:.0f} s", flush=True)
            if wait_running:
                await all_running(http, plane.server)
                print(f"real API server: every pod Running after {time.perf_counter() - started:.0f} s", flush=True)
            yield http, plane.server, ["--kubeconfig", str(plane.kubeconfig)]
    finally:
        plane.stop()
        shutil.rmtree(folder, ignore_errors=True)  # etcd's data: gigabytes at 100,000 pods


async def check(http: aiohttp.ClientSession, url: str, connect: list[str], nodes: int, components: str,
                until_all: bool = True) -> dict[str, float]:  # fmt: skip
    """``netaware run`` (``connect``: how it reaches ``url``) from its start until every AppGroup has its order
    (and, with ``until_all``, every NodeSLO exists); first, as a floor, how long one paged list of the nodes and
    pods takes from the same server (500 a page, as the operator's cache lists)."""
    floor_started = time.perf_counter()
    for collection in ("/api/v1/nodes", "/api/v1/pods"):
        await list_all(http, url + collection, {})
    list_floor = time.perf_counter() - floor_started
    names = [(g["metadata"]["namespace"], g["metadata"]["name"]) for g in (await get(http, url + APPGROUPS))["items"]]
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        PYTHON, "-m", "operators.cli", "run", *connect, "--no-leader-elect", "--health-port", "0",
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
            if len(ordered) == len(names) and (not until_all or "nodeslo" not in components or slos_at is not None):
                break
            await asyncio.sleep(0.5)
        peak, _ = memory(process.pid)
    finally:
        process.terminate()
        await process.wait()
    times = sorted(ordered.values())
    return {
        "list floor (nodes + pods) s": list_floor,
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
    parser.add_argument("--api", default="emulator", help="emulator, real, or both (comma-separated)")
    parser.add_argument("--no-wait-running", dest="wait_running", action="store_false",
                        help="real: start the operator once loaded, while KWOK still sets pods Running")  # fmt: skip
    parser.add_argument("--appgroups-only", dest="until_all", action="store_false",
                        help="stop when every AppGroup has its order, without waiting for the NodeSLOs")  # fmt: skip
    args = parser.parse_args()
    for api in args.api.split(","):
        if api == "emulator":
            async with emulator(args.nodes, args.pods, args.groups) as url, aiohttp.ClientSession() as http:
                figures = await check(http, url, ["--server", url], args.nodes, args.components, args.until_all)
        elif api == "real":
            async with real_api(args.nodes, args.pods, args.groups, args.wait_running) as (http, url, connect):
                figures = await check(http, url, connect, args.nodes, args.components, args.until_all)
        else:
            raise SystemExit(f"--api: {api!r} is neither emulator nor real")
        print(f"initial sync seen from outside ({api} API server): {args.nodes} nodes, {args.pods} pods, "
              f"{args.groups} AppGroups, components {args.components}")  # fmt: skip
        for key, value in figures.items():
            print(f"  {key:28} {value:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
