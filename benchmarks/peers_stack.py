"""The schedulers a side-by-side on the real control plane compares, started once beside the control plane:
netaware as the chart deploys it (the operator with plans, the extender called by a kube-scheduler profile of
its own, the webhook admitting netaware's namespaces) and scheduler-plugins' binary twice (``sp-network``:
upstream's sample NetworkOverhead configuration with TopologicalSort; ``sp-default``: its default profile).
Shared by :mod:`benchmarks.bench_peers` and :mod:`benchmarks.bench_burst_real`.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from benchmarks.bench_real_scheduler import start_webhook
from benchmarks.support import loopback_tls, tls_flags, wait_listening
from hack.control_plane.cluster import ControlPlane
from hack.control_plane.objects import extender_entry, placement_webhook
from hack.control_plane.ports import free_port

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOPOLOGY = "net-topology-test"  # the NetworkTopology every column reads, one per namespace


def network_args(*namespaces: str) -> dict[str, Any]:
    """NetworkOverhead's arguments: :data:`TOPOLOGY` of ``namespaces``, its UserDefined costs."""
    return {"namespaces": list(namespaces), "weightsName": "UserDefined", "networkTopologyName": TOPOLOGY}


@dataclass
class Stack:
    """The started processes (the operator, the extender, the webhook; the schedulers are the plane's) and every
    process id to read CPU seconds from, by name."""

    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    pids: dict[str, int] = field(default_factory=dict)
    extender_port: int = 0  # its /filter, /prioritize and /metrics, over TLS on loopback

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
            process.wait(timeout=30)


def start(
    plane: ControlPlane,
    folder: pathlib.Path,
    peers: str,
    netaware: Sequence[str],
    plan_affinity: str = "required",
    plan_window_ms: int = 1000,
    admitted: Sequence[str] | None = None,
    peer_schedulers: Sequence[str] = ("sp-network", "sp-default"),
    placed_at_admission: Sequence[str] = (),
    placement: str = "in-webhook",
) -> Stack:
    """Start the stack on ``plane``: the peers' schedulers read :data:`TOPOLOGY` of namespace ``peers``, netaware's
    of ``netaware`` (the namespaces its webhook admits, unless ``admitted`` names them); of scheduler-plugins'
    schedulers, those in ``peer_schedulers`` only; the pods of plan-ungated AppGroups in ``placed_at_admission``
    placed by the extender as they are created: asked by netaware's webhook (``placement`` ``in-webhook``: one
    call a pod), or registered as a webhook of its own (``own-webhook``: the API server calls netaware's webhook
    again after it). The logs go to ``folder``."""
    stack = Stack()
    operator = ["run", "--components", "appgroup,networktopology,nodebandwidth", "--accounting-mode", "combined",
                "--no-leader-elect", "--health-port", "0", "--appgroup-plans",
                "--plan-config", str(folder / "netaware-config.yaml"),
                "--plan-affinity", plan_affinity, "--plan-window-ms", str(plan_window_ms)]  # fmt: skip
    ca_data = loopback_tls(folder)
    profile = yaml.safe_load((ROOT / "hack" / "configs" / "scheduler-config.yaml").read_text())
    for entry in profile["profiles"][0]["pluginConfig"]:
        if entry["name"] == "NetworkOverhead":
            entry["args"] = network_args(*netaware)
        if entry["name"] == "NetworkBandwidth":
            entry["args"]["accountingMode"] = "combined"
    (folder / "netaware-config.yaml").write_text(yaml.safe_dump(profile))
    port = stack.extender_port = free_port()
    extender = ["extender", "--listen-address", "127.0.0.1", "--port", str(port)]
    extender += ["--config", str(folder / "netaware-config.yaml"), *tls_flags(folder)]
    extender += ["--place-at-admission"] if placed_at_admission else []
    try:
        for command in (operator, extender):
            stack.processes.append(subprocess.Popen(
                [sys.executable, "-m", "operators.cli", *command, "--kubeconfig", str(plane.kubeconfig)],
                cwd=ROOT, stdout=(folder / f"{command[0]}.log").open("w"), stderr=subprocess.STDOUT,
            ))  # fmt: skip
        admits = netaware if admitted is None else admitted
        asking: list[str] = []
        if placed_at_admission:
            wait_listening(port, "extender", folder / "extender.log", stack.processes[1])
        if placed_at_admission and placement == "in-webhook":
            # the placement's own webhook was given 5 s: the webhook that asks it is given as much (at 1 s, a
            # quarter of a burst's placements came late and their pods were planned when kube-scheduler asked)
            asking = ["--placement-url", f"https://127.0.0.1:{port}/place-pods",
                      "--placement-ca-file", str(folder / "ca.crt"), "--placement-timeout", "4"]  # fmt: skip
        elif placed_at_admission:
            plane.kubectl("apply", "-f", "-", stdin=json.dumps(placement_webhook(port, ca_data, placed_at_admission)))
        stack.processes.append(  # bandwidth resources, gates
            start_webhook(plane, folder, ca_data, *admits, flags=asking, timeout_seconds=5 if asking else 2)
        )
        names = ("operator", "extender", "webhook")
        stack.pids.update({name: process.pid for name, process in zip(names, stack.processes, strict=True)})
        entry = extender_entry(port, ca_data, weight=20, ignorable=False, timeout="10s")
        scheduler = plane.scheduler_config([{"schedulerName": "netaware"}], [entry])
        scheduler["percentageOfNodesToScore"] = 100  # as the chart's second scheduler (secondScheduler.*)
        (folder / "netaware-scheduler.yaml").write_text(json.dumps(scheduler))
        plane.start_scheduler("netaware", folder / "netaware-scheduler.yaml")
        upstream = {
            "schedulerName": "sp-network",
            "plugins": {"multiPoint": {"enabled": [{"name": "NetworkOverhead", "weight": 5}],
                                       "disabled": [{"name": "NodeResourcesFit"}]},
                        "queueSort": {"enabled": [{"name": "TopologicalSort"}], "disabled": [{"name": "*"}]}},
            "pluginConfig": [{"name": "TopologicalSort", "args": {"namespaces": [peers]}},
                             {"name": "NetworkOverhead", "args": network_args(peers)}],
        }  # fmt: skip
        default = {"schedulerName": "sp-default"}
        for name, profile in (("sp-network", upstream), ("sp-default", default)):
            if name in peer_schedulers:  # one not compared stays off: idle, it still follows every pod and node
                (folder / f"{name}.yaml").write_text(json.dumps(plane.scheduler_config([profile], [])))
                plane.start_scheduler(name, folder / f"{name}.yaml", binary="scheduler-plugins")
    except BaseException:
        stack.stop()
        raise
    stack.pids.update(plane.pids)
    return stack
