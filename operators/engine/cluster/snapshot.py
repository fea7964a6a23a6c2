"""The cluster snapshot every decision is a function of.

``build_snapshot(objects)`` turns Kubernetes objects (dicts, as ``kubectl get -o yaml``
writes them) into an immutable, typed ``Snapshot`` with the indexes the engines need.
Built-in kinds are read into small frozen views (fast enough for 100,000 pods); the
CRDs are read into their pydantic models. Errors name the field path of the object.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import orjson
import pydantic

from operators.api import errors, keys
from operators.api.appgroup import AppGroup
from operators.api.errors import FieldError
from operators.api.networktopology import NetworkTopology, convert_legacy_names
from operators.api.nodeslo import NodeSLO, NodeSLOSpec, NodeSLOStatus
from operators.engine.cluster.appgroups import by_name
from operators.engine.cluster.objects import (
    ConfigMap,
    Namespace,
    Node,
    NodeMetric,
    Pod,
    PodDisruptionBudget,
    ReplicaSet,
    ReplicationController,
    Service,
    StatefulSet,
)
from operators.engine.cluster.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from operators.memo import per_object, remember

# Old API groups of the diktyo CRDs (docs/design/contracts.md); read with a warning.
_LEGACY_API_VERSIONS = {
    "AppGroup": ("diktyo.k8s.io/v1alpha1", "appgroup.diktyo.k8s.io/v1alpha1", "scheduling.sigs.x-k8s.io/v1alpha1"),
    "NetworkTopology": (
        "diktyo.k8s.io/v1alpha1",
        "networktopology.diktyo.k8s.io/v1alpha1",
        "scheduling.sigs.x-k8s.io/v1alpha1",
    ),
}


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
    # what kube-scheduler's volume plugins read (kube/volumes.py)
    persistent_volume_claims: tuple[PersistentVolumeClaim, ...] = ()
    persistent_volumes: tuple[PersistentVolume, ...] = ()
    storage_classes: tuple[StorageClass, ...] = ()
    csi_nodes: tuple[CSINode, ...] = ()
    # what selects a pod for the default topology spread constraints (kube/defaults.py)
    services: tuple[Service, ...] = ()
    replica_sets: tuple[ReplicaSet, ...] = ()
    stateful_sets: tuple[StatefulSet, ...] = ()
    replication_controllers: tuple[ReplicationController, ...] = ()
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
    def app_groups_by_name(self) -> Mapping[str, tuple[AppGroup, ...]]:
        """AppGroups by name, every namespace's: what a pod's AppGroup label names (an admission or an extender
        call reads one name; a scan of every AppGroup per call was most of the webhook's time in a burst). A live
        cache's snapshots share the AppGroups' tuple while no AppGroup changes (every pod event makes a snapshot):
        the index of a tuple is kept (with the tuple: its id cannot be reused while held) for the next snapshot that
        holds it."""
        return per_object(_BY_NAME, self.app_groups, _BY_NAME_KEPT, by_name, self.app_groups)

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

    @functools.cached_property
    def claim_by_key(self) -> Mapping[tuple[str, str], PersistentVolumeClaim]:
        return MappingProxyType({(claim.namespace, claim.name): claim for claim in self.persistent_volume_claims})

    @functools.cached_property
    def volume_by_name(self) -> Mapping[str, PersistentVolume]:
        return MappingProxyType({volume.name: volume for volume in self.persistent_volumes})

    @functools.cached_property
    def storage_class_by_name(self) -> Mapping[str, StorageClass]:
        return MappingProxyType({storage_class.name: storage_class for storage_class in self.storage_classes})

    @functools.cached_property
    def csi_node_by_name(self) -> Mapping[str, CSINode]:
        return MappingProxyType({csi_node.name: csi_node for csi_node in self.csi_nodes})

    @functools.cached_property
    def services_by_namespace(self) -> Mapping[str, tuple[Service, ...]]:
        index: dict[str, list[Service]] = defaultdict(list)
        for service in self.services:
            index[service.namespace].append(service)
        return MappingProxyType({namespace: tuple(found) for namespace, found in index.items()})

    @functools.cached_property
    def controller_by_key(self) -> Mapping[tuple[str, str, str], ReplicaSet | StatefulSet | ReplicationController]:
        """(kind, namespace, name) -> the ReplicaSet, StatefulSet or ReplicationController."""
        found: dict[tuple[str, str, str], ReplicaSet | StatefulSet | ReplicationController] = {}
        for kind, controllers in (("ReplicaSet", self.replica_sets), ("StatefulSet", self.stateful_sets),
                                  ("ReplicationController", self.replication_controllers)):  # fmt: skip
            for controller in controllers:
                found[(kind, controller.namespace, controller.name)] = controller
        return MappingProxyType(found)

    def appgroup_pods(self, namespace: str, name: str) -> tuple[Pod, ...]:
        return self.pods_by_appgroup.get((namespace, name), ())


_BY_NAME: dict[int, tuple[object, Mapping[str, tuple[AppGroup, ...]]]] = {}
_BY_NAME_KEPT = 4  # a process's caches (the webhook's, the extender's) each hold one set of AppGroups at a time


def _group(nodes: Iterable[Node], key: Any) -> Mapping[str, tuple[Node, ...]]:
    index: dict[str, list[Node]] = defaultdict(list)
    for node in nodes:
        index[key(node)].append(node)
    return MappingProxyType({name: tuple(members) for name, members in index.items()})


# (apiVersion, kind) -> (the snapshot's slot, the record's parser)
BUILTIN_KINDS: dict[tuple[str, str], tuple[str, Callable[[dict[str, Any]], Any]]] = {
    ("v1", "Node"): ("nodes", Node.parse),
    ("v1", "Pod"): ("pods", Pod.parse),
    ("v1", "Namespace"): ("namespaces", Namespace.parse),
    ("v1", "ConfigMap"): ("config_maps", ConfigMap.parse),
    ("policy/v1", "PodDisruptionBudget"): ("pdbs", PodDisruptionBudget.parse),
    ("slo.koordinator.sh/v1alpha1", "NodeMetric"): ("node_metrics", NodeMetric.parse),
    ("v1", "PersistentVolumeClaim"): ("persistent_volume_claims", PersistentVolumeClaim.parse),
    ("v1", "PersistentVolume"): ("persistent_volumes", PersistentVolume.parse),
    ("storage.k8s.io/v1", "StorageClass"): ("storage_classes", StorageClass.parse),
    ("storage.k8s.io/v1", "CSINode"): ("csi_nodes", CSINode.parse),
    ("v1", "Service"): ("services", Service.parse),
    ("apps/v1", "ReplicaSet"): ("replica_sets", ReplicaSet.parse),
    ("apps/v1", "StatefulSet"): ("stateful_sets", StatefulSet.parse),
    ("v1", "ReplicationController"): ("replication_controllers", ReplicationController.parse),
}

# kind -> (the snapshot's slot, its model)
CUSTOM_KINDS: dict[str, tuple[str, type[pydantic.BaseModel]]] = {
    "AppGroup": ("app_groups", AppGroup),
    "NetworkTopology": ("network_topologies", NetworkTopology),
    "NodeSLO": ("node_slos", NodeSLO),
}


# Kinds whose parts repeat from object to object (a NodeSLO per node, rendered from one config, its status from
# the node's total): an equal part is parsed once and its (frozen) model shared — 5,000 NodeSLOs held 97 MiB of
# equal models in the operator.
SHARED_PARTS: dict[str, tuple[tuple[str, type[pydantic.BaseModel]], ...]] = {
    "NodeSLO": (("spec", NodeSLOSpec), ("status", NodeSLOStatus)),
}
_PARTS_KEPT = 256
_parts: dict[tuple[str, bytes], pydantic.BaseModel] = {}


def _with_shared_parts(raw: dict[str, Any], parts: tuple[tuple[str, type[pydantic.BaseModel]], ...]) -> dict[str, Any]:
    """``raw`` with each part replaced by the shared parsed model of an equal part (pydantic keeps a model instance
    given for a model field as it is); a part that does not parse alone is left as it is (the whole object's
    parse then reports the error with its full path)."""
    shared = dict(raw)
    for field, model in parts:
        part = raw.get(field)
        if not isinstance(part, dict):
            continue
        try:
            key = (field, orjson.dumps(part, option=orjson.OPT_SORT_KEYS))
        except (TypeError, orjson.JSONEncodeError):
            continue
        held = _parts.get(key)
        if held is None:
            try:
                held = model.model_validate(part)
            except (pydantic.ValidationError, ValueError, TypeError, RecursionError):
                continue
            remember(_parts, key, held, _PARTS_KEPT)
        shared[field] = held
    return shared


def parse_object(raw: dict[str, Any], prefix: str = "") -> tuple[str, Any, list[str]] | None:
    """One object (with apiVersion and kind) as the engine reads it: (the snapshot's slot, the record, warnings
    about how it was read); None for a kind the engine does not read. Raises ``FieldError``."""
    api_version, kind = raw.get("apiVersion"), raw.get("kind")
    builtin = BUILTIN_KINDS.get((str(api_version), str(kind)))
    if builtin is not None:
        slot, parse = builtin
        return slot, parse(raw), []
    if kind not in CUSTOM_KINDS:
        return None
    notes: list[str] = []
    raw = dict(raw)
    if api_version in _LEGACY_API_VERSIONS.get(kind, ()):
        current = {"AppGroup": "appgroup", "NetworkTopology": "networktopology"}[kind]
        raw["apiVersion"] = f"{current}.diktyo.x-k8s.io/v1alpha1"
        notes.append(f"{prefix}apiVersion {api_version!r} is an old API group, read as {raw['apiVersion']!r}")
    if kind == "NetworkTopology" and isinstance(raw.get("spec"), dict):
        raw["spec"], converted = convert_legacy_names(raw["spec"])
        notes.extend(prefix + note for note in converted)
    slot, model = CUSTOM_KINDS[kind]
    if kind in SHARED_PARTS:
        raw = _with_shared_parts(raw, SHARED_PARTS[kind])
    try:
        obj = model.model_validate(raw)
    except pydantic.ValidationError as error:
        found = errors.from_pydantic(error)
        raise FieldError(
            found[0].path,
            found[0].value,
            found[0].reason + (f" (and {len(found) - 1} more)" if len(found) > 1 else ""),
        ) from None
    return slot, obj, notes


class SnapshotBuilder:
    """Collects objects one by one (errors carry the object's field path), then freezes them."""

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
        parsed = parse_object(raw, prefix)
        if parsed is None:
            self.ignored[f"{api_version} {kind}"] += 1
            return
        slot, obj, notes = parsed
        self.warnings.extend(notes)
        key = object_key(obj)
        if key in self._objects[slot]:
            self.warnings.append(
                f"{prefix}{kind} {'/'.join(part for part in key if part)} appears twice; the later definition wins"
            )
        self._objects[slot][key] = obj

    def build(self) -> Snapshot:
        def values(slot: str) -> tuple[Any, ...]:
            return tuple(self._objects[slot][key] for key in sorted(self._objects[slot], key=_sort_key))

        slots = [field.name for field in dataclasses.fields(Snapshot) if field.name != "warnings"]
        return Snapshot(**{slot: values(slot) for slot in slots}, warnings=tuple(self.warnings))


def _sort_key(key: tuple[str, str]) -> tuple[str, str]:
    return key


def object_key(obj: Any) -> tuple[str, str]:
    """(namespace, name) of a parsed record or model: the key its slot is sorted by ("" for cluster-scoped)."""
    return (_namespace_of(obj), _name_of(obj))


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
