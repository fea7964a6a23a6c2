"""The simulated cluster as columns (numpy): allocatable, requested and used bandwidth per node, mutated as pods bind;
built from generated shapes or from a snapshot with the bandwidth model."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from operators.api.errors import FieldError
from operators.api.quantity import Quantity
from operators.engine.cluster.bandwidth import node_capacity, pod_demand, slo_network_totals
from operators.engine.cluster.resources import allocatable_amounts, requested_cpu_memory
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.simulation.scenarios import NodeShape

Ints = npt.NDArray[np.int64]

# Amounts from a snapshot are capped here: sums of a node's requests stay inside int64, and a node with
# more than 2**50 millicores or bytes is effectively unlimited for the arithmetic.
AMOUNT_CAP = 2**50


def _bounded(amount: int) -> int:
    return max(0, min(amount, AMOUNT_CAP))


DEFAULT_MILLI_CPU = 100  # kube-scheduler's non-zero substitutes for a missing request (scoring only)


DEFAULT_MEMORY = 200 * 1024 * 1024


@dataclass
class Cluster:
    names: list[str]
    cpu: Ints
    memory: Ints
    pods: Ints
    bandwidth: Ints  # bits/s per direction (NIC capacity)
    requested_cpu: Ints
    requested_memory: Ints
    nonzero_cpu: Ints
    nonzero_memory: Ints
    pod_count: Ints
    used_in: Ints
    used_out: Ints
    placements: list[tuple[int, int]] = field(default_factory=list)  # (pod index, node), scheduled pods

    @classmethod
    def generated(cls, count: int, shape: NodeShape) -> Cluster:
        def full(value: int) -> Ints:
            return np.full(count, value, dtype=np.int64)

        def zeros() -> Ints:
            return np.zeros(count, dtype=np.int64)

        return cls(
            [f"node-{i:05d}" for i in range(count)],
            full(shape.cpu),
            full(shape.memory),
            full(shape.pods),
            full(shape.bandwidth),
            zeros(),
            zeros(),
            zeros(),
            zeros(),
            zeros(),
            zeros(),
            zeros(),
        )

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot, default_bandwidth: int) -> Cluster:
        """The snapshot's nodes with the requests and bandwidth of the pods already on them."""
        nodes = snapshot.nodes
        cluster = cls.generated(len(nodes), NodeShape())
        cluster.names = [node.name for node in nodes]
        totals = slo_network_totals(snapshot)
        fallback = Quantity(default_bandwidth * 10**9)
        for i, node in enumerate(nodes):
            allocatable = allocatable_amounts(node)
            cluster.cpu[i] = _bounded(allocatable["cpu"] or 0)
            cluster.memory[i] = _bounded(allocatable["memory"] or 0)
            cluster.pods[i] = _bounded(allocatable["pods"] or 0)
            try:
                found = node_capacity(node, totals.get(node.name), fallback)
                cluster.bandwidth[i] = found.bits if found is not None else 0
            except FieldError as error:
                raise FieldError(f"Node {node.name}: {error.path}", error.value, error.reason) from None
            for pod in snapshot.pods_by_node.get(node.name, ()):
                if pod.is_terminal:
                    continue
                cpu, memory = requested_cpu_memory(pod)
                try:
                    ingress, egress = pod_demand(pod.annotations, pod.requests)
                except FieldError as error:
                    raise FieldError(f"Pod {pod.key}: {error.path}", error.value, error.reason) from None
                cluster.add(i, _bounded(cpu), _bounded(memory), ingress, egress)
        return cluster

    def copy(self) -> Cluster:
        return replace(
            self,
            **{name: getattr(self, name).copy() for name in self._arrays()},
            placements=list(self.placements),
        )

    @staticmethod
    def _arrays() -> tuple[str, ...]:
        return (
            "cpu",
            "memory",
            "pods",
            "bandwidth",
            "requested_cpu",
            "requested_memory",
            "nonzero_cpu",
            "nonzero_memory",
            "pod_count",
            "used_in",
            "used_out",
        )

    def add(self, node: int, cpu: int, memory: int, ingress: int, egress: int, sign: int = 1) -> None:
        """Place a pod's requests and bandwidth on a node (``sign=-1`` takes them off)."""
        self.requested_cpu[node] += sign * cpu
        self.requested_memory[node] += sign * memory
        self.nonzero_cpu[node] += sign * (cpu or DEFAULT_MILLI_CPU)
        self.nonzero_memory[node] += sign * (memory or DEFAULT_MEMORY)
        self.pod_count[node] += sign
        self.used_in[node] += sign * ingress
        self.used_out[node] += sign * egress
