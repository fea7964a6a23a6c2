#!/usr/bin/env python3
"""The live node agent's cost, measured from outside its process (root; a network namespace it makes and removes):

    python -m benchmarks.bench_agent_live [--pods 100 --rate 50 --seconds 20 --runs 3]

The API emulator in a process of its own holds node ``n1`` (10G), its NodeSLO and ``--pods`` + 10 pods with
addresses; `netaware agent` (its own process, the same command the DaemonSet runs) shapes an uplink veth in the
namespace. Then, open loop, ``--rate`` pod changes per second for ``--seconds`` (a new pod, or the oldest new
one deleted, alternating, so a pod lives about 20 changes; each sent at its scheduled time whatever the previous
one's fate). Measured, from ``/proc/<pid>``, min/median/max over ``--runs``:

* **idle**: the agent's CPU (% of one core) over 10 s with nothing changing (report interval 10 s), its RSS;
* **churn**: its CPU while following the changes, its peak RSS, passes made, kernel operations per change;
* **lag**: from a pod's creation being answered to its address in the kernel's nftables map (sampled every
  50 ms), p50 and p99, and the time to converge once the changes stop;
* **floor**: what following one change costs at the least with the tools an operator would use — one ``nft``
  element and one ``tc class`` change per direction, as subprocesses (4 per change) — as CPU per change, in the
  same run; the agent's CPU per change against it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks import records
from benchmarks.bench_live import emulator
from benchmarks.figures import percentile, spread
from benchmarks.support import sh

ROOT = Path(__file__).resolve().parents[1]

NETNS = "naw-live-bench"
TICKS = os.sysconf("SC_CLK_TCK")
SPARE = 10  # pods beyond --pods that the changes delete and replace


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def memory_mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def pod(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"p{index}",
            "namespace": "default",
            "labels": {"koordinator.sh/qosClass": "LS" if index % 2 else "BE"},
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running", "podIP": f"10.{100 + index // 250}.{index % 250}.2"},
    }


class Cluster:
    def __init__(self, http: aiohttp.ClientSession, url: str):
        self.http, self.url = http, url

    async def create(self, document: dict[str, Any], plural: str) -> None:
        async with self.http.post(f"{self.url}{plural}", json=document) as response:
            assert response.status == 201, await response.text()
        if document["kind"] == "Pod":  # the kubelet's part: the address, by the status subresource
            path = f"{self.url}{plural}/{document['metadata']['name']}/status"
            patch = {"status": document["status"]}
            headers = {"Content-Type": "application/merge-patch+json"}
            async with self.http.patch(path, data=json.dumps(patch), headers=headers) as response:
                assert response.status == 200, await response.text()

    async def delete_pod(self, name: str) -> None:
        async with self.http.delete(f"{self.url}/api/v1/namespaces/default/pods/{name}") as response:
            assert response.status == 200, await response.text()

    async def metric(self, port: int, name: str) -> float:
        async with self.http.get(f"http://127.0.0.1:{port}/metrics") as response:
            for line in (await response.text()).splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        return 0.0


def map_addresses() -> set[str]:
    listed = json.loads(sh("ip", "netns", "exec", NETNS, "nft", "-j", "list", "map", "ip", "netaware", "egress").stdout)
    found = set()
    for item in listed["nftables"]:
        for key, _ in item.get("map", {}).get("elem", []):
            found.add(str(key["elem"]["val"] if isinstance(key, dict) else key))  # with a counter: {"elem": {...}}
    return found


def floor_cpu_per_change() -> float:
    """CPU seconds of the 4 subprocesses one change takes at the least (children's rusage)."""
    sh("ip", "netns", "exec", NETNS, "nft", "add", "table", "ip", "floor")
    sh("ip", "netns", "exec", NETNS, "nft", "add", "map", "ip", "floor", "m", "{ type ipv4_addr : classid; }")
    sh("ip", "netns", "exec", NETNS, "tc", "qdisc", "add", "dev", "up0p", "root", "handle", "1:", "htb")
    sh("ip", "netns", "exec", NETNS, "tc", "class", "add", "dev", "up0p", "parent", "1:", "classid", "1:1", "htb",
       "rate", "1mbit")  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    changes = 20
    for index in range(changes):
        element = f"{{ 10.9.{index}.2 : 1:1 }}"
        sh("ip", "netns", "exec", NETNS, "nft", "add", "element", "ip", "floor", "m", element)
        sh("ip", "netns", "exec", NETNS, "tc", "class", "change", "dev", "up0p", "classid", "1:1", "htb", "rate",
           f"{index + 1}mbit")  # fmt: skip
        sh("ip", "netns", "exec", NETNS, "nft", "delete", "element", "ip", "floor", "m", f"{{ 10.9.{index}.2 }}")
        sh("ip", "netns", "exec", NETNS, "tc", "class", "change", "dev", "up0p", "classid", "1:1", "htb", "rate",
           "1mbit")  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    sh("ip", "netns", "exec", NETNS, "nft", "delete", "table", "ip", "floor")
    sh("ip", "netns", "exec", NETNS, "tc", "qdisc", "del", "dev", "up0p", "root")
    spent = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return spent / changes


def one_run(pods: int, rate: float, seconds: float) -> dict[str, float]:
    subprocess.run(["ip", "netns", "del", NETNS], capture_output=True, check=False)
    sh("ip", "netns", "add", NETNS)
    try:
        sh("ip", "-n", NETNS, "link", "add", "up0", "type", "veth", "peer", "name", "up0p")
        sh("ip", "-n", NETNS, "link", "set", "up0", "up")
        sh("ip", "-n", NETNS, "link", "set", "up0p", "up")
        return asyncio.run(_with_emulator(pods, rate, seconds))
    finally:
        subprocess.run(["ip", "netns", "del", NETNS], capture_output=True, check=False)


async def _with_emulator(pods: int, rate: float, seconds: float) -> dict[str, float]:
    async with emulator(0, 0, 0) as url, aiohttp.ClientSession() as http:
        return await _measure(Cluster(http, url), url, pods, rate, seconds)


async def _measure(cluster: Cluster, url: str, pods: int, rate: float, seconds: float) -> dict[str, float]:
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "annotations": {"node.koordinator.sh/network-bandwidth": "10G"}}}  # fmt: skip
    await cluster.create(node, "/api/v1/nodes")
    qos = {"enable": True, "egressRequest": 40, "ingressRequest": 40}
    strategy = {"lsClass": {"networkQOS": qos}, "beClass": {"networkQOS": qos}}
    slo = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": {"name": "n1"},
           "spec": {"resourceQOSStrategy": strategy}}  # fmt: skip
    await cluster.create(slo, "/apis/slo.koordinator.sh/v1alpha1/nodeslos")
    for index in range(pods + SPARE):
        await cluster.create(pod(index), "/api/v1/namespaces/default/pods")
    port = 19107
    agent = subprocess.Popen(  # noqa: ASYNC220 (started once, outside the measured window)
        [sys.executable, "-m", "operators.cli", "agent", "--server", url, "--node-name", "n1", "--netns", NETNS,
         "--interface", "up0", "--report-interval", "10", "--health-port", str(port), "--listen-address", "127.0.0.1"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        started = time.monotonic()
        while len(map_addresses() if _has_map() else ()) < pods + SPARE:
            if agent.poll() is not None or time.monotonic() - started > 60:
                raise RuntimeError(f"the agent did not enforce: {agent.stderr.read().decode() if agent.stderr else ''}")
            await asyncio.sleep(0.1)
        await asyncio.sleep(1)
        cpu0 = cpu_seconds(agent.pid)
        await asyncio.sleep(10)
        idle_cpu = (cpu_seconds(agent.pid) - cpu0) / 10
        idle_rss = memory_mib(agent.pid, "VmRSS")

        operations0 = await cluster.metric(port, "netaware_agent_netlink_operations_total")
        passes0 = await cluster.metric(port, "netaware_agent_pass_seconds_count")
        created: dict[str, float] = {}  # address -> when its creation was answered
        seen: dict[str, float] = {}
        live = list(range(pods, pods + SPARE))  # the oldest is deleted next
        next_index = pods + SPARE
        sends: list[asyncio.Task[None]] = []
        stop_sampling = asyncio.Event()

        async def sample() -> None:
            while not stop_sampling.is_set():
                found = await asyncio.to_thread(map_addresses)
                now = time.monotonic()
                for address in found:
                    seen.setdefault(address, now)
                await asyncio.sleep(0.05)

        async def add(index: int) -> None:
            document = pod(index)
            await cluster.create(document, "/api/v1/namespaces/default/pods")
            created[document["status"]["podIP"]] = time.monotonic()

        sampler = asyncio.create_task(sample())
        cpu1, begun = cpu_seconds(agent.pid), time.monotonic()
        changes = int(rate * seconds)
        for step in range(changes):
            await asyncio.sleep(max(0.0, begun + step / rate - time.monotonic()))
            if step % 2 == 0:
                live.append(next_index)
                sends.append(asyncio.create_task(add(next_index)))
                next_index += 1
            else:
                sends.append(asyncio.create_task(cluster.delete_pod(f"p{live.pop(0)}")))
        await asyncio.gather(*sends)
        ended = time.monotonic()
        wanted = {pod(i)["status"]["podIP"] for i in [*range(pods), *live]}
        while await asyncio.to_thread(map_addresses) != wanted:
            if time.monotonic() - ended > 30:
                found = await asyncio.to_thread(map_addresses)
                raise RuntimeError(
                    f"not converged 30 s after the last change: missing {wanted - found}, extra {found - wanted}"
                )
            await asyncio.sleep(0.05)
        converged = time.monotonic() - ended
        churn_cpu = cpu_seconds(agent.pid) - cpu1
        window = time.monotonic() - begun
        stop_sampling.set()
        await sampler
        lags = [seen[address] - at for address, at in created.items() if address in seen]
        operations = await cluster.metric(port, "netaware_agent_netlink_operations_total") - operations0
        passes = await cluster.metric(port, "netaware_agent_pass_seconds_count") - passes0
        floor = floor_cpu_per_change()
        per_change = churn_cpu / changes
        return {
            "idle cpu % of a core": 100 * idle_cpu,
            "idle RSS MiB": idle_rss,
            "churn cpu % of a core": 100 * churn_cpu / window,
            "churn peak RSS MiB": memory_mib(agent.pid, "VmHWM"),
            "churn passes": passes,
            "churn changes per pass": changes / passes if passes else float("nan"),
            "operations per change": operations / changes,
            "cpu ms per change": 1000 * per_change,
            "floor cpu ms per change (4 tools)": 1000 * floor,
            "cpu per change / floor": per_change / floor,
            "lag p50 ms (sampled every 50 ms)": 1000 * percentile(lags, 0.5),
            "lag p99 ms": 1000 * percentile(lags, 0.99),
            "converged after the last change s": converged,
        }
    finally:
        agent.terminate()
        agent.wait(timeout=30)


def _has_map() -> bool:
    done = subprocess.run(["ip", "netns", "exec", NETNS, "nft", "list", "map", "ip", "netaware", "egress"],
                          capture_output=True, check=False)  # fmt: skip
    return done.returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=100, help="pods on the node before the changes")
    parser.add_argument("--rate", type=float, default=50.0, help="pod changes per second, open loop")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--record", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args()
    runs = [one_run(args.pods, args.rate, args.seconds) for _ in range(args.runs)]
    print(f"live node agent, {args.pods} pods, {args.rate:g} changes/s for {args.seconds:g} s, {args.runs} runs "
          "(min / median / max)")  # fmt: skip
    for key in runs[0]:
        print(f"  {key:38} {spread((run[key] for run in runs), '.4g')}")
    if args.record:
        records.write(args.record, "bench_agent_live", vars(args), {key: records.figure(run[key] for run in runs)
                                                                      for key in runs[0]})  # fmt: skip


if __name__ == "__main__":
    main()
