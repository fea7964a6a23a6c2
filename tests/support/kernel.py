"""The real-kernel tests' world: two network namespaces joined by a veth pair (the `node` fixture makes and
removes them), pods' addresses, shell and iperf3 helpers, and the receiver's per-second figures."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from hack.control_plane.shell import sh
from tests.support.prerequisites import network_namespaces, require

NODE = "naw-node"


PEER = "naw-peer"


PODS = {
    "ls": ("naw-ls", "10.244.9.2"),
    "be": ("naw-be", "10.244.9.3"),
    "capped": ("naw-capped", "10.244.9.4"),
    "ls2": ("naw-ls2", "10.244.9.5"),
}


PEER_IP = "192.168.209.2"


NODE_IP = "192.168.209.1"  # the node's own address on the uplink: its own traffic


M = 1_000_000


@pytest.fixture(name="node")
def kernel_node() -> Iterator[None]:
    require(network_namespaces())
    for tool in ("nft", "iperf3"):
        assert shutil.which(tool), f"{tool} is missing: hack/control-plane/build.sh installs it"
    names = [NODE, PEER, *(name for name, _ in PODS.values())]
    for name in names:
        sh("ip", "netns", "del", name, check=False)
        sh("ip", "netns", "add", name)
        sh("ip", "-n", name, "link", "set", "lo", "up")
    try:
        sh("ip", "-n", NODE, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", NODE, "addr", "add", "10.244.9.1/24", "dev", "br0")
        sh("ip", "-n", NODE, "link", "set", "br0", "up")
        for pod, (name, address) in PODS.items():
            sh("ip", "-n", NODE, "link", "add", f"v{pod}", "type", "veth", "peer", "name", "eth0", "netns", name)
            sh("ip", "-n", NODE, "link", "set", f"v{pod}", "master", "br0", "up")
            sh("ip", "-n", name, "addr", "add", f"{address}/24", "dev", "eth0")
            sh("ip", "-n", name, "link", "set", "eth0", "up")
            sh("ip", "-n", name, "route", "add", "default", "via", "10.244.9.1")
        sh("ip", "-n", NODE, "link", "add", "up0", "type", "veth", "peer", "name", "eth0", "netns", PEER)
        sh("ip", "-n", NODE, "addr", "add", f"{NODE_IP}/24", "dev", "up0")
        sh("ip", "-n", NODE, "link", "set", "up0", "up")
        sh("ip", "-n", PEER, "addr", "add", f"{PEER_IP}/24", "dev", "eth0")
        sh("ip", "-n", PEER, "link", "set", "eth0", "up")
        sh("ip", "-n", PEER, "route", "add", "10.244.9.0/24", "via", "192.168.209.1")
        sh("ip", "-n", NODE, "route", "add", "default", "via", PEER_IP)
        sh("sysctl", "-qw", "net.ipv4.ip_forward=1", netns=NODE)
        yield
    finally:
        for name in names:  # the namespaces take their devices, qdiscs, tables and iperf3 servers with them
            subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, check=False)
            for pid in sh("ip", "netns", "pids", name, check=False).stdout.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), 9)
            sh("ip", "netns", "del", name, check=False)


def iperf(pairs: list[tuple[str, str, str]], seconds: float = 3, interval: float = 1) -> list[dict[str, Any]]:
    """iperf3 clients at once, each (client netns, server netns, server address); their JSON reports."""
    servers = []
    for index, (_, server, _) in enumerate(pairs):
        port = str(5301 + index)
        servers.append(subprocess.Popen(["ip", "netns", "exec", server, "iperf3", "-s", "-1", "-J", "-p", port]))
    time.sleep(0.3)
    clients = [
        subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                client,
                "iperf3",
                "-c",
                address,
                "-p",
                str(5301 + index),
                "-t",
                str(seconds),
                "-i",
                str(interval),
                "-J",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for index, (client, _, address) in enumerate(pairs)
    ]
    reports = [json.loads(client.communicate(timeout=seconds + 30)[0]) for client in clients]
    for server in servers:
        server.wait(timeout=10)
    return reports


def wire_scale(report: dict[str, Any]) -> float:
    """What an iperf3 run's payload rate is multiplied by to be the rate on the wire: its per-segment headers."""
    mss = report["start"].get("tcp_mss_default") or 1448
    return float(mss + 66) / mss


def wire(report: dict[str, Any]) -> float:
    """bits/s on the wire of an iperf3 run (receiver's payload rate scaled by the per-segment headers)."""
    return float(report["end"]["sum_received"]["bits_per_second"]) * wire_scale(report)


def wire_steady(report: dict[str, Any]) -> float:
    """bits/s on the wire in an iperf3 run's steady state: the median of its per-second rates after the first second
    (:func:`wire`'s average counts TCP's slow start and any stall of a busy machine; a sampler of the middle does
    not)."""
    rates = sorted(float(interval["sum"]["bits_per_second"]) for interval in report["intervals"][1:])
    return rates[len(rates) // 2] * wire_scale(report)


def from_pods(*names: str) -> list[tuple[str, str, str]]:
    return [(PODS[name][0], PEER, PEER_IP) for name in names]
