"""How loaded each node is, per descheduler resource, from a snapshot (pure).

Units: cpu in millicores, memory in bytes, pods as a count, netBandwidth in bits/s. netBandwidth
usage is ingress + egress; its capacity is the node's bandwidth (SPEC §3), doubled in ``duplex``
accounting (each direction has the full capacity), as the NetworkBandwidth score counts it.

Usage comes from pod requests by default; cpu and memory may come from Koordinator ``NodeMetric``
CRs and netBandwidth from a Prometheus instant query. A node whose usage is unknown or stale (no
NodeMetric, an old ``updateTime``, no Prometheus sample, no bandwidth capacity) is *skipped* with
the reason, never counted as idle.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from operators.api.quantity import Quantity
from operators.engine.descheduler_policy import LowNodeLoadArgs
from operators.engine.plugins import node_capacity, pod_demand, slo_network_totals
from operators.engine.snapshot import Node, NodeMetric, Pod, Snapshot

Amounts = dict[str, int]


@dataclass
class NodeLoad:
    """One node as the planner sees it; ``usage`` and ``requested`` change as evictions are planned."""

    node: Node
    capacity: Amounts  # per threshold resource
    usage: Amounts  # per threshold resource
    requested: Amounts  # cpu, memory, pods from pod requests (what kube-scheduler's fit counts)
    pods: tuple[Pod, ...]  # non-terminal pods on the node

    @property
    def name(self) -> str:
        return self.node.name

    def percent(self, resource: str) -> float:
        capacity = self.capacity[resource]
        return 100.0 * self.usage[resource] / capacity if capacity else 0.0


@dataclass(frozen=True)
class Loads:
    nodes: dict[str, NodeLoad]
    skipped: dict[str, str]  # node -> why its usage is unknown
    pod_usage: dict[str, Amounts]  # "namespace/name" -> per threshold resource


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


@functools.lru_cache(maxsize=4096)
def _demand(values: tuple[tuple[str, str], ...]) -> int:
    """in + out bits/s for a pod's bandwidth annotations (cached: pods share a handful of values)."""
    ingress, egress = pod_demand(dict(values))
    return ingress + egress


_BANDWIDTH_KEYS = (
    "kubernetes.io/ingress-request",
    "kubernetes.io/ingress-bandwidth",
    "kubernetes.io/egress-request",
    "kubernetes.io/egress-bandwidth",
    "koordinator.sh/networkQOS",
)


def pod_bandwidth(pod: Pod) -> int:
    annotations = pod.annotations
    return _demand(tuple((key, annotations[key]) for key in _BANDWIDTH_KEYS if key in annotations))


def requested(pod: Pod) -> Amounts:
    """cpu (milli), memory (bytes) and pods (1) a pod requests."""
    cpu, memory = pod.requests.get("cpu"), pod.requests.get("memory")
    return {
        "cpu": cpu.milli_value() if cpu is not None else 0,
        "memory": memory.value() if memory is not None else 0,
        "pods": 1,
    }


def prometheus_samples(response: Any, node_label: str) -> dict[str, tuple[float, float]]:
    """node -> (sample time, value) from a Prometheus ``/api/v1/query`` answer (vector result)."""
    if not isinstance(response, Mapping) or response.get("status") != "success":
        raise ValueError("not a successful Prometheus query answer")
    data = response.get("data") or {}
    if data.get("resultType") != "vector":
        raise ValueError(f"expected a vector result, got {data.get('resultType')!r}")
    samples: dict[str, tuple[float, float]] = {}
    for entry in data.get("result") or []:
        node = (entry.get("metric") or {}).get(node_label)
        stamp, value = entry.get("value") or (None, None)
        if node and stamp is not None and value is not None:
            samples[str(node)] = (float(stamp), float(value))
    return samples


def node_loads(
    snapshot: Snapshot,
    args: LowNodeLoadArgs,
    now: datetime,
    prometheus: Mapping[str, tuple[float, float]] | None = None,
) -> Loads:
    """Per-node capacity and usage of the threshold resources, and per-pod usage, for ``snapshot``."""
    resources = args.resources
    sources = args.usage
    metrics: dict[str, NodeMetric] = {metric.name: metric for metric in snapshot.node_metrics}
    slo_totals = slo_network_totals(snapshot)
    default_bandwidth = Quantity.parse(args.default_node_bandwidth) if args.default_node_bandwidth else None
    duplex = 2 if args.accounting_mode == "duplex" else 1
    by_node = snapshot.pods_by_node
    nodes: dict[str, NodeLoad] = {}
    skipped: dict[str, str] = {}
    pod_usage: dict[str, Amounts] = {}
    uses_metrics = any(getattr(sources, name) == "nodeMetric" for name in ("cpu", "memory") if name in resources)
    for node in snapshot.nodes:
        pods = tuple(pod for pod in by_node.get(node.name, ()) if not pod.is_terminal)
        metric = metrics.get(node.name)
        if uses_metrics:
            why = _stale(metric, now, sources.node_metric_expiration_seconds)
            if why:
                skipped[node.name] = why
                continue
        capacity: Amounts = {}
        allocatable = node.allocatable
        if "cpu" in resources:
            capacity["cpu"] = allocatable["cpu"].milli_value() if "cpu" in allocatable else 0
        if "memory" in resources:
            capacity["memory"] = allocatable["memory"].value() if "memory" in allocatable else 0
        if "pods" in resources:
            capacity["pods"] = allocatable["pods"].value() if "pods" in allocatable else 110
        if "netBandwidth" in resources:
            bandwidth = node_capacity(node, slo_totals.get(node.name), default_bandwidth)
            if not bandwidth:
                skipped[node.name] = "no network bandwidth capacity (node annotation, NodeSLO or defaultNodeBandwidth)"
                continue
            capacity["netBandwidth"] = bandwidth * duplex
        missing = [name for name, amount in capacity.items() if amount <= 0]
        if missing:
            skipped[node.name] = f"no allocatable {', '.join(missing)}"
            continue
        total_requested: Amounts = {"cpu": 0, "memory": 0, "pods": 0}
        usage: Amounts = dict.fromkeys(resources, 0)
        for pod in pods:
            asked = requested(pod)
            for name in total_requested:
                total_requested[name] += asked[name]
            own: Amounts = {}
            for name in resources:
                if name == "netBandwidth":
                    own[name] = pod_bandwidth(pod)
                elif name == "pods":
                    own[name] = 1
                elif getattr(sources, name) == "nodeMetric" and metric is not None:
                    measured = metric.pod_usage.get(pod.key, {}).get(name)
                    own[name] = _amount(name, measured) if measured is not None else asked[name]
                else:
                    own[name] = asked[name]
                usage[name] += own[name]
            pod_usage[pod.key] = own
        if metric is not None:
            for name in ("cpu", "memory"):
                if name in resources and getattr(sources, name) == "nodeMetric":
                    measured = metric.node_usage.get(name)
                    usage[name] = _amount(name, measured) if measured is not None else usage[name]
        if "netBandwidth" in resources and sources.net_bandwidth == "prometheus":
            sample = (prometheus or {}).get(node.name)
            if sample is None:
                skipped[node.name] = "no Prometheus sample for the node's network throughput"
                continue
            if now.timestamp() - sample[0] > sources.prometheus.max_age_seconds:
                skipped[node.name] = f"Prometheus sample is {now.timestamp() - sample[0]:.0f}s old"
                continue
            usage["netBandwidth"] = int(sample[1])
        nodes[node.name] = NodeLoad(node, capacity, usage, total_requested, pods)
    return Loads(nodes, skipped, pod_usage)


def _amount(resource: str, quantity: Quantity) -> int:
    return quantity.milli_value() if resource == "cpu" else quantity.value()


def _stale(metric: NodeMetric | None, now: datetime, expiration: float) -> str:
    if metric is None:
        return "no NodeMetric"
    updated = _parse_time(metric.update_time)
    if updated is None:
        return "NodeMetric has no updateTime"
    age = (now - updated).total_seconds()
    if age > expiration:
        return f"NodeMetric is {age:.0f}s old (nodeMetricExpirationSeconds {expiration:.0f})"
    return ""
