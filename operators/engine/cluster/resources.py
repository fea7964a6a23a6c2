"""What pods request and nodes offer of cpu, memory and pods, as kube-scheduler counts them (pure)."""

from __future__ import annotations

import functools

from operators.api.quantity import Quantity
from operators.engine.cluster.objects import Node, Pod


def requested_cpu_memory(pod: Pod) -> tuple[int, int]:
    requests = pod.requests
    cpu, memory = requests.get("cpu"), requests.get("memory")
    return _requested(cpu.nanos if cpu is not None else 0, memory.nanos if memory is not None else 0)


@functools.lru_cache(maxsize=4096)
def _requested(cpu_nanos: int, memory_nanos: int) -> tuple[int, int]:
    # Cached by exact amount: the pods of a cluster share a handful of request sizes.
    return Quantity(cpu_nanos).milli_value(), Quantity(memory_nanos).value()


def allocatable_amounts(node: Node) -> dict[str, int | None]:
    """The node's allocatable cpu (milli), memory (bytes) and pods (110 when not reported, as the kubelet)."""
    allocatable = node.allocatable
    return {
        "cpu": allocatable["cpu"].milli_value() if "cpu" in allocatable else None,
        "memory": allocatable["memory"].value() if "memory" in allocatable else None,
        "pods": allocatable["pods"].value() if "pods" in allocatable else 110,
    }


KUBERNETES_QOS_CLASSES = ("Guaranteed", "Burstable", "BestEffort")


def kubernetes_qos_class(pod: Pod) -> str:
    """The pod's Kubernetes QoS class: ``status.qosClass`` when the API server set it, else computed from the
    containers as the API server does (cpu and memory limited, requests equal to limits: Guaranteed)."""
    status = pod.raw.get("status") or {}
    if status.get("qosClass") in KUBERNETES_QOS_CLASSES:
        return str(status["qosClass"])
    containers = [c or {} for c in (pod.raw.get("spec") or {}).get("containers") or []]
    resources = [(c.get("resources") or {}) for c in containers]
    if not any((r.get("requests") or r.get("limits")) for r in resources):
        return "BestEffort"
    for r in resources:
        limits, requests = r.get("limits") or {}, r.get("requests") or {}
        for name in ("cpu", "memory"):
            if name not in limits or str(requests.get(name, limits[name])) != str(limits[name]):
                return "Burstable"
    return "Guaranteed"
