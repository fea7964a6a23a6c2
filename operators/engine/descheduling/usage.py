"""How loaded each node is, per descheduler resource, from a snapshot (pure).

Units: cpu in millicores, memory in bytes, pods as a count, netBandwidth in bits/s. netBandwidth
usage is ingress + egress; its capacity is the node's bandwidth (docs/design/contracts.md), doubled in ``duplex``
accounting (each direction has the full capacity), as the NetworkBandwidth score counts it.

Usage comes from pod requests by default; cpu and memory may come from Koordinator ``NodeMetric``
CRs and netBandwidth from a Prometheus instant query (each a ``UsageSource`` of :mod:`.sources`). A
node whose usage is unknown or stale (no NodeMetric, an old ``updateTime``, no Prometheus sample, no
bandwidth capacity) is *skipped* with the reason, never counted as idle.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from operators.api import keys
from operators.api.config.descheduler import LowNodeLoadArgs, is_extended
from operators.api.errors import FieldError
from operators.api.quantity import Quantity
from operators.engine.cluster.bandwidth import Accounting, capacity_or_problem, slo_network_totals
from operators.engine.cluster.objects import Node, Pod
from operators.engine.cluster.resources import allocatable_amounts, requested_cpu_memory
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.descheduling.sources import (
    MeasuredBandwidth,
    NodeMetrics,
    PodBandwidth,
    PrometheusBandwidth,
    Requests,
    Unknown,
    UsageSource,
    amount_of,
)

Amounts = dict[str, int]
NODE_RESOURCES = ("cpu", "memory", "pods")


@dataclass
class NodeLoad:
    """One node as the planner sees it; ``usage`` and ``requested`` change as evictions are planned."""

    node: Node
    capacity: Amounts  # per threshold resource
    usage: Amounts  # per threshold resource
    requested: Amounts  # what kube-scheduler's fit counts: cpu, memory, pods; extended resources once asked
    pods: tuple[Pod, ...]  # non-terminal pods on the node
    allocatable: dict[str, int | None]  # the same resources as ``requested``; None: not reported

    @property
    def name(self) -> str:
        return self.node.name

    def percent(self, resource: str) -> float:
        capacity = self.capacity[resource]
        return 100.0 * self.usage[resource] / capacity if capacity else 0.0

    def requested_of(self, resource: str) -> int:
        """What the node's pods request of ``resource``; an extended resource is counted when first asked (only a
        pod that requests one makes nodeFit look), and kept current by the planner from then on."""
        if resource not in self.requested:
            self.requested[resource] = Requests(resource).node_usage(self.node, self.pods)
        return self.requested[resource]

    def allocatable_of(self, resource: str) -> int | None:
        if resource not in self.allocatable:
            self.allocatable[resource] = _allocatable(self.node, resource)
        return self.allocatable[resource]


@dataclass(frozen=True)
class Loads:
    nodes: dict[str, NodeLoad]
    skipped: dict[str, str]  # node -> why its usage is unknown
    sources: Mapping[str, UsageSource]  # per threshold resource

    def pod_usage(self, pod: Pod) -> Amounts:
        """What ``pod`` adds to its node's usage, per threshold resource (only asked for candidates)."""
        return {name: source.pod_usage(pod) for name, source in self.sources.items()}


def requested(pod: Pod) -> Amounts:
    """cpu (milli), memory (bytes), pods (1) and the extended resources a pod requests: what kube-scheduler's fit
    counts (a node that does not list an extended resource has none of it)."""
    milli, size = requested_cpu_memory(pod)
    extended = {name: amount_of(name, quantity) for name, quantity in pod.requests.items() if is_extended(name)}
    return {"cpu": milli, "memory": size, "pods": 1, **extended}


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
            if configured.net_bandwidth == "prometheus":
                sources[name] = PrometheusBandwidth(prometheus or {}, now, configured.prometheus.max_age_seconds)
            elif configured.net_bandwidth == "measured":
                reports = {slo.metadata.name: slo.status.network_usage for slo in snapshot.node_slos if slo.status}
                sources[name] = MeasuredBandwidth(reports, now, configured.measured_max_age_seconds)
            else:
                sources[name] = PodBandwidth()
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
    extended = args.extended
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
        asked = [requested_cpu_memory(pod) for pod in pods]
        total_requested: Amounts = {
            "cpu": sum(cpu for cpu, _ in asked),
            "memory": sum(memory for _, memory in asked),
            "pods": len(pods),
            **{name: Requests(name).node_usage(node, pods) for name in extended},
        }
        nodes[node.name] = NodeLoad(node, capacity, usage, total_requested, pods, allocatable)
    return Loads(nodes, skipped, sources)


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
        return {str(name): amount_of(str(name), Quantity.parse(str(value))) for name, value in listed.items()}
    except (ValueError, FieldError):
        return {}


def _allocatable(node: Node, resource: str) -> int | None:
    if resource in NODE_RESOURCES:
        return allocatable_amounts(node)[resource]
    quantity = node.allocatable.get(resource)  # an extended resource the node does not list: it has none
    return 0 if quantity is None else amount_of(resource, quantity)
