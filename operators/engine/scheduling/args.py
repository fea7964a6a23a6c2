"""The plugins' arguments as the cycle uses them (read from a KubeSchedulerConfiguration by ``config``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from operators.api import keys
from operators.api.quantity import Quantity


@dataclass(frozen=True)
class NetworkOverheadArgs:
    namespaces: tuple[str, ...] = ("default",)
    weights_name: str = keys.USER_DEFINED_WEIGHT
    network_topology_name: str = "nt-default"


@dataclass(frozen=True)
class NetworkBandwidthArgs:
    accounting_mode: Literal["duplex", "combined"] = "duplex"
    default_node_bandwidth: Quantity | None = None


@dataclass(frozen=True)
class NodeResourcesAllocatableArgs:
    mode: Literal["Least", "Most"] = "Least"
    resources: tuple[tuple[str, int], ...] = (("cpu", 1 << 20), ("memory", 1))  # upstream's defaults
