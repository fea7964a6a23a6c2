"""kube-scheduler's NodePorts (pure): a pod's host ports (:attr:`SchedulingSpec.host_ports`) must not conflict with
the host ports of the pods on the node — the same protocol and port on the same IP, or either IP 0.0.0.0."""

from __future__ import annotations

from collections.abc import Iterable

from operators.engine.cluster.kube.terms import ALL_IPS, HostPort

NAME = "NodePorts"
CONFLICT = "node(s) didn't have free ports for the requested pod ports"


def conflicts(wanted: Iterable[HostPort], used: Iterable[tuple[HostPort, ...]]) -> bool:
    """Whether any of ``wanted`` conflicts with the ports in ``used`` (upstream's HostPortInfo.CheckConflict)."""
    taken = {(port.ip, port.protocol, port.port) for ports in used for port in ports}
    if not taken:
        return False
    any_ip = {(protocol, number) for _, protocol, number in taken}
    on_all = {(protocol, number) for ip, protocol, number in taken if ip == ALL_IPS}
    for port in wanted:
        if port.ip == ALL_IPS:
            if (port.protocol, port.port) in any_ip:
                return True
        elif (port.protocol, port.port) in on_all or (port.ip, port.protocol, port.port) in taken:
            return True
    return False
