"""`netaware probe` end to end on loopback: four probe processes, each pretending to be a node (its own
127.0.0.N address), against the emulator; the real NetworkTopology controller turns their rows into costs.

Nodes n-a, n-b in zone z1 and n-c, n-d in zone z2 (one region). Loopback round trips are well below 1 ms on an
idle machine (upstream's floor of 1), more on a loaded one; then n-c's endpoint holds its answers 200 ms: the
pairs towards n-c read 200 and a little more, and the z1 -> z2 cost becomes the median of (a->c, b->c, a->d,
b->d) — the mean of the two middle samples, rounded half up, about 100 — while z2 -> z1 stays low.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from typing import Any

import pytest

from operators.api.config.controllers import ControllerOptions, NetworkTopologyOptions
from operators.emulator import ApiEmulator
from operators.engine.measurement.probe import RttWindow
from operators.waiting import until
from tests.integration.conftest import Api
from tests.integration.kopf_harness import running_operator

pytestmark = pytest.mark.integration

NODES = {"n-a": ("z1", "127.0.0.2"), "n-b": ("z1", "127.0.0.3"), "n-c": ("z2", "127.0.0.4"), "n-d": ("z2", "127.0.0.5")}
TOPOLOGY = "nt"
PODS = "/api/v1/namespaces/default/pods"
KEY = "netperf.p90.latency.milliseconds.origin.{}.destination.{}"
OPTIONS = ControllerOptions(networktopology=NetworkTopologyOptions(debounce_seconds=0.2, resync_seconds=60))


def seeds(port: int) -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}]
    for node, (zone, address) in NODES.items():
        labels = {"topology.kubernetes.io/region": "r1", "topology.kubernetes.io/zone": zone}
        documents.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": labels}})
        documents.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"probe-{node}",
                    "namespace": "default",
                    "labels": {"app.kubernetes.io/component": "probe"},
                },
                "spec": {"nodeName": node, "containers": [{"name": "probe", "ports": [{"containerPort": port}]}]},
                "status": {"phase": "Running", "podIP": address},
            }
        )
    documents.append(
        {
            "apiVersion": "networktopology.diktyo.x-k8s.io/v1alpha1",
            "kind": "NetworkTopology",
            "metadata": {"name": TOPOLOGY, "namespace": "default"},
            "spec": {"configmapName": "netperf-metrics", "weights": [{"name": "UserDefined", "topologyList": []}]},
        }
    )
    return documents


async def start_probe(emulator: ApiEmulator, node: str, port: int, delay: float = 0.0) -> asyncio.subprocess.Process:
    args = ["--server", emulator.base_url, "--node-name", node, "--namespace", "default", "--topology", TOPOLOGY]
    args += ["--listen-address", NODES[node][1], "--port", str(port), "--health-port", "0", "--interval", "0.2"]
    args += ["--transactions", "5", "--report-interval", "0.5", "--ttl", "3", "--respond-delay", str(delay)]
    log = tempfile.TemporaryFile()  # noqa: SIM115 - read by stop(), closed with the process
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "operators.cli", "probe", *args, stdout=asyncio.subprocess.DEVNULL, stderr=log
    )
    LOGS[process.pid] = log
    return process


LOGS: dict[int, Any] = {}  # probe pid -> its stderr (a file)


async def stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM, and the probe must be gone within 20 s; if not, its stacks (SIGUSR1) and the end of its log are
    the failure's message (a CI run keeps the message, not always the captured output)."""
    log = LOGS.pop(process.pid, None)  # None: stopped before (the test stops some probes itself)
    if log is None:
        return
    try:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), 20)
            except TimeoutError:
                process.send_signal(signal.SIGUSR1)
                await asyncio.sleep(1)
                process.kill()
                log.seek(0)
                tail = log.read().decode(errors="replace").splitlines()[-80:]
                raise AssertionError("the probe did not stop within 20 s of SIGTERM; its stacks and log:\n"
                                     + "\n".join(tail)) from None  # fmt: skip
    finally:
        log.close()


@contextlib.asynccontextmanager
async def probes(emulator: ApiEmulator, port: int) -> AsyncIterator[dict[str, asyncio.subprocess.Process]]:
    running = {node: await start_probe(emulator, node, port) for node in NODES}
    try:
        yield running
    finally:
        for process in running.values():
            await stop(process)


def rows(emulator: ApiEmulator) -> dict[str, dict[str, str]]:
    return {
        node: (emulator.get_object("v1/configmaps", "default", f"netperf-{TOPOLOGY}-{node}") or {}).get("data") or {}
        for node in NODES
    }


def zone_costs(emulator: ApiEmulator) -> dict[tuple[str, str], int]:
    nt = emulator.get_object("networktopology.diktyo.x-k8s.io/v1alpha1/networktopologies", "default", TOPOLOGY) or {}
    weight = next((w for w in nt.get("spec", {}).get("weights", []) if w["name"] == "NetperfCosts"), {})
    return {
        (origin["origin"], cost["destination"]): cost["networkCost"]
        for entry in weight.get("topologyList", [])
        if entry["topologyKey"] == "topology.kubernetes.io/zone"
        for origin in entry["originList"]
        for cost in origin.get("costList", [])
    }


async def test_rows_costs_a_slow_peer_and_a_gone_peer(api: Api, emulator: ApiEmulator) -> None:
    import socket

    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        port = probe_socket.getsockname()[1]
    await emulator.seed(seeds(port))
    async with running_operator(emulator.base_url, ("networktopology",), OPTIONS), probes(emulator, port) as running:
        # every probe writes its own row: three destinations each, integer milliseconds of at least 1
        def complete() -> bool:
            data = rows(emulator)
            return all(set(data[node]) == {KEY.format(node, o) for o in NODES if o != node} for node in NODES)

        await until("the four rows", complete, 20)
        values = [int(value) for data in rows(emulator).values() for value in data.values()]
        assert all(value >= 1 for value in values), values
        # loopback round trips, well under the 200 ms of the slow peer below, once a moment of load has passed (a
        # saturated CI machine once kept one sample at 200 ms or more when the rows were first complete)
        await until(
            "every pair under 200 ms",
            lambda: all(1 <= int(v) < 200 for data in rows(emulator).values() for v in data.values()),
            20,
        )
        meta = (emulator.get_object("v1/configmaps", "default", f"netperf-{TOPOLOGY}-n-a") or {})["metadata"]
        assert meta["labels"]["networktopology.diktyo.x-k8s.io/netperf"] == TOPOLOGY
        assert meta["ownerReferences"][0]["kind"] == "Node" and meta["ownerReferences"][0]["name"] == "n-a"
        await until("the costs", lambda: set(zone_costs(emulator)) == {("z1", "z2"), ("z2", "z1")}, 10)

        # n-c slows down by 200 ms (far above what a loaded machine adds on loopback): the pairs towards it
        # move, and the z1 -> z2 cost follows
        await stop(running["n-c"])
        running["n-c"] = await start_probe(emulator, "n-c", port, delay=0.200)

        def towards_c() -> list[int]:
            data = rows(emulator)
            return [int(data[node].get(KEY.format(node, "n-c"), "0")) for node in ("n-a", "n-b", "n-d")]

        await until("the pairs towards n-c at 200 ms", lambda: all(200 <= value <= 300 for value in towards_c()), 20)

        def z1_to_z2_as_the_rows_say() -> bool:
            data = rows(emulator)
            samples = [int(data[origin][KEY.format(origin, to)]) for origin in ("n-a", "n-b") for to in ("n-c", "n-d")]
            middle = sorted(samples)[1:3]  # four samples: the mean of the two middle ones, rounded half up
            return zone_costs(emulator).get(("z1", "z2")) == (middle[0] + middle[1] + 1) // 2 >= 100

        await until("z1 -> z2 from the rows", z1_to_z2_as_the_rows_say, 10)
        assert zone_costs(emulator)[("z2", "z1")] < 100  # n-c's own requests are answered at once

        # n-d goes away: its pod is deleted; after the 3 s TTL it leaves the other rows
        await stop(running["n-d"])
        status, _ = await api.call("DELETE", f"{PODS}/probe-n-d")
        assert status == 200
        await until(
            "n-d dropped",
            lambda: all(KEY.format(node, "n-d") not in rows(emulator)[node] for node in ("n-a", "n-b")),
            10,
        )


async def test_a_row_is_written_only_when_it_changed_and_not_more_often_than_the_interval(
    emulator: ApiEmulator,
) -> None:
    """The publisher alone, with a clock of its own: the same row is never written twice; a change within the
    report interval waits for it; a peer not measured for the TTL leaves the row."""
    from operators import compose
    from operators.probe import ProbeMetrics, ProbeOptions, Prober, probe_cache

    await emulator.seed(seeds(8765))
    options = ProbeOptions("n-a", "default", TOPOLOGY, "default", "app.kubernetes.io/component=probe",
                           report_interval=30, ttl=300)  # fmt: skip
    cache = probe_cache(options)
    now = [1000.0]
    prober = Prober(options, cache, ProbeMetrics(), clock=lambda: now[0])
    name = f"netperf-{TOPOLOGY}-n-a"

    def writes() -> int:
        return sum(1 for w in emulator.writes if w[2] == "configmaps" and w[4] == name)

    async with compose.following(compose.ClusterSource(server=emulator.base_url), cache.follow) as api:
        await cache.wait_synced()
        assert sorted(peer.node for peer in prober.peers()) == ["n-a", "n-b", "n-c", "n-d"]
        for node, rtt in (("n-b", 0.0021), ("n-c", 0.0304)):
            prober.windows.setdefault(node, RttWindow()).add(rtt)
            prober.last_seen[node] = now[0]
        assert await prober.publish(api) is True
        assert rows(emulator)["n-a"] == {KEY.format("n-a", "n-b"): "2", KEY.format("n-a", "n-c"): "30"}
        now[0] += 60
        before = prober.metrics.confirmed._value.get()
        await asyncio.sleep(0.01)
        assert await prober.publish(api) is False  # nothing changed: nothing written
        assert prober.metrics.confirmed._value.get() > before  # ... and the row is still current
        prober.windows["n-b"].add(0.009)  # P90 of (2.1, 9) ms: 9
        now[0] += 1
        prober.last_seen["n-b"] = now[0]
        assert await prober.publish(api) is True
        assert rows(emulator)["n-a"][KEY.format("n-a", "n-b")] == "9"
        prober.windows["n-b"].add(0.012)
        confirmed = prober.metrics.confirmed._value.get()
        assert confirmed > 0
        assert await prober.publish(api) is False  # changed, but within the 30 s interval: later
        assert prober.metrics.confirmed._value.get() == confirmed  # not current until written: it ages
        now[0] += 30
        assert await prober.publish(api) is True
        now[0] += 400  # n-c last measured 461 s ago, n-b 430 s ago: both beyond the TTL
        prober.last_seen["n-b"] = now[0]
        assert await prober.publish(api) is True
        assert rows(emulator)["n-a"] == {KEY.format("n-a", "n-b"): "12"}
        assert writes() == 4  # create, then three replaces
