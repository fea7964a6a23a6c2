"""The thesis' scenarios (seed 004 §6): generated nodes of one shape and pods of a few shapes."""

from __future__ import annotations

from dataclasses import dataclass

from operators.api.quantity import Quantity


@dataclass(frozen=True)
class PodShape:
    count: int
    cpu: int = 0  # milli, requested
    memory: int = 0  # bytes, requested
    ingress: int = 0  # bits/s the NetworkBandwidth plugin counts (request, else limit)
    egress: int = 0
    label: str = ""


@dataclass(frozen=True)
class NodeShape:
    cpu: int = 32_000
    memory: int = 256 * 1024**3
    pods: int = 110
    bandwidth: int = 1024**3  # 1Gi


@dataclass(frozen=True)
class Scenario:
    name: str
    nodes: int
    node: NodeShape
    pods: tuple[PodShape, ...]


def _network_pods(count: int, request: str) -> PodShape:
    amount = Quantity.parse(request).value()
    return PodShape(count, ingress=amount, egress=amount, label=f"network {request}+{request}")


def scenario(name: str, nodes: int | None = None, pods: int | None = None) -> Scenario:
    """thesis-1..4 (seed 004 §6); ``pods`` overrides the number of network pods."""
    network = pods if pods is not None else 1500
    cpu_pods = PodShape(1600, cpu=2000, memory=16 * 1024**3, label="2 CPU / 16Gi")
    shapes = {
        # guaranteed bandwidth: request = limit = 100M each way
        "thesis-1": (_network_pods(network, "100M"),),
        # requests 50M, limits 100M: the plugin counts the request
        "thesis-2": (_network_pods(network, "50M"),),
        "thesis-3": (cpu_pods, _network_pods(network, "100M")),
        # both burstable: the cpu pods' limits do not count for scheduling, the network pods' requests do
        "thesis-4": (cpu_pods, _network_pods(network, "50M")),
    }
    if name not in shapes:
        raise ValueError(f"unknown scenario {name!r}; expected one of {', '.join(shapes)}")
    return Scenario(name, nodes if nodes is not None else 200, NodeShape(), shapes[name])


SCENARIOS = ("thesis-1", "thesis-2", "thesis-3", "thesis-4")
