"""The storage kinds as kube-scheduler's volume plugins read them (pure): PersistentVolumeClaim, PersistentVolume,
StorageClass and CSINode, each parsed from its raw dict once into a small frozen view, with errors naming the field.

Only what VolumeRestrictions, NodeVolumeLimits, VolumeBinding and VolumeZone read is kept. A storage class is
resolved as upstream's ``GetPersistentVolumeClaimClass``/``GetPersistentVolumeClass`` do (the beta annotation
first, then ``spec.storageClassName``); an absent ``volumeBindingMode`` is ``Immediate`` and an absent
``volumeMode`` is ``Filesystem``, as the API server defaults them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from operators.api.errors import FieldError
from operators.api.meta import DEFAULT_NAMESPACE
from operators.api.quantity import Quantity
from operators.api.selectors import Selector, from_label_selector
from operators.engine.cluster.objects import _labels, _list, _metadata, _object

BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
IMMEDIATE, WAIT_FOR_FIRST_CONSUMER = "Immediate", "WaitForFirstConsumer"
FILESYSTEM = "Filesystem"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
_NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _text(raw: Any, path: str, default: str = "") -> str:
    if raw is None:
        return default
    if not isinstance(raw, str):
        raise FieldError(path, raw, "expected a string")
    return raw


def _strings(raw: Any, path: str) -> tuple[str, ...]:
    items = _list(raw, path)
    if not all(isinstance(item, str) for item in items):
        raise FieldError(path, items, "expected a list of strings")
    return tuple(items)


def _storage(raw: Any, path: str) -> Quantity | None:
    """The ``storage`` entry of a resource list (None when absent)."""
    resources = _object(raw, path)
    return Quantity.parse(resources["storage"], f"{path}.storage") if resources.get("storage") is not None else None


def _meta_text(meta: Mapping[str, Any], name: str) -> str:
    return _text(meta.get(name), f"metadata.{name}")


def _annotation(meta: Mapping[str, Any], key: str) -> str | None:
    """One annotation (None when absent): the views read these keys only, never the whole map."""
    annotations = _object(meta.get("annotations"), "metadata.annotations")
    value = annotations.get(key)
    return None if value is None else _text(value, f"metadata.annotations[{key}]")


@dataclass(frozen=True, slots=True)
class NodeRequirement:
    """One ``NodeSelectorRequirement`` (In, NotIn, Exists, DoesNotExist, Gt, Lt)."""

    key: str
    operator: str
    values: tuple[str, ...]

    @property
    def valid(self) -> bool:
        """As upstream's ``labels.NewRequirement`` accepts it (an invalid one fails its whole term)."""
        if self.operator in ("In", "NotIn"):
            return bool(self.values)
        if self.operator in ("Exists", "DoesNotExist"):
            return not self.values
        return len(self.values) == 1 and _integer(self.values[0]) is not None

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        have, bound = _integer(labels.get(self.key)), _integer(self.values[0])
        if have is None or bound is None:
            return False
        return have > bound if self.operator == "Gt" else have < bound


def _integer(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class NodeTerm:
    """A ``NodeSelectorTerm`` as upstream's ``nodeaffinity`` matches it: all its expressions (on labels) and fields
    (``metadata.name``; In or NotIn one value) must match; a term with neither matches no node, an invalid one none
    either. Fields are not checked for a node without a name (upstream's ``CheckNodeAffinity`` passes labels only)."""

    expressions: tuple[NodeRequirement, ...]
    fields: tuple[NodeRequirement, ...]

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        if not self.expressions and not self.fields:
            return False
        if not all(r.valid for r in self.expressions) or not all(
            r.operator in ("In", "NotIn") and len(r.values) == 1 for r in self.fields
        ):
            return False
        if not all(r.matches(labels) for r in self.expressions):
            return False
        return not name or all(r.matches({r.key: name} if r.key == "metadata.name" else {}) for r in self.fields)


def _requirements(raw: Any, path: str) -> tuple[NodeRequirement, ...]:
    found = []
    for index, item in enumerate(_list(raw, path)):
        at = f"{path}[{index}]"
        entry = _object(item, at)
        key, operator = entry.get("key"), entry.get("operator")
        if not isinstance(key, str):
            raise FieldError(f"{at}.key", key, "expected a string")
        if operator not in _NODE_OPERATORS:
            raise FieldError(f"{at}.operator", operator, f"expected one of {', '.join(_NODE_OPERATORS)}")
        found.append(NodeRequirement(key, operator, _strings(entry.get("values"), f"{at}.values")))
    return tuple(found)


def node_terms(raw: Any, path: str) -> tuple[NodeTerm, ...]:
    """A ``NodeSelector``'s ``nodeSelectorTerms``."""
    where = f"{path}.nodeSelectorTerms"
    terms = []
    for index, item in enumerate(_list(_object(raw, path).get("nodeSelectorTerms"), where)):
        term = _object(item, f"{where}[{index}]")
        terms.append(NodeTerm(_requirements(term.get("matchExpressions"), f"{where}[{index}].matchExpressions"),
                              _requirements(term.get("matchFields"), f"{where}[{index}].matchFields")))  # fmt: skip
    return tuple(terms)


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    uid: str
    volume_name: str  # spec.volumeName: "" when not bound (nor pre-bound)
    storage_class: str  # the beta annotation, else spec.storageClassName; "" when none
    phase: str  # status.phase: Pending, Bound, Lost
    access_modes: tuple[str, ...]
    volume_mode: str
    request: Quantity | None  # spec.resources.requests.storage
    selector: Selector | None  # spec.selector (None: any volume)
    attributes_class: str  # spec.volumeAttributesClassName
    bind_completed: bool  # the pv.kubernetes.io/bind-completed annotation is set
    selected_node: str | None  # the volume.kubernetes.io/selected-node annotation (None: absent)
    deleting: bool  # metadata.deletionTimestamp is set
    controller_uid: str | None  # the uid of its controller (an ephemeral volume's claim: its pod)
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def fully_bound(self) -> bool:
        """Bound as VolumeBinding sees it: a volume name and the bind-completed annotation."""
        return bool(self.volume_name) and self.bind_completed

    @classmethod
    def parse(cls, raw: dict[str, Any], default_namespace: str = DEFAULT_NAMESPACE) -> PersistentVolumeClaim:
        meta = _metadata(raw)
        spec = _object(raw.get("spec"), "spec")
        status = _object(raw.get("status"), "status")
        beta = _annotation(meta, BETA_STORAGE_CLASS)
        raw_selector = spec.get("selector")
        resources = _object(spec.get("resources"), "spec.resources")
        return cls(
            namespace=_meta_text(meta, "namespace") or default_namespace,
            name=meta["name"],
            uid=_meta_text(meta, "uid"),
            volume_name=_text(spec.get("volumeName"), "spec.volumeName"),
            storage_class=beta if beta is not None else _text(spec.get("storageClassName"), "spec.storageClassName"),
            phase=_text(status.get("phase"), "status.phase", "Pending"),
            access_modes=_strings(spec.get("accessModes"), "spec.accessModes"),
            volume_mode=_text(spec.get("volumeMode"), "spec.volumeMode") or FILESYSTEM,
            request=_storage(resources.get("requests"), "spec.resources.requests"),
            selector=from_label_selector(raw_selector, "spec.selector") if raw_selector is not None else None,
            attributes_class=_text(spec.get("volumeAttributesClassName"), "spec.volumeAttributesClassName"),
            bind_completed=_annotation(meta, BIND_COMPLETED) is not None,
            selected_node=_annotation(meta, SELECTED_NODE),
            deleting=bool(meta.get("deletionTimestamp")),
            controller_uid=_controller_uid(meta.get("ownerReferences")),
            raw=raw,
        )


def _controller_uid(raw: Any) -> str | None:
    for index, owner in enumerate(_list(raw, "metadata.ownerReferences")):
        reference = _object(owner, f"metadata.ownerReferences[{index}]")
        if reference.get("controller") is True:
            return _text(reference.get("uid"), f"metadata.ownerReferences[{index}].uid")
    return None


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    labels: Mapping[str, str]  # the zone/region labels VolumeZone reads; all of them for a claim's selector
    storage_class: str  # the beta annotation, else spec.storageClassName
    capacity: Quantity | None  # spec.capacity.storage
    access_modes: tuple[str, ...]
    volume_mode: str
    attributes_class: str
    claim_ref: tuple[str, str, str] | None  # (namespace, name, uid) of spec.claimRef
    node_affinity: tuple[NodeTerm, ...] | None  # spec.nodeAffinity.required (None: every node)
    csi: tuple[str, str] | None  # (driver, volumeHandle) of spec.csi
    phase: str  # status.phase: Pending, Available, Bound, Released, Failed
    deleting: bool
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    def allows(self, labels: Mapping[str, str]) -> bool:
        """The node affinity accepts a node with ``labels`` (upstream's ``CheckNodeAffinity``, which reads a node's
        labels only: a ``matchFields`` term sees no node name and matches no node)."""
        return self.node_affinity is None or any(term.matches(labels, "") for term in self.node_affinity)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> PersistentVolume:
        meta = _metadata(raw)
        spec = _object(raw.get("spec"), "spec")
        status = _object(raw.get("status"), "status")
        beta = _annotation(meta, BETA_STORAGE_CLASS)
        claim = spec.get("claimRef")
        reference = None
        if claim is not None:
            ref = _object(claim, "spec.claimRef")
            reference = tuple(_text(ref.get(part), f"spec.claimRef.{part}") for part in ("namespace", "name", "uid"))
        affinity = _object(spec.get("nodeAffinity"), "spec.nodeAffinity").get("required")
        csi = spec.get("csi")
        source = None
        if csi is not None:
            volume = _object(csi, "spec.csi")
            source = (_text(volume.get("driver"), "spec.csi.driver"),
                      _text(volume.get("volumeHandle"), "spec.csi.volumeHandle"))  # fmt: skip
        return cls(
            name=meta["name"],
            labels=_labels(meta.get("labels"), "metadata.labels"),
            storage_class=beta if beta is not None else _text(spec.get("storageClassName"), "spec.storageClassName"),
            capacity=_storage(spec.get("capacity"), "spec.capacity"),
            access_modes=_strings(spec.get("accessModes"), "spec.accessModes"),
            volume_mode=_text(spec.get("volumeMode"), "spec.volumeMode") or FILESYSTEM,
            attributes_class=_text(spec.get("volumeAttributesClassName"), "spec.volumeAttributesClassName"),
            claim_ref=(reference[0], reference[1], reference[2]) if reference is not None else None,
            node_affinity=node_terms(affinity, "spec.nodeAffinity.required") if affinity is not None else None,
            csi=source,
            phase=_text(status.get("phase"), "status.phase"),
            deleting=bool(meta.get("deletionTimestamp")),
            raw=raw,
        )


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str
    binding_mode: str  # Immediate | WaitForFirstConsumer
    # allowedTopologies: terms (any), each a tuple of (key, values) that must all match; empty: every node
    allowed_topologies: tuple[tuple[tuple[str, frozenset[str]], ...], ...]
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    def allows(self, labels: Mapping[str, str]) -> bool:
        """Upstream's ``MatchTopologySelectorTerms``: no term matches every node, an empty term none."""
        if not self.allowed_topologies:
            return True
        return any(term and all(labels.get(key) in values for key, values in term) for term in self.allowed_topologies)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> StorageClass:
        meta = _metadata(raw)
        mode = _text(raw.get("volumeBindingMode"), "volumeBindingMode", IMMEDIATE)
        if mode not in (IMMEDIATE, WAIT_FOR_FIRST_CONSUMER):
            raise FieldError("volumeBindingMode", mode, f"expected {IMMEDIATE} or {WAIT_FOR_FIRST_CONSUMER}")
        terms = []
        for index, item in enumerate(_list(raw.get("allowedTopologies"), "allowedTopologies")):
            where = f"allowedTopologies[{index}].matchLabelExpressions"
            expressions = []
            for number, entry in enumerate(_list(_object(item, f"allowedTopologies[{index}]").get(
                    "matchLabelExpressions"), where)):  # fmt: skip
                requirement = _object(entry, f"{where}[{number}]")
                key = _text(requirement.get("key"), f"{where}[{number}].key")
                expressions.append((key, frozenset(_strings(requirement.get("values"), f"{where}[{number}].values"))))
            terms.append(tuple(expressions))
        return cls(meta["name"], _text(raw.get("provisioner"), "provisioner"), mode, tuple(terms), raw)


@dataclass(frozen=True, slots=True)
class CSINode:
    name: str  # the node's name
    drivers: Mapping[str, int | None]  # driver -> spec.drivers[].allocatable.count (None: no limit reported)
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def limits(self) -> dict[str, int]:
        """The attach limit of each driver that reports one (upstream's ``getVolumeLimits``)."""
        return {driver: count for driver, count in self.drivers.items() if count is not None}

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> CSINode:
        meta = _metadata(raw)
        drivers: dict[str, int | None] = {}
        for index, item in enumerate(_list(_object(raw.get("spec"), "spec").get("drivers"), "spec.drivers")):
            at = f"spec.drivers[{index}]"
            driver = _object(item, at)
            name = _text(driver.get("name"), f"{at}.name")
            count = _object(driver.get("allocatable"), f"{at}.allocatable").get("count")
            if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 0):
                raise FieldError(f"{at}.allocatable.count", count, "expected a non-negative integer")
            drivers[name] = count
        return cls(meta["name"], drivers, raw)
