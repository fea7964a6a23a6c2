"""The cluster's objects as the engine reads them (pure): Node, Pod, Namespace, ConfigMap, PodDisruptionBudget,
NodeMetric, and the Services and controllers (ReplicaSet, StatefulSet, ReplicationController) by their selectors,
each parsed from its raw dict once, with errors naming the field (the storage kinds: :mod:`.storage`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any, Self

from operators.api import keys
from operators.api.errors import FieldError
from operators.api.meta import DEFAULT_NAMESPACE
from operators.api.quantity import Quantity
from operators.api.selectors import Selector, from_label_selector
from operators.memo import remember

_EMPTY: Mapping[str, str] = MappingProxyType({})
# Pod.on_node's copies by pod and node (8,192 kept): plans place the held pods again each pass, and a pod's parsed parts
# (terms, demand) are kept per object: a new copy a pass was parsed again (a tenth of a 5,000-node burst's plans)
_ON_NODE: dict[tuple[int, str], tuple[Pod, Pod]] = {}


def _labels(raw: Any, path: str) -> Mapping[str, str]:
    if raw is None:
        return _EMPTY
    if not isinstance(raw, dict):
        raise FieldError(path, raw, "expected a map of strings")
    for key, value in raw.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise FieldError(f"{path}[{key}]", value, "expected a string")
    # A view, not a copy: the objects a record is parsed from are not changed afterwards (the cluster cache
    # shares one labels map between a Deployment's replicas).
    return MappingProxyType(raw)


def _quantities(raw: Any, path: str) -> Mapping[str, Quantity]:
    if raw is None:
        return MappingProxyType({})
    if not isinstance(raw, dict):
        raise FieldError(path, raw, "expected a map of quantities")
    return MappingProxyType({str(name): Quantity.parse(value, f"{path}.{name}") for name, value in raw.items()})


def _object(raw: Any, path: str) -> dict[str, Any]:
    """A nested object (``spec``, ``status``); absent or null is empty, anything but a map is a ``FieldError``."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise FieldError(path, raw, "expected an object")
    return raw


def _list(raw: Any, path: str) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise FieldError(path, raw, "expected a list")
    return raw


def _metadata(raw: dict[str, Any]) -> dict[str, Any]:
    meta = raw.get("metadata")
    if not isinstance(meta, dict):
        raise FieldError("metadata", meta, "expected an object with a name")
    if not isinstance(meta.get("name"), str) or not meta["name"]:
        raise FieldError("metadata.name", meta.get("name"), "expected a non-empty string")
    return meta


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    allocatable: Mapping[str, Quantity]
    capacity: Mapping[str, Quantity]
    unschedulable: bool
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def region(self) -> str:
        return self.labels.get(keys.REGION_LABEL, "")

    @property
    def uid(self) -> str:
        return str((self.raw.get("metadata") or {}).get("uid") or "")

    @property
    def zone(self) -> str:
        return self.labels.get(keys.ZONE_LABEL, "")

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Node:
        meta = _metadata(raw)
        spec = _object(raw.get("spec"), "spec")
        status = _object(raw.get("status"), "status")
        return cls(
            name=meta["name"],
            labels=_labels(meta.get("labels"), "metadata.labels"),
            annotations=_labels(meta.get("annotations"), "metadata.annotations"),
            allocatable=_quantities(status.get("allocatable"), "status.allocatable"),
            capacity=_quantities(status.get("capacity"), "status.capacity"),
            unschedulable=bool(spec.get("unschedulable", False)),
            raw=raw,
        )


@dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    node_name: str
    phase: str
    requests: Mapping[str, Quantity]
    priority: int
    owner_kinds: tuple[str, ...]
    raw: Mapping[str, Any] = field(repr=False, compare=False)
    scheduling_gates: tuple[str, ...] = ()  # names, in order; a gated pod is not scheduled

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_scheduled(self) -> bool:
        return bool(self.node_name)

    @property
    def is_terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def nominated_node(self) -> str:
        """``status.nominatedNodeName``: where preemption, or a plan (plan-ungated), expects the pod to go."""
        return str((self.raw.get("status") or {}).get("nominatedNodeName") or "")

    @property
    def is_terminating(self) -> bool:
        """Deleted (or evicted) and still there: ``metadata.deletionTimestamp`` is set."""
        return bool((self.raw.get("metadata") or {}).get("deletionTimestamp"))

    def on_node(self, node: str) -> Pod:
        """This pod as if bound to ``node`` (empty: unbound), its object's ``spec.nodeName`` so (one copy: _ON_NODE)."""
        held = _ON_NODE.get((id(self), node))
        if held is None or held[0] is not self:
            spec = {key: value for key, value in (self.raw.get("spec") or {}).items() if key != "nodeName"}
            copy = replace(self, node_name=node, raw={**self.raw, "spec": {**spec, "nodeName": node} if node else spec})
            held = remember(_ON_NODE, (id(self), node), (self, copy), 8192)
        return held[1]

    @classmethod
    def parse(cls, raw: dict[str, Any], default_namespace: str = DEFAULT_NAMESPACE) -> Pod:
        meta = _metadata(raw)
        spec = _object(raw.get("spec"), "spec")
        status = _object(raw.get("status"), "status")
        owners = _list(meta.get("ownerReferences"), "metadata.ownerReferences")
        priority = spec.get("priority") or 0
        if not isinstance(priority, int) or isinstance(priority, bool) or abs(priority) > 2**31:
            raise FieldError("spec.priority", priority, "expected a 32-bit integer")
        namespace = meta.get("namespace") or default_namespace
        if not isinstance(namespace, str):
            raise FieldError("metadata.namespace", namespace, "expected a string")
        return cls(
            namespace=namespace,
            name=meta["name"],
            uid=str(meta.get("uid") or ""),
            labels=_labels(meta.get("labels"), "metadata.labels"),
            annotations=_labels(meta.get("annotations"), "metadata.annotations"),
            node_name=str(spec.get("nodeName") or ""),
            phase=str(status.get("phase") or "Pending"),
            requests=_shared_requests(pod_requests(spec)),
            priority=priority,
            owner_kinds=_OWNER_KINDS.setdefault(
                kinds := tuple(str(o.get("kind", "")) for o in owners if isinstance(o, dict)), kinds
            ),
            raw=raw,
            scheduling_gates=_gates(spec.get("schedulingGates")),
        )

    @property
    def created(self) -> float | None:
        """``metadata.creationTimestamp`` in seconds since the epoch (None when absent or unreadable)."""
        text = (self.raw.get("metadata") or {}).get("creationTimestamp")
        try:
            return datetime.fromisoformat(str(text)).timestamp() if text else None
        except ValueError:
            return None


def _gates(raw: Any) -> tuple[str, ...]:
    names = []
    for position, gate in enumerate(_list(raw, "spec.schedulingGates")):
        name = gate.get("name") if isinstance(gate, dict) else None
        if not isinstance(name, str):
            raise FieldError(f"spec.schedulingGates[{position}].name", name, "expected a string")
        names.append(name)
    return _GATES.setdefault(gates := tuple(names), gates)


# Equal request maps and owner kinds are shared between pods (a Deployment's replicas ask the same): a
# 100,000-pod cache would otherwise hold 100,000 copies. Bounded; cleared when full.
_SHARED_KEPT = 10_000
_REQUESTS: dict[tuple[tuple[str, int, str], ...], Mapping[str, Quantity]] = {}
_OWNER_KINDS: dict[tuple[str, ...], tuple[str, ...]] = {}
_GATES: dict[tuple[str, ...], tuple[str, ...]] = {}


def _shared_requests(total: dict[str, Quantity]) -> Mapping[str, Quantity]:
    key = tuple((name, quantity.nanos, quantity.text) for name, quantity in total.items())
    held = _REQUESTS.get(key)
    if held is None:
        if len(_REQUESTS) >= _SHARED_KEPT:
            _REQUESTS.clear()
            _OWNER_KINDS.clear()
            _GATES.clear()
        held = _REQUESTS[key] = MappingProxyType(total)
    return held


def pod_requests(spec: Mapping[str, Any]) -> dict[str, Quantity]:
    """Effective requests as kube-scheduler computes them: max(sum of containers, any init container) + overhead."""
    total: dict[str, Quantity] = {}
    for index, container in enumerate(_list(spec.get("containers"), "spec.containers")):
        path = f"spec.containers[{index}]"
        resources = _object(_object(container, path).get("resources"), f"{path}.resources")
        for name, amount in _quantities(resources.get("requests"), f"{path}.resources.requests").items():
            total[name] = total[name] + amount if name in total else amount
    for index, container in enumerate(_list(spec.get("initContainers"), "spec.initContainers")):
        path = f"spec.initContainers[{index}]"
        resources = _object(_object(container, path).get("resources"), f"{path}.resources")
        for name, amount in _quantities(resources.get("requests"), f"{path}.resources.requests").items():
            if name not in total or amount > total[name]:
                total[name] = amount
    for name, amount in _quantities(spec.get("overhead"), "spec.overhead").items():
        total[name] = total[name] + amount if name in total else amount
    return total


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Namespace:
        meta = _metadata(raw)
        return cls(
            name=meta["name"],
            labels=_labels(meta.get("labels"), "metadata.labels"),
            annotations=_labels(meta.get("annotations"), "metadata.annotations"),
            raw=raw,
        )


@dataclass(frozen=True, slots=True)
class ConfigMap:
    namespace: str
    name: str
    labels: Mapping[str, str]
    data: Mapping[str, str]
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, raw: dict[str, Any], default_namespace: str = DEFAULT_NAMESPACE) -> ConfigMap:
        meta = _metadata(raw)
        return cls(
            namespace=str(meta.get("namespace") or default_namespace),
            name=meta["name"],
            labels=_labels(meta.get("labels"), "metadata.labels"),
            data=_labels(raw.get("data"), "data"),
            raw=raw,
        )


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    namespace: str
    name: str
    selector: Mapping[str, Any]
    min_available: int | str | None
    max_unavailable: int | str | None
    disruptions_allowed: int | None
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, raw: dict[str, Any], default_namespace: str = DEFAULT_NAMESPACE) -> PodDisruptionBudget:
        meta = _metadata(raw)
        spec = _object(raw.get("spec"), "spec")
        status = _object(raw.get("status"), "status")
        allowed = status.get("disruptionsAllowed")
        if allowed is not None and (not isinstance(allowed, int) or isinstance(allowed, bool)):
            raise FieldError("status.disruptionsAllowed", allowed, "expected an integer")
        return cls(
            namespace=meta.get("namespace") or default_namespace,
            name=meta["name"],
            selector=MappingProxyType(_object(spec.get("selector"), "spec.selector")),
            min_available=spec.get("minAvailable"),
            max_unavailable=spec.get("maxUnavailable"),
            disruptions_allowed=int(allowed) if allowed is not None else None,
            raw=raw,
        )


@dataclass(frozen=True, slots=True)
class NodeMetric:
    """Koordinator's ``NodeMetric`` (slo.koordinator.sh/v1alpha1): measured cpu/memory of a node and its pods."""

    name: str
    update_time: str  # RFC 3339; "" when the koordlet has not reported yet
    node_usage: Mapping[str, Quantity]
    pod_usage: Mapping[str, Mapping[str, Quantity]]  # "namespace/name" -> resources
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> NodeMetric:
        meta = _metadata(raw)
        status = _object(raw.get("status"), "status")
        node_metric = _object(status.get("nodeMetric"), "status.nodeMetric")
        usage = _object(node_metric.get("nodeUsage"), "status.nodeMetric.nodeUsage").get("resources")
        pods: dict[str, Mapping[str, Quantity]] = {}
        for index, entry in enumerate(_list(status.get("podsMetric"), "status.podsMetric")):
            path = f"status.podsMetric[{index}]"
            if not isinstance(entry, dict) or not entry.get("name"):
                raise FieldError(path, entry, "expected {namespace, name, podUsage}")
            key = f"{entry.get('namespace') or 'default'}/{entry['name']}"
            usage_of_pod = _object(entry.get("podUsage"), f"{path}.podUsage")
            pods[key] = _quantities(usage_of_pod.get("resources"), f"{path}.podUsage.resources")
        return cls(
            name=meta["name"],
            update_time=str(status.get("updateTime") or ""),
            node_usage=_quantities(usage, "status.nodeMetric.nodeUsage.resources"),
            pod_usage=MappingProxyType(pods),
            raw=raw,
        )


@dataclass(frozen=True, slots=True)
class Service:
    namespace: str
    name: str
    selector: Mapping[str, str] | None  # spec.selector; None (absent or empty, as stored): it selects no pod
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, raw: dict[str, Any], default_namespace: str = DEFAULT_NAMESPACE) -> Service:
        meta = _metadata(raw)
        selector = _labels(_object(raw.get("spec"), "spec").get("selector"), "spec.selector")
        return cls(str(meta.get("namespace") or default_namespace), meta["name"], selector or None, raw)


@dataclass(frozen=True, slots=True)
class ReplicationController:
    namespace: str
    name: str
    selector: Mapping[str, str]  # spec.selector, a map
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, raw: dict[str, Any], default_namespace: str = DEFAULT_NAMESPACE) -> ReplicationController:
        meta = _metadata(raw)
        selector = _labels(_object(raw.get("spec"), "spec").get("selector"), "spec.selector")
        return cls(str(meta.get("namespace") or default_namespace), meta["name"], selector, raw)


@dataclass(frozen=True, slots=True)
class LabelSelected:
    """A controller by its ``spec.selector`` (a label selector; absent: it selects nothing)."""

    namespace: str
    name: str
    selector: Selector
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, raw: dict[str, Any], default_namespace: str = DEFAULT_NAMESPACE) -> Self:
        meta = _metadata(raw)
        selector = from_label_selector(_object(raw.get("spec"), "spec").get("selector"), "spec.selector")
        return cls(str(meta.get("namespace") or default_namespace), meta["name"], selector, raw)


@dataclass(frozen=True, slots=True)
class ReplicaSet(LabelSelected): ...


@dataclass(frozen=True, slots=True)
class StatefulSet(LabelSelected): ...


def place_of(node: Node | None) -> tuple[str, str] | None:
    """(region, zone) of a node; None for no node (it came or went): what a node change moves placements by."""
    return (node.region, node.zone) if node is not None else None
