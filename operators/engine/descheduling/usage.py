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
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from operators.api import keys
from operators.api.errors import FieldError
from operators.api.quantity import MAX_BANDWIDTH, Quantity
from operators.engine.cluster.bandwidth import Accounting, capacity_or_problem, pod_demand, slo_network_totals
from operators.engine.cluster.resources import allocatable_amounts, requested_cpu_memory
from operators.engine.cluster.snapshot import Node, NodeMetric, Pod, Snapshot
from operators.engine.descheduling.policy import LowNodeLoadArgs

Amounts = dict[str, int]


@dataclass
class NodeLoad:
    """One node as the planner sees it; ``usage`` and ``requested`` change as evictions are planned."""

    node: Node
    capacity: Amounts  # per threshold resource
    usage: Amounts  # per threshold resource
    requested: Amounts  # cpu, memory, pods from pod requests (what kube-scheduler's fit counts)
    pods: tuple[Pod, ...]  # non-terminal pods on the node
    allocatable: Mapping[str, int | None]  # cpu, memory, pods (kube-scheduler's fit); None: not reported

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
    modes: dict[str, str]  # resource -> "requests", "metric" or "bandwidth"
    metrics: dict[str, NodeMetric]

    def pod_usage(self, pod: Pod) -> Amounts:
        """What ``pod`` adds to its node's usage, per threshold resource (only asked for candidates)."""
        metric = self.metrics.get(pod.node_name)
        pod_metrics = metric.pod_usage.get(pod.key, {}) if metric is not None else {}
        return {name: _pod_amount(name, mode, pod, pod_metrics) for name, mode in self.modes.items()}


def _pod_amount(name: str, mode: str, pod: Pod, pod_metrics: Mapping[str, Quantity]) -> int:
    if mode == "bandwidth":
        return pod_bandwidth(pod)
    if mode == "metric" and name in pod_metrics:
        return _amount(name, pod_metrics[name])
    if name == "pods":
        return 1
    quantity = pod.requests.get(name)  # requests (a pod the NodeMetric does not list: its requests)
    return 0 if quantity is None else _amount(name, quantity)


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


_BANDWIDTH_KEYS = (  # everything pod_demand reads
    keys.INGRESS_REQUEST,
    keys.INGRESS_BANDWIDTH,
    keys.EGRESS_REQUEST,
    keys.EGRESS_BANDWIDTH,
    keys.KOORDINATOR_NETWORK_QOS,
)


def pod_bandwidth(pod: Pod) -> int:
    """in + out bits/s the pod asks for (SPEC §3); ``FieldError`` naming the pod when unreadable."""
    try:
        return _demand(tuple(map(pod.annotations.get, _BANDWIDTH_KEYS)))
    except FieldError as error:
        raise FieldError(f"pod {pod.key}: {error.path}", error.value, error.reason) from None


@functools.lru_cache(maxsize=4096)
def _demand(values: tuple[str | None, ...]) -> int:
    # Cached: the pods of a cluster share a handful of bandwidth annotations.
    ingress, egress = pod_demand({key: value for key, value in zip(_BANDWIDTH_KEYS, values, strict=True) if value})
    return ingress + egress


def requested(pod: Pod) -> Amounts:
    """cpu (milli), memory (bytes) and pods (1) a pod requests."""
    milli, size = requested_cpu_memory(pod)
    return {"cpu": milli, "memory": size, "pods": 1}


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
    accounting = Accounting(args.accounting_mode)
    by_node = snapshot.pods_by_node
    modes = {
        name: "bandwidth"
        if name == "netBandwidth"
        else "metric"
        if name in ("cpu", "memory") and getattr(sources, name) == "nodeMetric"
        else "requests"
        for name in resources
    }
    nodes: dict[str, NodeLoad] = {}
    skipped: dict[str, str] = {}
    uses_metrics = any(getattr(sources, name) == "nodeMetric" for name in ("cpu", "memory") if name in resources)
    for node in snapshot.nodes:
        pods = tuple(pod for pod in by_node.get(node.name, ()) if not pod.is_terminal)
        metric = metrics.get(node.name)
        if uses_metrics:
            why = _stale(metric, now, sources.node_metric_expiration_seconds)
            if why:
                skipped[node.name] = why
                continue
        allocatable = allocatable_amounts(node)
        capacity: Amounts = {name: allocatable[name] or 0 for name in ("cpu", "memory", "pods") if name in resources}
        if "netBandwidth" in resources:
            bandwidth, problem = capacity_or_problem(node, slo_totals.get(node.name), default_bandwidth)
            if problem:
                skipped[node.name] = problem
                continue
            if not bandwidth:
                skipped[node.name] = "no network bandwidth capacity (node annotation, NodeSLO or defaultNodeBandwidth)"
                continue
            capacity["netBandwidth"] = accounting.total(bandwidth)
        missing = [name for name, amount in capacity.items() if amount <= 0]
        if missing:
            skipped[node.name] = f"no allocatable {', '.join(missing)}"
            continue
        asked = [requested_cpu_memory(pod) for pod in pods]
        total_requested: Amounts = {
            "cpu": sum(cpu for cpu, _ in asked),
            "memory": sum(memory for _, memory in asked),
            "pods": len(pods),
        }
        usage: Amounts = {}
        for name in resources:
            mode = modes[name]
            if mode == "requests":
                usage[name] = total_requested[name]
            elif mode == "bandwidth":
                try:
                    usage[name] = sum(pod_bandwidth(pod) for pod in pods)
                except FieldError as error:  # one unreadable pod makes the node's usage unknown, not 0
                    skipped[node.name] = f"used bandwidth unknown: {error}"
                    break
            else:
                pod_metrics = metric.pod_usage if metric is not None else {}
                usage[name] = sum(_pod_amount(name, mode, pod, pod_metrics.get(pod.key, {})) for pod in pods)
        if node.name in skipped:
            continue
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
            if not math.isfinite(sample[1]) or not 0 <= sample[1] <= 2 * MAX_BANDWIDTH:
                skipped[node.name] = f"Prometheus sample {sample[1]} is not a bandwidth (0 to 2P bits/s)"
                continue
            usage["netBandwidth"] = int(sample[1])
        nodes[node.name] = NodeLoad(node, capacity, usage, total_requested, pods, allocatable)
    return Loads(nodes, skipped, modes, metrics)


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
