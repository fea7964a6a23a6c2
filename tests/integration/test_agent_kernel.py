"""The node agent on a real kernel: a node namespace with a bridge of pod namespaces and an uplink veth to a peer
namespace (as a CNI bridge does), the node's total 100M, LS request 60M, BE request 20M, limits 100 %; iperf3
between the pods and the peer. Skipped, with the reason, only where network namespaces cannot be made; under CI
a missing iperf3 or nft fails (build.sh installs them).

Rates are compared on the wire: HTB counts whole frames, iperf3 reports payload, so iperf3's figure is scaled by
(MSS + 66) / MSS (Ethernet 14 + IP 20 + TCP with timestamps 32 bytes per segment)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from operators.api.config.descheduler import DEFAULT_POLICY, parse_policy
from operators.engine.cluster.snapshot import SnapshotBuilder
from operators.engine.descheduling.lownodeload import plan as deschedule_plan
from tests.support.kernel import (
    NODE,
    NODE_IP,
    PEER,
    PEER_IP,
    PODS,
    M,
    from_pods,
    iperf,
    kernel_node,  # noqa: F401 (the fixture "node")
    sh,
    wire,
    wire_scale,
    wire_steady,
)

pytestmark = pytest.mark.integration


def documents(capped: bool = True, ls_request: str = "60M") -> list[dict[str, Any]]:
    def pod(name: str, qos: str, address: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "default",
                "labels": {"koordinator.sh/qosClass": qos},
                "annotations": annotations or {},
            },
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": "Running", "podIP": address},
        }

    network = {"enable": True, "ingressRequest": "20M", "egressRequest": "20M"}
    out = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1", "annotations": {"node.koordinator.sh/network-bandwidth": "100M"}},
        },
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeSLO",
            "metadata": {"name": "n1"},
            "spec": {
                "resourceQOSStrategy": {
                    "lsClass": {"networkQOS": {**network, "ingressRequest": ls_request, "egressRequest": ls_request}},
                    "beClass": {"networkQOS": network},
                }
            },
        },
        pod("ls", "LS", PODS["ls"][1]),
        pod("be", "BE", PODS["be"][1]),
    ]
    if capped:
        limits = {"kubernetes.io/egress-bandwidth": "30M", "kubernetes.io/ingress-bandwidth": "30M"}
        out.append(pod("capped", "BE", PODS["capped"][1], limits))
    return out


def agent(tmp_path: Path, *args: str, docs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One `netaware agent` process (a restart each time); its JSON answer."""
    command = [sys.executable, "-m", "operators.cli", "agent", "--netns", NODE, "--interface", "up0", *args]
    if docs is not None:
        snapshot = tmp_path / "snapshot.yaml"
        snapshot.write_text(yaml.safe_dump_all(docs))
        command += ["--node-name", "n1", "-f", str(snapshot), "--once"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def kernel_objects() -> dict[str, str]:
    """What the agent could have made, as text: to compare before/after."""
    return {
        "qdiscs": sh("tc", "qdisc", "show", netns=NODE).stdout,
        "ingress filters": sh("tc", "filter", "show", "dev", "up0", "ingress", netns=NODE).stdout,
        "links": "\n".join(sorted(re.findall(r"^\d+: (\S+?)[:@]", sh("ip", "link", netns=NODE).stdout, re.M))),
        "nft": sh("nft", "-s", "list", "ruleset", netns=NODE).stdout,  # stateless: no counters
    }


def to_pods(*names: str) -> list[tuple[str, str, str]]:
    return [(PEER, PODS[name][0], PODS[name][1]) for name in names]


def test_guaranteed_classes_hold_under_contention_in_both_directions(node: None, tmp_path: Path) -> None:
    answer = agent(tmp_path, docs=documents(capped=False))
    assert answer["applied"] and answer["problems"] == []
    for direction, pairs in (("egress", from_pods("ls", "be")), ("ingress", to_pods("ls", "be"))):
        ls, be = (wire(report) for report in iperf(pairs))
        assert ls >= 0.97 * 60 * M, (direction, ls, be)  # LS keeps its request
        assert be >= 0.97 * 20 * M, (direction, ls, be)  # BE keeps its request
        assert ls + be <= 1.03 * 100 * M, (direction, ls, be)  # the sum stays within the node's total


def test_be_alone_borrows_up_to_its_limit_and_a_pod_limit_holds(node: None, tmp_path: Path) -> None:
    agent(tmp_path, docs=documents())
    for pairs in (from_pods("be"), to_pods("be")):
        (alone,) = iperf(pairs)
        assert wire(alone) >= 0.9 * 100 * M  # BE's limit is 100 %: it borrows what LS leaves
    for pairs in (from_pods("capped"), to_pods("capped")):
        (capped,) = iperf(pairs)
        assert 0.85 * 30 * M <= wire(capped) <= 1.03 * 30 * M  # kubernetes.io/*-bandwidth: 30M


# ---- the guarantee held: the total, every request, no inherited debt (in-process passes: the agent's memory) ----


def guarantee_documents(requests: dict[str, str | None], ls_class: str = "20M") -> list[dict[str, Any]]:
    """Total 100M; the LS class asks ``ls_class`` (less than its pods may), BE 10M; one pod per entry of
    ``requests`` (name -> its request in both directions, or None), LS but for "be"."""
    out = documents(capped=False)[:2]
    network = out[1]["spec"]["resourceQOSStrategy"]
    network["lsClass"]["networkQOS"].update(ingressRequest=ls_class, egressRequest=ls_class)
    network["beClass"]["networkQOS"].update(ingressRequest="10M", egressRequest="10M")
    for name, request in requests.items():
        pod_name, _, uid = name.partition("#")  # "ls#2": the pod ls again, another pod object (uid) at its address
        asked = {f"kubernetes.io/{d}-request": request for d in ("ingress", "egress")} if request else {}
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name.replace("#", "-"),
                    "namespace": "default",
                    "uid": f"uid-{pod_name}-{uid or 1}",
                    "labels": {"koordinator.sh/qosClass": "BE" if pod_name == "be" else "LS"},
                    "annotations": asked,
                },
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
                "status": {"phase": "Running", "podIP": PODS[pod_name][1]},
            }
        )
    return out


class Passes:
    """The agent's passes in this process (one TcBackend: it remembers which pod each leaf was made for, as the
    live agent does)."""

    def __init__(self) -> None:
        from operators.agent.enforce import TcBackend
        from operators.agent.kernel import Kernel

        self.kernel = Kernel("up0", "netaware-ifb", NODE)
        self.backend = TcBackend(self.kernel)

    def apply(self, docs: list[dict[str, Any]]) -> Any:
        from operators.agent.live import snapshot_planner
        from operators.engine.cluster.snapshot import build_snapshot

        planner = snapshot_planner(build_snapshot(docs), "n1", None)
        assert planner is not None
        result = self.backend.enforce(planner, dry_run=False)
        assert result.applied, result.problems
        return result

    def close(self) -> None:
        self.kernel.close()


@contextlib.contextmanager
def passes() -> Iterator[Passes]:
    made = Passes()
    try:
        yield made
    finally:
        made.close()


FLOWS = {  # who sends to whom, per direction: (client netns, server netns, server address)
    "egress": lambda name: (NODE, PEER, PEER_IP) if name == "node" else (PODS[name][0], PEER, PEER_IP),
    "ingress": lambda name: (PEER, NODE, NODE_IP) if name == "node" else (PEER, PODS[name][0], PODS[name][1]),
}


def start(direction: str, names: list[str], seconds: float, interval: float = 0.5, first_port: int = 5311) -> Any:
    """iperf3 flows at once (the node's own flow runs from or to the node's namespace); call the result to wait
    for their JSON reports, by name."""
    servers, clients = [], {}
    for index, name in enumerate(names):
        client, server, address = FLOWS[direction](name)
        port = str(first_port + index)
        servers.append(subprocess.Popen(["ip", "netns", "exec", server, "iperf3", "-s", "-1", "-J", "-p", port]))
        time.sleep(0.05)
        clients[name] = (client, address, port)
    time.sleep(0.3)
    running = {
        name: subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                client,
                "iperf3",
                "-c",
                address,
                "-p",
                port,
                "-t",
                str(seconds),
                "-i",
                str(interval),
                "-J",
                "--get-server-output",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for name, (client, address, port) in clients.items()
    }
    started = time.monotonic()

    def collect() -> tuple[float, dict[str, dict[str, Any]]]:
        reports = {name: json.loads(run.communicate(timeout=seconds + 30)[0]) for name, run in running.items()}
        for server in servers:
            server.wait(timeout=10)
        return started, reports

    return collect


def interval_wire(report: dict[str, Any], after: float) -> list[float]:
    """The receiver's per-interval rates on the wire from ``after`` seconds into the run on (the server's report,
    which the client fetched: what arrived, not what the sending socket took in)."""
    received = report["server_output_json"]["intervals"]
    scale = wire_scale(report)
    return [float(i["sum"]["bits_per_second"]) * scale for i in received if i["sum"]["start"] >= after]


def whole_seconds(halves: list[float]) -> list[float]:
    """Consecutive half-second rates as whole seconds (an odd last half dropped): the sender's half-second figures
    alternate around a shaped rate (35M / 45M at 40M: what the socket took in each half, not what the wire
    carried)."""
    return [(first + second) / 2 for first, second in zip(halves[::2], halves[1::2], strict=False)]


def wire_settled(report: dict[str, Any]) -> float:
    """The median whole second on the wire past a run's first (the receiver's figures, :func:`interval_wire`): a
    rate once TCP's slow start is over, which a stall of a busy machine in one second does not move."""
    seconds = sorted(whole_seconds(interval_wire(report, 1.0)))
    return seconds[len(seconds) // 2]


@pytest.mark.parametrize("direction", ["egress", "ingress"])
def test_the_total_holds_with_the_nodes_own_traffic_busy_and_every_request_is_met(node: None, direction: str) -> None:
    """LS pods asking 50M and 30M (their class asks only 20M), a BE pod and the node's own traffic, all flat out
    through a 100M node: each LS pod gets its request and the four together stay within the total (before: the
    system class's rate ignored the pods' requests, and the node carried 160M through a 100M root; a fair share
    would give each of the four 25M). A request is a rate: met in the steady state (:func:`wire_settled`); the
    total holds over the whole run (its average: a stall only lowers it). The average alone fell short of a
    request by 3-5 % on a machine busy with the rest of the suite (48.4M of 50M)."""
    with passes() as agent_passes:
        agent_passes.apply(guarantee_documents({"ls": "50M", "ls2": "30M", "be": None}))
        _, reports = start(direction, ["ls", "ls2", "be", "node"], seconds=4)()
    rates = {name: wire(report) for name, report in reports.items()}
    steady = {name: wire_settled(report) for name, report in reports.items()}
    assert steady["ls"] >= 0.97 * 50 * M, (steady, rates)
    assert steady["ls2"] >= 0.97 * 30 * M, (steady, rates)
    assert sum(rates.values()) <= 1.03 * 100 * M, rates
    assert rates["node"] > 0 and rates["be"] > 0, rates  # no one starved


@pytest.mark.parametrize("direction", ["egress", "ingress"])
def test_a_request_raised_in_place_is_met_within_a_second(node: None, direction: str) -> None:
    """ls has no request and borrows what the node's idle class leaves (its leaf runs far above its rate); ls2
    asks 50M, be is busy. ls's request raised to 40M: the requests then take the whole 100M, nothing is left to
    borrow, and from one second after the pass every second carries ls's 40M (before: a leaf changed in place
    kept its debt and got 10M for 8-9 s).

    The node's own traffic stays idle: busy, it would take its class's assured rate from the start and leave ls,
    which asks nothing, HTB's minimum (1 kB/s) — no borrowing, so no debt to test, and a TCP backed off for
    seconds (a pod without a request gets nothing while the node is saturated: by design). After the raise the
    system class is left HTB's minimum: a flow of the node's started then waits in SYN-SENT until the pods stop."""
    with passes() as agent_passes:
        agent_passes.apply(guarantee_documents({"ls": None, "ls2": "50M", "be": None}))
        collect = start(direction, ["ls", "ls2", "be"], seconds=7)
        time.sleep(3)
        raised = time.monotonic()
        agent_passes.apply(guarantee_documents({"ls": "40M", "ls2": "50M", "be": None}))
        applied = time.monotonic()
        started, reports = collect()
    borrowed = interval_wire(reports["ls"], 1.0)[: int((raised - started - 1.0) / 0.5)]
    assert borrowed and sum(borrowed) / len(borrowed) >= 5 * M, borrowed  # the premise: it borrowed, far above 1 kB/s
    halves = interval_wire(reports["ls"], applied - started + 1.0)
    after = whole_seconds(halves)
    assert after and min(after) >= 0.9 * 40 * M, halves
    assert sum(after) / len(after) >= 0.97 * 40 * M, halves


@pytest.mark.parametrize("direction", ["egress", "ingress"])
def test_a_removed_request_is_never_starved_and_a_reused_address_starts_afresh(node: None, direction: str) -> None:
    """ls asks 40M under load (ls2 30M, be busy; the node's own traffic idle, so its class's rate is there to
    borrow), then its request is removed: it borrows at once, at LS's priority (before: its leaf kept the debt of
    its 40M rate and sent 0 bits/s for 20 s). Then the pod is replaced by another at the same address asking 40M:
    met within a second (before: the newcomer inherited the old leaf's debt)."""
    with passes() as agent_passes:
        agent_passes.apply(guarantee_documents({"ls": "40M", "ls2": "30M", "be": None}))
        collect = start(direction, ["ls", "ls2", "be"], seconds=10)
        time.sleep(2.5)
        agent_passes.apply(guarantee_documents({"ls": None, "ls2": "30M", "be": None}))
        removed = time.monotonic()
        time.sleep(3.5)
        agent_passes.apply(guarantee_documents({"ls#2": "40M", "ls2": "30M", "be": None}))
        replaced = time.monotonic()
        started, reports = collect()
    windows = interval_wire(reports["ls"], removed - started + 0.5)[: int((replaced - removed - 0.5) / 0.5)]
    assert windows and min(windows) >= 10 * M, windows  # never starved: it borrows what system leaves idle
    halves = interval_wire(reports["ls"], replaced - started + 1.0)
    after = whole_seconds(halves)
    assert after and min(after) >= 0.9 * 40 * M, halves
    assert sum(after) / len(after) >= 0.97 * 40 * M, halves


def test_a_restart_under_traffic_changes_nothing_and_cleanup_restores_the_interface(node: None, tmp_path: Path) -> None:
    before = kernel_objects()
    assert agent(tmp_path, docs=documents())["operations"] > 0
    shaped = kernel_objects()
    pairs = from_pods("ls")
    servers = subprocess.Popen(["ip", "netns", "exec", PEER, "iperf3", "-s", "-1", "-p", "5301"])
    time.sleep(0.3)
    client = subprocess.Popen(
        ["ip", "netns", "exec", pairs[0][0], "iperf3", "-c", PEER_IP, "-p", "5301", "-t", "4", "-i", "0.5", "-J"],
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(1)
    restarts = [agent(tmp_path, docs=documents())["operations"] for _ in range(3)]  # three fresh processes
    report = json.loads(client.communicate(timeout=40)[0])
    servers.wait(timeout=10)
    assert restarts == [0, 0, 0]  # nothing torn down, nothing added twice
    assert kernel_objects() == shaped
    rates = [interval["sum"]["bits_per_second"] for interval in report["intervals"]]
    assert min(rates) > 0.5 * 60 * M, rates  # no half second without shaping-speed traffic: never interrupted
    removed = agent(tmp_path, "--cleanup")["removed"]
    assert removed == [
        "root qdisc 4e41: on up0",
        "ingress redirect on up0",
        "ingress qdisc on up0",
        "device netaware-ifb",
        "nftables table ip netaware",
    ]
    assert kernel_objects() == before


def test_a_foreign_root_qdisc_is_reported_and_left_alone(node: None, tmp_path: Path) -> None:
    sh("tc", "qdisc", "add", "dev", "up0", "root", "handle", "1:", "pfifo", netns=NODE)
    answer = agent(tmp_path, docs=documents())
    assert not answer["applied"]
    assert any("root qdisc pfifo 1: the agent did not create" in problem for problem in answer["problems"])
    assert "qdisc pfifo 1: root" in sh("tc", "qdisc", "show", "dev", "up0", netns=NODE).stdout
    assert "4e41:30" in sh("tc", "class", "show", "dev", "netaware-ifb", netns=NODE).stdout  # ingress still shaped
    agent(tmp_path, "--cleanup")
    assert "qdisc pfifo 1: root" in sh("tc", "qdisc", "show", "dev", "up0", netns=NODE).stdout


def test_a_missing_interface_is_one_line(node: None, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "operators.cli", "agent", "--netns", NODE, "--interface", "nope0", "--cleanup"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == ["error: --interface: device 'nope0' does not exist"]


# ---- the live agent against the API emulator ------------------------------------------------------------------


async def metric(session: aiohttp.ClientSession, port: int, name: str, **labels: str) -> float | None:
    async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
        text = await response.text()
    wanted = ",".join(f'{key}="{value}"' for key, value in labels.items())
    for line in text.splitlines():
        if line.startswith(name + ("{" + wanted + "}" if wanted else " ")) or (
            wanted and line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items())
        ):
            return float(line.rsplit(" ", 1)[1])
    return None


async def until(check: Any, seconds: float = 10.0) -> float:
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if await check():
            return time.monotonic() - started
        await asyncio.sleep(0.1)
    raise AssertionError(f"not within {seconds} s")


def class_rate(device: str, minor: str) -> str:
    found = re.search(
        rf"class htb 4e41:{minor} .*? rate (\S+)", sh("tc", "class", "show", "dev", device, netns=NODE).stdout
    )
    return found.group(1) if found else ""


async def test_the_live_agent_follows_changes_incrementally_and_publishes_measured_usage(
    node: None, emulator: Any, api: Any, unused_tcp_port: int
) -> None:
    for doc in documents(capped=False):
        plural = {"Node": "/api/v1/nodes", "NodeSLO": "/apis/slo.koordinator.sh/v1alpha1/nodeslos"}.get(
            doc["kind"], "/api/v1/namespaces/default/pods"
        )
        status, created = await api.call("POST", plural, doc)
        assert status == 201, created
        if doc["kind"] == "Pod":  # the emulator keeps what was posted; the kubelet's status comes by the subresource
            await api.call(
                "PATCH",
                f"{plural}/{doc['metadata']['name']}/status",
                {"status": doc["status"]},
                "application/merge-patch+json",
            )
    port = unused_tcp_port
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "operators.cli",
        "agent",
        "--server",
        emulator.base_url,
        "--node-name",
        "n1",
        "--netns",
        NODE,
        "--interface",
        "up0",
        "--report-interval",
        "1",
        "--health-port",
        str(port),
        "--listen-address",
        "127.0.0.1",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with aiohttp.ClientSession() as session:

            async def enforced() -> bool:
                with contextlib.suppress(aiohttp.ClientError):
                    return await metric(session, port, "netaware_agent_enforced") == 1
                return False

            await until(enforced, 20)
            operations = await metric(session, port, "netaware_agent_netlink_operations_total")
            assert class_rate("up0", "30") == "60Mbit"

            # a NodeSLO change: the classes whose numbers moved, changed in place — ls (60M -> 40M), system (what
            # ls and be leave: 20M -> 40M) and the host leaf under it (the node's own traffic: what system's pods
            # leave), in each direction: 6
            slo_path = "/apis/slo.koordinator.sh/v1alpha1/nodeslos/n1"
            patch = {
                "spec": {
                    "resourceQOSStrategy": {
                        "lsClass": {"networkQOS": {"egressRequest": "40M", "ingressRequest": "40M"}}
                    }
                }
            }
            await api.call("PATCH", slo_path, patch, "application/merge-patch+json")

            async def changed() -> bool:
                return class_rate("up0", "30") == "40Mbit" and class_rate("netaware-ifb", "30") == "40Mbit"

            took = await until(changed)
            assert took < 3
            await asyncio.sleep(0.3)
            after = await metric(session, port, "netaware_agent_netlink_operations_total")
            assert after is not None and operations is not None and after - operations == 6

            # a new pod: one leaf and one classifier entry per direction; deleted: the same four removed
            extra = documents()[-1]
            await api.call("POST", "/api/v1/namespaces/default/pods", extra)
            await api.call(
                "PATCH",
                "/api/v1/namespaces/default/pods/capped/status",
                {"status": extra["status"]},
                "application/merge-patch+json",
            )

            async def elements(count: int) -> bool:
                listed = json.loads(sh("nft", "-j", "list", "map", "ip", "netaware", "egress", netns=NODE).stdout)
                found = [item["map"].get("elem", []) for item in listed["nftables"] if "map" in item]
                return len(found[0]) == count

            await until(lambda: elements(3))
            await asyncio.sleep(0.3)
            grown = await metric(session, port, "netaware_agent_netlink_operations_total")
            assert grown == after + 4
            await api.call("DELETE", "/api/v1/namespaces/default/pods/capped")
            await until(lambda: elements(2))
            await asyncio.sleep(0.3)
            assert await metric(session, port, "netaware_agent_netlink_operations_total") == grown + 4

            # measured: the agent's per-pod rate against iperf3's own, and the NodeSLO's networkUsage
            samples: list[float] = []

            async def sample() -> None:
                await asyncio.sleep(1.5)
                for _ in range(4):
                    value = await metric(
                        session, port, "netaware_agent_pod_rate_bits_per_second", direction="egress", pod="default/ls"
                    )
                    samples.append(value or 0.0)
                    await asyncio.sleep(1)

            sampling = asyncio.ensure_future(sample())
            (report,) = await asyncio.to_thread(iperf, from_pods("ls"), 7)
            await sampling
            # the agent's median sample (1.5 to 4.5 s in) against iperf3's median second after the first (its
            # average over the run counts the slow start: 5.2 % below a steady 104.8 Mbit/s once on a busy machine)
            measured, steady = sorted(samples)[len(samples) // 2], wire_steady(report)
            assert abs(measured - steady) <= 0.05 * steady, (samples, steady, wire(report))

            _, slo = await api.call("GET", slo_path)
            usage = slo["status"]["networkUsage"]
            assert usage["pods"]["default/ls"]["egress"] > 50 * M
            assert usage["egress"] >= usage["pods"]["default/ls"]["egress"]
            assert usage["windowSeconds"] > 0

            # the descheduler reads it: n1 (busy, measured) is high, an idle n2 low
            document = copy.deepcopy(DEFAULT_POLICY)
            document["profiles"][0]["pluginConfig"][0]["args"] = {
                "lowThresholds": {"netBandwidth": 20},
                "highThresholds": {"netBandwidth": 40},
                "accountingMode": "combined",
                "usage": {"netBandwidth": "measured"},
            }
            policy = parse_policy(document)
            idle = {
                **slo,
                "metadata": {"name": "n2"},
                "status": {"networkUsage": {**usage, "ingress": 0, "egress": 1 * M, "pods": {}}},
            }
            _, n1 = await api.call("GET", "/api/v1/nodes/n1")
            n2 = {**n1, "metadata": {**n1["metadata"], "name": "n2", "uid": "n2"}}
            builder = SnapshotBuilder()
            for raw in (n1, n2, slo, idle):
                builder.add(raw)
            now = datetime.datetime.now(datetime.UTC)
            classes = deschedule_plan(builder.build(), policy, now).to_json()["nodes"]
            assert classes["n1"]["class"] == "high" and classes["n2"]["class"] == "low", classes
    finally:
        exited = process.returncode
        if exited is None:
            process.terminate()
        _, stderr = await process.communicate()
        assert exited is None, f"the agent exited early ({exited}): {stderr.decode()[-2000:]}"
        assert process.returncode == 0, stderr.decode()[-2000:]


async def test_publish_capacity_gives_an_unannotated_node_its_nics_speed_and_shapes_to_it(
    node: None, emulator: Any, api: Any
) -> None:
    """--publish-capacity: the uplink veth's speed (10000 Mbit/s) becomes the node's annotation, once, and the tree
    follows it; a node that has the annotation keeps its own."""
    docs = documents(capped=False)
    del docs[0]["metadata"]["annotations"]["node.koordinator.sh/network-bandwidth"]
    for doc in docs:
        plural = {"Node": "/api/v1/nodes", "NodeSLO": "/apis/slo.koordinator.sh/v1alpha1/nodeslos"}.get(
            doc["kind"], "/api/v1/namespaces/default/pods"
        )
        status, created = await api.call("POST", plural, doc)
        assert status == 201, created
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "operators.cli", "agent", "--server", emulator.base_url, "--node-name", "n1"),
        *("--netns", NODE, "--interface", "up0", "--publish-capacity", "--health-port", "0"),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:

        async def annotated() -> bool:
            _, found = await api.call("GET", "/api/v1/nodes/n1")
            return bool(found["metadata"].get("annotations", {}).get("node.koordinator.sh/network-bandwidth"))

        await until(annotated, 20)
        _, found = await api.call("GET", "/api/v1/nodes/n1")
        assert found["metadata"]["annotations"]["node.koordinator.sh/network-bandwidth"] == str(10_000 * M)

        async def shaped() -> bool:
            return class_rate("up0", "1") == "10Gbit"

        await until(shaped, 10)
    finally:
        if process.returncode is None:
            process.terminate()
        _, stderr = await process.communicate()
        assert process.returncode == 0, stderr.decode()[-2000:]


async def test_publish_capacity_on_a_nic_without_a_speed_is_an_event_never_zero(
    node: None, emulator: Any, api: Any
) -> None:
    """A bridge without ports reports no speed (-1): the node gets no annotation (not 0), an Event says why, nothing
    is shaped."""
    docs = documents(capped=False)
    del docs[0]["metadata"]["annotations"]["node.koordinator.sh/network-bandwidth"]
    for doc in docs[:2]:
        plural = {"Node": "/api/v1/nodes", "NodeSLO": "/apis/slo.koordinator.sh/v1alpha1/nodeslos"}[doc["kind"]]
        status, created = await api.call("POST", plural, doc)
        assert status == 201, created
    sh("ip", "-n", NODE, "link", "add", "nospeed0", "type", "bridge")
    sh("ip", "-n", NODE, "link", "set", "nospeed0", "up")
    assert sh("cat", "/sys/class/net/nospeed0/speed", netns=NODE).stdout.strip() == "-1"
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "operators.cli", "agent", "--server", emulator.base_url, "--node-name", "n1"),
        *("--netns", NODE, "--interface", "nospeed0", "--publish-capacity", "--health-port", "0"),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:

        async def reasons() -> list[str]:
            _, events = await api.call("GET", "/api/v1/namespaces/default/events")
            return [event["message"] for event in events["items"] if event["reason"] == "NetworkSpeedUnknown"]

        async def reported() -> bool:
            return bool(await reasons())

        await until(reported, 20)
        (message,) = await reasons()
        assert message == (
            "--publish-capacity: /sys/class/net/nospeed0/speed gives no speed (a virtual NIC); "
            "set node.koordinator.sh/network-bandwidth on the node"
        )
        _, found = await api.call("GET", "/api/v1/nodes/n1")
        assert "node.koordinator.sh/network-bandwidth" not in found["metadata"].get("annotations", {})
        assert "4e41" not in sh("tc", "qdisc", "show", "dev", "nospeed0", netns=NODE).stdout
    finally:
        if process.returncode is None:
            process.terminate()
        _, stderr = await process.communicate()
        assert process.returncode == 0, stderr.decode()[-2000:]
