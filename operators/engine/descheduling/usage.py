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
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from operators.api import keys
from operators.api.config.descheduler import LowNodeLoadArgs, is_extended
from operators.api.errors import FieldError
from operators.api.quantity import MAX_BANDWIDTH, Quantity
from operators.engine.cluster.bandwidth import Accounting, capacity_or_problem, pod_demand, slo_network_totals
from operators.engine.cluster.objects import Node, NodeMetric, Pod
from operators.engine.cluster.resources import allocatable_amounts, requested_cpu_memory
from operators.engine.cluster.snapshot import Snapshot

Amounts = dict[str, int]
NODE_RESOURCES = ("cpu", "memory", "pods")


class Unknown(Exception):
    """A node's usage of a resource cannot be known: the node is skipped with this reason, never counted idle."""


@dataclass
class NodeLoad:
    """One node as the planner sees it; ``usage`` and ``requested`` change as evictions are planned."""

    node: Node
    capacity: Amounts  # per threshold resource
    usage: Amounts  # per threshold resource
    requested: Amounts  # what kube-scheduler's fit counts: cpu, memory, pods and the extended threshold resources
    pods: tuple[Pod, ...]  # non-terminal pods on the node
    allocatable: Mapping[str, int | None]  # the same resources as ``requested``; None: not reported

    @property
    def name(self) -> str:
        return self.node.name

    def percent(self, resource: str) -> float:
        capacity = self.capacity[resource]
        return 100.0 * self.usage[resource] / capacity if capacity else 0.0


class UsageSource(Protocol):
    """Where one threshold resource's usage comes from."""

    def check(self, node: Node) -> None:
        """Raise ``Unknown`` when this source knows nothing current about ``node``."""

    def node_usage(self, node: Node, pods: tuple[Pod, ...]) -> int:
        """The node's usage; ``Unknown`` when it cannot be told."""

    def pod_usage(self, pod: Pod) -> int:
        """What evicting ``pod`` takes off its node."""


@dataclass(frozen=True)
class Requests:
    """Pod requests, as kube-scheduler counts them (pods: one each)."""

    resource: str

    def check(self, node: Node) -> None:
        return None

    def node_usage(self, node: Node, pods: tuple[Pod, ...]) -> int:
        return sum(self.pod_usage(pod) for pod in pods)

    def pod_usage(self, pod: Pod) -> int:
        if self.resource == "pods":
            return 1
        quantity = pod.requests.get(self.resource)
        return 0 if quantity is None else _amount(self.resource, quantity)


@dataclass(frozen=True)
class NodeMetrics:
    """Koordinator ``NodeMetric`` CRs (cpu, memory): the node's measured usage, the pods' for eviction (a pod the
    NodeMetric does not list: its requests). A missing or stale NodeMetric makes the node unknown."""

    resource: str
    metrics: Mapping[str, NodeMetric]
    now: datetime
    expiration: float

    def check(self, node: Node) -> None:
        why = _stale(self.metrics.get(node.name), self.now, self.expiration)
        if why:
            raise Unknown(why)

    def node_usage(self, node: Node, pods: tuple[Pod, ...]) -> int:
        measured = self.metrics[node.name].node_usage.get(self.resource)
        if measured is not None:
            return _amount(self.resource, measured)
        return sum(self.pod_usage(pod) for pod in pods)

    def pod_usage(self, pod: Pod) -> int:
        metric = self.metrics.get(pod.node_name)
        measured = metric.pod_usage.get(pod.key, {}).get(self.resource) if metric is not None else None
        return _amount(self.resource, measured) if measured is not None else Requests(self.resource).pod_usage(pod)


@dataclass(frozen=True)
class PodBandwidth:
    """netBandwidth from the pods' bandwidth annotations (SPEC §3): one unreadable pod makes the node unknown."""

    def check(self, node: Node) -> None:
        return None

    def node_usage(self, node: Node, pods: tuple[Pod, ...]) -> int:
        try:
            return sum(pod_bandwidth(pod) for pod in pods)
        except FieldError as error:
            raise Unknown(f"used bandwidth unknown: {error}") from None

    def pod_usage(self, pod: Pod) -> int:
        return pod_bandwidth(pod)


@dataclass(frozen=True)
class PrometheusBandwidth:
    """netBandwidth measured by a Prometheus query (node -> (sample time, bits/s)); evicting a pod takes off
    what its annotations ask for."""

    samples: Mapping[str, tuple[float, float]]
    now: datetime
    max_age: float

    def check(self, node: Node) -> None:
        return None

    def node_usage(self, node: Node, pods: tuple[Pod, ...]) -> int:
        sample = self.samples.get(node.name)
        if sample is None:
            raise Unknown("no Prometheus sample for the node's network throughput")
        stamp, value = sample
        if self.now.timestamp() - stamp > self.max_age:
            raise Unknown(f"Prometheus sample is {self.now.timestamp() - stamp:.0f}s old")
        if not math.isfinite(value) or not 0 <= value <= 2 * MAX_BANDWIDTH:
            raise Unknown(f"Prometheus sample {value} is not a bandwidth (0 to 2P bits/s)")
        return int(value)

    def pod_usage(self, pod: Pod) -> int:
        return pod_bandwidth(pod)


@dataclass(frozen=True)
class Loads:
    nodes: dict[str, NodeLoad]
    skipped: dict[str, str]  # node -> why its usage is unknown
    sources: Mapping[str, UsageSource]  # per threshold resource
    extended: tuple[str, ...]  # the extended resources nodeFit counts (threshold ones and any a pod requests)

    def pod_usage(self, pod: Pod) -> Amounts:
        """What ``pod`` adds to its node's usage, per threshold resource (only asked for candidates)."""
        return {name: source.pod_usage(pod) for name, source in self.sources.items()}


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


def requested(pod: Pod, extended: tuple[str, ...] = ()) -> Amounts:
    """cpu (milli), memory (bytes), pods (1) and the ``extended`` resources a pod requests."""
    milli, size = requested_cpu_memory(pod)
    return {"cpu": milli, "memory": size, "pods": 1, **{name: Requests(name).pod_usage(pod) for name in extended}}


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


def usage_sources(
    snapshot: Snapshot,
    args: LowNodeLoadArgs,
    now: datetime,
    prometheus: Mapping[str, tuple[float, float]] | None = None,
) -> dict[str, UsageSource]:
    """The configured source of each threshold resource (``usage`` in the policy)."""
    configured = args.usage
    metrics = {metric.name: metric for metric in snapshot.node_metrics}
    sources: dict[str, UsageSource] = {}
    for name in args.resources:
        if name == "netBandwidth":
            sources[name] = (
                PrometheusBandwidth(prometheus or {}, now, configured.prometheus.max_age_seconds)
                if configured.net_bandwidth == "prometheus"
                else PodBandwidth()
            )
        elif name in ("cpu", "memory") and getattr(configured, name) == "nodeMetric":
            sources[name] = NodeMetrics(name, metrics, now, configured.node_metric_expiration_seconds)
        else:
            sources[name] = Requests(name)
    return sources


def node_loads(
    snapshot: Snapshot,
    args: LowNodeLoadArgs,
    now: datetime,
    prometheus: Mapping[str, tuple[float, float]] | None = None,
) -> Loads:
    """Per-node capacity and usage of the threshold resources, and per-pod usage, for ``snapshot``."""
    sources = usage_sources(snapshot, args, now, prometheus)
    # kube-scheduler's fit counts every extended resource a pod requests (a node without it has none)
    extended = tuple(
        sorted({*args.extended, *(name for pod in snapshot.pods for name in pod.requests if is_extended(name))})
    )
    slo_totals = slo_network_totals(snapshot)
    default_bandwidth = Quantity.parse(args.default_node_bandwidth) if args.default_node_bandwidth else None
    accounting = Accounting(args.accounting_mode)
    by_node = snapshot.pods_by_node
    nodes: dict[str, NodeLoad] = {}
    skipped: dict[str, str] = {}
    for node in snapshot.nodes:
        pods = tuple(pod for pod in by_node.get(node.name, ()) if not pod.is_terminal)
        try:
            for source in sources.values():
                source.check(node)
            capacity = _capacity(node, args.resources, slo_totals.get(node.name), default_bandwidth, accounting)
            usage = {name: source.node_usage(node, pods) for name, source in sources.items()}
        except Unknown as why:
            skipped[node.name] = str(why)
            continue
        allocatable = {**allocatable_amounts(node), **{name: _allocatable(node, name) for name in extended}}
        asked = [requested(pod, extended) for pod in pods]
        total_requested: Amounts = {name: sum(amounts[name] for amounts in asked) for name in allocatable}
        nodes[node.name] = NodeLoad(node, capacity, usage, total_requested, pods, allocatable)
    return Loads(nodes, skipped, sources, extended)


def _capacity(
    node: Node,
    resources: tuple[str, ...],
    slo_total: Quantity | None,
    default_bandwidth: Quantity | None,
    accounting: Accounting,
) -> Amounts:
    """The amounts the threshold percentages are of; ``Unknown`` when one is missing."""
    raw = raw_allocatable(node)
    capacity: Amounts = {}
    for name in resources:
        if name == "netBandwidth":
            bandwidth, problem = capacity_or_problem(node, slo_total, default_bandwidth)
            if problem:
                raise Unknown(problem)
            if not bandwidth:
                raise Unknown("no network bandwidth capacity (node annotation, NodeSLO or defaultNodeBandwidth)")
            capacity[name] = accounting.total(bandwidth)
        else:
            capacity[name] = raw[name] if name in raw else _allocatable(node, name) or 0
    missing = [name for name, amount in capacity.items() if amount <= 0]
    if missing:
        raise Unknown(f"no allocatable {', '.join(missing)}")
    return capacity


def raw_allocatable(node: Node) -> Amounts:
    """Koordinator's ``node.koordinator.sh/raw-allocatable`` (a JSON ResourceList): the node's allocatable before
    resource amplification, which usage percentages are of. As in Koordinator, it is used when it parses and
    ignored otherwise (the node's ``status.allocatable`` counts)."""
    text = node.annotations.get(keys.KOORD_RAW_ALLOCATABLE)
    return _raw_allocatable(text) if text else {}


@functools.lru_cache(maxsize=1024)
def _raw_allocatable(text: str) -> Amounts:
    try:
        listed = json.loads(text)
        if not isinstance(listed, dict):
            return {}
        return {str(name): _amount(str(name), Quantity.parse(str(value))) for name, value in listed.items()}
    except (ValueError, FieldError):
        return {}


def _allocatable(node: Node, resource: str) -> int | None:
    if resource in NODE_RESOURCES:
        return allocatable_amounts(node)[resource]
    quantity = node.allocatable.get(resource)  # an extended resource the node does not list: it has none
    return 0 if quantity is None else _amount(resource, quantity)


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
