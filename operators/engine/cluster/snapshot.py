"""The cluster snapshot every decision is a function of.

``build_snapshot(objects)`` turns Kubernetes objects (dicts, as ``kubectl get -o yaml``
writes them) into an immutable, typed ``Snapshot`` with the indexes the engines need.
Built-in kinds are read into small frozen views (fast enough for 100,000 pods); the
CRDs are read into their pydantic models. Errors name the field path of the object.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import pydantic

from operators.api import errors, keys
from operators.api.appgroup import AppGroup
from operators.api.errors import FieldError
from operators.api.meta import DEFAULT_NAMESPACE
from operators.api.networktopology import NetworkTopology, convert_legacy_names
from operators.api.nodeslo import NodeSLO
from operators.api.quantity import Quantity

_EMPTY: Mapping[str, str] = MappingProxyType({})

# Old API groups of the diktyo CRDs (reference/network-aware.md §1, §3); read with a warning.
_LEGACY_API_VERSIONS = {
    "AppGroup": ("diktyo.k8s.io/v1alpha1", "appgroup.diktyo.k8s.io/v1alpha1", "scheduling.sigs.x-k8s.io/v1alpha1"),
    "NetworkTopology": (
        "diktyo.k8s.io/v1alpha1",
        "networktopology.diktyo.k8s.io/v1alpha1",
        "scheduling.sigs.x-k8s.io/v1alpha1",
    ),
}


def _labels(raw: Any, path: str) -> Mapping[str, str]:
    if raw is None:
        return _EMPTY
    if not isinstance(raw, dict):
        raise FieldError(path, raw, "expected a map of strings")
    for key, value in raw.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise FieldError(f"{path}[{key}]", value, "expected a string")
    return MappingProxyType(dict(raw))


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

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_scheduled(self) -> bool:
        return bool(self.node_name)

    @property
    def is_terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

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
            requests=MappingProxyType(pod_requests(spec)),
            priority=priority,
            owner_kinds=tuple(str(owner.get("kind", "")) for owner in owners if isinstance(owner, dict)),
            raw=raw,
        )


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


@dataclass(frozen=True)
class Snapshot:
    """An immutable view of a cluster. Indexes are computed on first use."""

    nodes: tuple[Node, ...] = ()
    pods: tuple[Pod, ...] = ()
    namespaces: tuple[Namespace, ...] = ()
    config_maps: tuple[ConfigMap, ...] = ()
    pdbs: tuple[PodDisruptionBudget, ...] = ()
    app_groups: tuple[AppGroup, ...] = ()
    network_topologies: tuple[NetworkTopology, ...] = ()
    node_slos: tuple[NodeSLO, ...] = ()
    node_metrics: tuple[NodeMetric, ...] = ()
    warnings: tuple[str, ...] = ()

    @functools.cached_property
    def node_by_name(self) -> Mapping[str, Node]:
        return MappingProxyType({node.name: node for node in self.nodes})

    @functools.cached_property
    def pods_by_node(self) -> Mapping[str, tuple[Pod, ...]]:
        index: dict[str, list[Pod]] = defaultdict(list)
        for pod in self.pods:
            if pod.node_name:
                index[pod.node_name].append(pod)
        return MappingProxyType({name: tuple(pods) for name, pods in index.items()})

    @functools.cached_property
    def pods_by_appgroup(self) -> Mapping[tuple[str, str], tuple[Pod, ...]]:
        """Pods carrying ``appgroup.diktyo.x-k8s.io=<name>``, keyed by (namespace, AppGroup name)."""
        index: dict[tuple[str, str], list[Pod]] = defaultdict(list)
        for pod in self.pods:
            group = pod.labels.get(keys.APPGROUP_LABEL)
            if group:
                index[(pod.namespace, group)].append(pod)
        return MappingProxyType({key: tuple(pods) for key, pods in index.items()})

    @functools.cached_property
    def nodes_by_zone(self) -> Mapping[str, tuple[Node, ...]]:
        return _group(self.nodes, lambda node: node.zone)

    @functools.cached_property
    def nodes_by_region(self) -> Mapping[str, tuple[Node, ...]]:
        return _group(self.nodes, lambda node: node.region)

    @functools.cached_property
    def namespace_by_name(self) -> Mapping[str, Namespace]:
        return MappingProxyType({namespace.name: namespace for namespace in self.namespaces})

    @functools.cached_property
    def config_map_by_key(self) -> Mapping[tuple[str, str], ConfigMap]:
        return MappingProxyType({(cm.namespace, cm.name): cm for cm in self.config_maps})

    def appgroup_pods(self, namespace: str, name: str) -> tuple[Pod, ...]:
        return self.pods_by_appgroup.get((namespace, name), ())


def _group(nodes: Iterable[Node], key: Any) -> Mapping[str, tuple[Node, ...]]:
    index: dict[str, list[Node]] = defaultdict(list)
    for node in nodes:
        index[key(node)].append(node)
    return MappingProxyType({name: tuple(members) for name, members in index.items()})


class SnapshotBuilder:
    """Collects objects one by one (errors carry the object's field path), then freezes them."""

    _BUILTIN = {
        ("v1", "Node"): "nodes",
        ("v1", "Pod"): "pods",
        ("v1", "Namespace"): "namespaces",
        ("v1", "ConfigMap"): "config_maps",
        ("policy/v1", "PodDisruptionBudget"): "pdbs",
        ("slo.koordinator.sh/v1alpha1", "NodeMetric"): "node_metrics",
    }

    def __init__(self) -> None:
        self._objects: dict[str, dict[tuple[str, str], Any]] = defaultdict(dict)
        self.warnings: list[str] = []
        self.ignored: dict[str, int] = defaultdict(int)

    def add(self, raw: Any, where: str = "") -> None:
        """Add one object; ``where`` (file and document) prefixes warnings. Raises ``FieldError``."""
        if not isinstance(raw, dict):
            raise FieldError("", raw, "expected a Kubernetes object (a map with apiVersion and kind)")
        api_version = raw.get("apiVersion")
        kind = raw.get("kind")
        if not isinstance(kind, str) or not kind:
            raise FieldError("kind", kind, "expected the object's kind")
        if not isinstance(api_version, str) or not api_version:
            raise FieldError("apiVersion", api_version, "expected the object's apiVersion")
        prefix = f"{where}: " if where else ""
        if kind == "List" or (kind.endswith("List") and isinstance(raw.get("items"), list)):
            for index, item in enumerate(raw.get("items") or []):
                try:
                    self.add(item, f"{where} items[{index}]".strip())
                except FieldError as error:
                    raise error.at(f"items[{index}]") from None
            return
        slot = self._BUILTIN.get((api_version, kind))
        obj: Any
        if slot == "nodes":
            obj = Node.parse(raw)
        elif slot == "pods":
            obj = Pod.parse(raw)
        elif slot == "namespaces":
            obj = Namespace.parse(raw)
        elif slot == "config_maps":
            obj = ConfigMap.parse(raw)
        elif slot == "pdbs":
            obj = PodDisruptionBudget.parse(raw)
        elif slot == "node_metrics":
            obj = NodeMetric.parse(raw)
        elif kind in ("AppGroup", "NetworkTopology", "NodeSLO"):
            slot, obj = self._custom(raw, kind, api_version, prefix)
        else:
            self.ignored[f"{api_version} {kind}"] += 1
            return
        key = (_namespace_of(obj), _name_of(obj))
        if key in self._objects[slot]:
            self.warnings.append(
                f"{prefix}{kind} {'/'.join(part for part in key if part)} appears twice; the later definition wins"
            )
        self._objects[slot][key] = obj

    def _custom(self, raw: dict[str, Any], kind: str, api_version: str, prefix: str) -> tuple[str, Any]:
        raw = dict(raw)
        if api_version in _LEGACY_API_VERSIONS.get(kind, ()):
            current = {"AppGroup": "appgroup", "NetworkTopology": "networktopology"}[kind]
            raw["apiVersion"] = f"{current}.diktyo.x-k8s.io/v1alpha1"
            self.warnings.append(
                f"{prefix}apiVersion {api_version!r} is an old API group, read as {raw['apiVersion']!r}"
            )
        if kind == "NetworkTopology" and isinstance(raw.get("spec"), dict):
            raw["spec"], notes = convert_legacy_names(raw["spec"])
            self.warnings.extend(prefix + note for note in notes)
        model: type[pydantic.BaseModel] = {
            "AppGroup": AppGroup,
            "NetworkTopology": NetworkTopology,
            "NodeSLO": NodeSLO,
        }[kind]
        try:
            obj = model.model_validate(raw)
        except pydantic.ValidationError as error:
            found = errors.from_pydantic(error)
            raise FieldError(
                found[0].path,
                found[0].value,
                found[0].reason + (f" (and {len(found) - 1} more)" if len(found) > 1 else ""),
            ) from None
        slot = {"AppGroup": "app_groups", "NetworkTopology": "network_topologies", "NodeSLO": "node_slos"}[kind]
        return slot, obj

    def build(self) -> Snapshot:
        def values(slot: str) -> tuple[Any, ...]:
            return tuple(self._objects[slot][key] for key in sorted(self._objects[slot], key=_sort_key))

        return Snapshot(
            nodes=values("nodes"),
            pods=values("pods"),
            namespaces=values("namespaces"),
            config_maps=values("config_maps"),
            pdbs=values("pdbs"),
            app_groups=values("app_groups"),
            network_topologies=values("network_topologies"),
            node_slos=values("node_slos"),
            node_metrics=values("node_metrics"),
            warnings=tuple(self.warnings),
        )


def _sort_key(key: tuple[str, str]) -> tuple[str, str]:
    return key


def _namespace_of(obj: Any) -> str:
    metadata = getattr(obj, "metadata", None)
    namespace = metadata.namespace if metadata is not None else getattr(obj, "namespace", None)
    return str(namespace or "")


def _name_of(obj: Any) -> str:
    metadata = getattr(obj, "metadata", None)
    return str(metadata.name) if metadata is not None else str(obj.name)


def build_snapshot(objects: Iterable[Any]) -> Snapshot:
    """A snapshot from objects already in memory (the error path is prefixed with the item index)."""
    builder = SnapshotBuilder()
    for index, raw in enumerate(objects):
        try:
            builder.add(raw)
        except FieldError as error:
            raise error.at(f"[{index}]") from None
    return builder.build()
