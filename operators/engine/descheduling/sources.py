"""Where each threshold resource's usage comes from: the UsageSource protocol and its implementations — pod
requests, Koordinator NodeMetrics, the pods' bandwidth annotations, a Prometheus query (pure)."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from operators.api import keys
from operators.api.errors import FieldError
from operators.api.nodeslo import NetworkUsage
from operators.api.quantity import MAX_BANDWIDTH, Quantity
from operators.engine.cluster.bandwidth import RESOURCES, pod_demand
from operators.engine.cluster.objects import Node, NodeMetric, Pod


class Unknown(Exception):
    """A node's usage of a resource cannot be known: the node is skipped with this reason, never counted idle."""


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
        return 0 if quantity is None else amount_of(self.resource, quantity)


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
            return amount_of(self.resource, measured)
        return sum(self.pod_usage(pod) for pod in pods)

    def pod_usage(self, pod: Pod) -> int:
        metric = self.metrics.get(pod.node_name)
        measured = metric.pod_usage.get(pod.key, {}).get(self.resource) if metric is not None else None
        return amount_of(self.resource, measured) if measured is not None else Requests(self.resource).pod_usage(pod)


@dataclass(frozen=True)
class PodBandwidth:
    """netBandwidth from the pods' bandwidth annotations (docs/design/contracts.md): one unreadable pod makes the
    node unknown."""

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
class MeasuredBandwidth:
    """netBandwidth as the node agent measured it (NodeSLO ``status.networkUsage``: ingress + egress through the
    node's interface); evicting a pod takes off what the agent measured of it, else what it asks for."""

    reports: Mapping[str, NetworkUsage | None]
    now: datetime
    max_age: float

    def check(self, node: Node) -> None:
        report = self.reports.get(node.name)
        if report is None:
            raise Unknown("no networkUsage from the node agent in the node's NodeSLO status")
        updated = _parse_time(report.update_time)
        if updated is None:
            raise Unknown(f"networkUsage.updateTime {report.update_time[:40]!r} is not a time")
        age = (self.now - updated).total_seconds()
        if age > self.max_age:
            raise Unknown(f"networkUsage is {age:.0f}s old (measuredMaxAgeSeconds {self.max_age:.0f})")

    def node_usage(self, node: Node, pods: tuple[Pod, ...]) -> int:
        self.check(node)
        report = self.reports[node.name]
        assert report is not None
        return report.ingress + report.egress

    def pod_usage(self, pod: Pod) -> int:
        report = self.reports.get(pod.node_name)
        measured = report.pods.get(pod.key) if report is not None else None
        return measured.ingress + measured.egress if measured is not None else pod_bandwidth(pod)


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


_BANDWIDTH_KEYS = (  # every annotation pod_demand reads
    keys.INGRESS_REQUEST,
    keys.INGRESS_BANDWIDTH,
    keys.EGRESS_REQUEST,
    keys.EGRESS_BANDWIDTH,
    keys.KOORDINATOR_NETWORK_QOS,
)


def pod_bandwidth(pod: Pod) -> int:
    """in + out bits/s the pod asks for (docs/design/contracts.md); ``FieldError`` naming the pod when unreadable."""
    resources = tuple((name, pod.requests[name]) for name in RESOURCES if name in pod.requests)
    try:
        return _demand(tuple(map(pod.annotations.get, _BANDWIDTH_KEYS)), resources)
    except FieldError as error:
        raise FieldError(f"pod {pod.key}: {error.path}", error.value, error.reason) from None


@functools.lru_cache(maxsize=4096)
def _demand(values: tuple[str | None, ...], resources: tuple[tuple[str, Quantity], ...]) -> int:
    # Cached: the pods of a cluster share a handful of bandwidth annotations and resources.
    annotations = {key: value for key, value in zip(_BANDWIDTH_KEYS, values, strict=True) if value}
    ingress, egress = pod_demand(annotations, dict(resources))
    return ingress + egress


def amount_of(resource: str, quantity: Quantity) -> int:
    """cpu in millicores, everything else in units."""
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
