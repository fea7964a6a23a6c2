"""Objects trimmed on arrival to the fields the engine reads, so that a process keeping 100,000 pods keeps
a fraction of what the API server sends (managedFields, container images, env, probes, conditions, ...).

Pods and Nodes, the numerous kinds, are rebuilt from an explicit list of the fields read; every other
kind only loses ``managedFields`` and the ``last-applied-configuration`` annotation. Equal parts (the
labels, resources and tolerations of a Deployment's replicas) are shared between trimmed objects. ``resourceVersion``
is dropped from the trimmed object (it is kept beside it), so an update that changes nothing the engine
reads (a node's heartbeat, a pod's container status) leaves the trimmed object equal: no change at all.

``tests/unit/test_trim.py`` runs the engine over recording objects and fails when it reads a field the
trim drops.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from typing import Any

import orjson

from operators.api.keys import CONDITION_READY
from operators.memo import remember

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

Trim = Callable[[dict[str, Any]], dict[str, Any]]

# Equal parts of trimmed objects, shared: the replicas of a Deployment have the same labels, annotations,
# owners, containers' resources, tolerations and status, and 100,000 pods repeat a few hundred of each. The
# trimmed objects are never changed after the trim, so one copy serves them all. Bounded: cleared when full
# (sharing then starts again from the objects that arrive next).
# Keyed by a 16-byte digest of the value's JSON, not the JSON itself: the texts of 26,000 distinct node and pod
# parts held 101 MiB at 20,000 nodes (their digests: 1.3 MiB). A hit is compared with the value before it is used.
_SHARED_KEPT = 200_000
_shared: dict[bytes, Any] = {}


def shared(value: Any) -> Any:
    """An equal value held already, else ``value`` (kept for the next equal one)."""
    if not value:
        return value
    try:
        key = hashlib.blake2b(orjson.dumps(value), digest_size=16).digest()
    except (TypeError, orjson.JSONEncodeError):
        return value
    held = _shared.get(key)
    if held is not None:
        return held if held == value else value
    return remember(_shared, key, value, _SHARED_KEPT)


def _text(value: Any) -> Any:
    return sys.intern(value) if isinstance(value, str) and len(value) <= 64 else value


def _pick(source: Any, names: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(source, dict):
        return {}
    return {name: source[name] for name in names if name in source and source[name] is not None}


def _annotations(meta: dict[str, Any]) -> Any:
    annotations = meta.get("annotations")
    if isinstance(annotations, dict) and LAST_APPLIED in annotations:
        return {key: value for key, value in annotations.items() if key != LAST_APPLIED}
    return annotations


def _metadata(raw: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    meta = raw.get("metadata")
    if not isinstance(meta, dict):
        return {"name": None}  # the parser names the field
    kept = _pick(meta, names)
    if "annotations" in kept:
        kept["annotations"] = _annotations(meta)
    for name in ("labels", "annotations", "ownerReferences"):
        if name in kept:
            kept[name] = shared(kept[name])
    for name in ("namespace", "creationTimestamp"):
        if name in kept:
            kept[name] = _text(kept[name])
    return kept


_POD_META = ("name", "namespace", "uid", "labels", "annotations", "ownerReferences", "creationTimestamp",
             "deletionTimestamp")  # fmt: skip
_OWNER = ("apiVersion", "kind", "name", "controller")  # the default spread selector finds the controller by these
# the volumes kube-scheduler's plugins read: local (evictability), claims and generic ephemeral ones (their claim
# is named after the volume), and the inline disks VolumeRestrictions compares
_VOLUME_SOURCES = ("emptyDir", "hostPath", "persistentVolumeClaim", "gcePersistentDisk", "awsElasticBlockStore",
                   "iscsi", "rbd")  # fmt: skip
_POD_SPEC = ("nodeName", "priority", "priorityClassName", "overhead", "tolerations", "nodeSelector", "schedulingGates",
             "topologySpreadConstraints")  # fmt: skip


def _containers(items: Any) -> Any:
    """Containers as read: their resources, an init container's restartPolicy, the ports bound on the host."""
    if not isinstance(items, list):
        return items
    return [_container(item) if isinstance(item, dict) else item for item in items]


def _container(item: dict[str, Any]) -> dict[str, Any]:
    kept = _pick(item, ("resources", "restartPolicy"))
    ports = item.get("ports")
    if isinstance(ports, list):
        host = [_pick(port, ("hostPort", "hostIP", "protocol")) for port in ports
                if isinstance(port, dict) and port.get("hostPort")]  # fmt: skip
        if host:
            kept["ports"] = host
    return kept


def trim_pod(raw: dict[str, Any]) -> dict[str, Any]:
    """A pod as the engine reads it: identity, labels and annotations, owners (their controller), placement, requests
    and limits, priority, tolerations, node selection, inter-pod affinity, topology spread, host ports, the volumes
    kube-scheduler's plugins read, phase and QoS class."""
    spec = raw.get("spec")
    trimmed: dict[str, Any] = {"metadata": _metadata(raw, _POD_META)}
    owners = trimmed["metadata"].get("ownerReferences") if isinstance(trimmed["metadata"], dict) else None
    if isinstance(owners, list):
        trimmed["metadata"]["ownerReferences"] = shared([_pick(owner, _OWNER) for owner in owners])
    if isinstance(spec, dict):
        kept = _pick(spec, _POD_SPEC)
        for name in ("containers", "initContainers"):
            if name in spec:
                kept[name] = _containers(spec[name])
        affinity = spec.get("affinity")
        if isinstance(affinity, dict):  # node affinity, and the inter-pod terms kube-scheduler's filters read
            terms = {name: affinity[name] for name in ("nodeAffinity", "podAffinity", "podAntiAffinity")
                     if affinity.get(name)}  # fmt: skip
            if terms:
                kept["affinity"] = terms
        volumes = spec.get("volumes")
        if isinstance(volumes, list):
            read = [_volume(volume) for volume in volumes if isinstance(volume, dict) and _is_read(volume)]
            if read:
                kept["volumes"] = read
        for name in kept:
            kept[name] = _text(kept[name]) if name == "nodeName" else shared(kept[name])
        trimmed["spec"] = kept
    elif spec is not None:
        trimmed["spec"] = spec
    status = raw.get("status")
    trimmed["status"] = shared(_pick(status, ("phase", "qosClass"))) if isinstance(status, dict) else status
    return trimmed


def trim_pod_and_scheduler(raw: dict[str, Any]) -> dict[str, Any]:
    """:func:`trim_pod` and ``spec.schedulerName`` (``netaware cleanup`` finds the pods of a removed scheduler; the
    long-running caches do not keep it)."""
    trimmed = trim_pod(raw)
    spec = raw.get("spec")
    if isinstance(spec, dict) and "schedulerName" in spec and isinstance(trimmed.get("spec"), dict):
        trimmed["spec"]["schedulerName"] = spec["schedulerName"]
    return trimmed


def _is_read(volume: dict[str, Any]) -> bool:
    return any(volume.get(source) is not None for source in ("ephemeral", *_VOLUME_SOURCES))


def _volume(volume: dict[str, Any]) -> dict[str, Any]:
    """A volume as read: its name and source; a generic ephemeral volume's claim template is not read."""
    kept = _pick(volume, ("name", *_VOLUME_SOURCES))
    if volume.get("ephemeral") is not None:
        kept["ephemeral"] = {}
    return kept


def trim_agent_pod(raw: dict[str, Any]) -> dict[str, Any]:
    """A pod as the node agent reads it: :func:`trim_pod` and the pod's address and host networking."""
    trimmed = trim_pod(raw)
    spec, status = raw.get("spec"), raw.get("status")
    if isinstance(spec, dict) and isinstance(trimmed.get("spec"), dict) and "hostNetwork" in spec:
        trimmed["spec"]["hostNetwork"] = spec["hostNetwork"]
    if isinstance(status, dict) and isinstance(trimmed.get("status"), dict) and "podIP" in status:
        trimmed["status"] = {**trimmed["status"], "podIP": status["podIP"]}
    return trimmed


def trim_node(raw: dict[str, Any]) -> dict[str, Any]:
    """A node as the engine reads it: name, labels and annotations, schedulability, taints, allocatable and
    capacity (not its conditions, images, addresses or heartbeats)."""
    spec, status = raw.get("spec"), raw.get("status")
    return {
        "metadata": _metadata(raw, ("name", "uid", "labels", "annotations")),
        "spec": shared(_pick(spec, ("unschedulable", "taints"))) if isinstance(spec, dict) else spec,
        "status": shared(_pick(status, ("allocatable", "capacity"))) if isinstance(status, dict) else status,
    }


def trim_other(raw: dict[str, Any]) -> dict[str, Any]:
    """Any other kind: all of it but ``managedFields`` and the last-applied annotation (the resourceVersion stays:
    a controller that writes these objects guards its writes with it)."""
    meta = raw.get("metadata")
    if not isinstance(meta, dict):
        return raw
    kept = {key: value for key, value in meta.items() if key != "managedFields"}
    if "annotations" in kept:
        kept["annotations"] = _annotations(meta)
    return {**raw, "metadata": kept}


def trim_status(raw: dict[str, Any]) -> dict[str, Any]:
    """A custom resource read for its spec only (the extender and the NetworkTopology controller read AppGroups
    that way): without its status and resourceVersion, so that status writes (running pods, placements) change
    nothing."""
    trimmed = {key: value for key, value in trim_other(raw).items() if key != "status"}
    meta = trimmed.get("metadata")
    if isinstance(meta, dict) and "resourceVersion" in meta:
        trimmed["metadata"] = {key: value for key, value in meta.items() if key != "resourceVersion"}
    return trimmed


def trim_gate_status(raw: dict[str, Any]) -> dict[str, Any]:
    """An AppGroup as the webhook reads it (:mod:`~operators.engine.admission.scheduling_gate`): its spec, and of its
    status what the gate decision reads, the topology order and the Ready condition (type, status, reason and
    transition). The status writes of a burst (running pods, placements, plans, gated pods) are then no change: the
    webhook's view is not rebuilt for each, as it was on every admission after one (1,000 AppGroups grouped by name
    again: a tenth of the webhook's samples in a 250-AppGroup burst)."""
    trimmed = trim_status(raw)
    status = raw.get("status")
    if not isinstance(status, dict):
        return trimmed
    kept: dict[str, Any] = {}
    if "topologyOrder" in status:
        kept["topologyOrder"] = status["topologyOrder"]
    conditions = status.get("conditions")
    if isinstance(conditions, list):
        ready = [
            {key: condition[key] for key in ("type", "status", "reason", "lastTransitionTime") if key in condition}
            for condition in conditions
            if isinstance(condition, dict) and condition.get("type") == CONDITION_READY
        ]
        if ready:
            kept["conditions"] = ready
    if kept:
        trimmed["status"] = kept
    return trimmed


def trim_probe_pod(raw: dict[str, Any]) -> dict[str, Any]:
    """A pod of the probe DaemonSet as `netaware probe` reads it: name, labels, node, phase and pod IP."""
    spec, status = raw.get("spec"), raw.get("status")
    return {
        "metadata": _metadata(raw, ("name", "namespace", "uid", "labels")),
        "spec": _pick(spec, ("nodeName",)) if isinstance(spec, dict) else spec,
        "status": _pick(status, ("phase", "podIP")) if isinstance(status, dict) else status,
    }


# -- what kube-scheduler's volume plugins and its default spread selector read ------------------------------------

_STORAGE_ANNOTATIONS = ("volume.beta.kubernetes.io/storage-class", "pv.kubernetes.io/bind-completed",
                        "volume.kubernetes.io/selected-node")  # fmt: skip


def _storage_metadata(raw: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """``names`` of the metadata, and of its annotations only those the volume views read."""
    kept = _metadata(raw, names)
    annotations = (raw.get("metadata") or {}).get("annotations")
    if isinstance(annotations, dict):
        read = {key: annotations[key] for key in _STORAGE_ANNOTATIONS if key in annotations}
        if read:
            kept["annotations"] = read
    return kept


def _with(trimmed: dict[str, Any], name: str, value: Any) -> dict[str, Any]:
    if value:
        trimmed[name] = value
    return trimmed


def _storage_request(resources: Any) -> dict[str, Any]:
    requests = _pick(resources, ("requests",)).get("requests")
    return {"requests": _pick(requests, ("storage",))} if _pick(requests, ("storage",)) else {}


def trim_claim(raw: dict[str, Any]) -> dict[str, Any]:
    """A PersistentVolumeClaim as the volume plugins read it: its volume, class, access modes, volume mode, storage
    request, selector, binding annotations, controller and phase."""
    trimmed = {"metadata": _storage_metadata(raw, ("name", "namespace", "uid", "deletionTimestamp"))}
    owners = (raw.get("metadata") or {}).get("ownerReferences")
    if isinstance(owners, list):
        _with(trimmed["metadata"], "ownerReferences", [_pick(owner, ("uid", "controller")) for owner in owners])
    spec = raw.get("spec")
    if isinstance(spec, dict):
        kept = _pick(spec, ("volumeName", "storageClassName", "accessModes", "volumeMode", "selector",
                            "volumeAttributesClassName"))  # fmt: skip
        _with(trimmed, "spec", _with(kept, "resources", _storage_request(spec.get("resources"))))
    return _with(trimmed, "status", _pick(raw.get("status"), ("phase",)))


def trim_volume(raw: dict[str, Any]) -> dict[str, Any]:
    """A PersistentVolume as the volume plugins read it: labels, class, capacity, access and volume modes, claim,
    node affinity, CSI driver and handle, phase."""
    trimmed = {"metadata": _storage_metadata(raw, ("name", "labels", "deletionTimestamp"))}
    spec = raw.get("spec")
    if isinstance(spec, dict):
        kept = _pick(spec, ("storageClassName", "accessModes", "volumeMode", "volumeAttributesClassName",
                            "nodeAffinity"))  # fmt: skip
        _with(kept, "capacity", _pick(spec.get("capacity"), ("storage",)))
        _with(kept, "claimRef", _pick(spec.get("claimRef"), ("namespace", "name", "uid")))
        _with(kept, "csi", _pick(spec.get("csi"), ("driver", "volumeHandle")))
        _with(trimmed, "spec", kept)
    return _with(trimmed, "status", _pick(raw.get("status"), ("phase",)))


def trim_storage_class(raw: dict[str, Any]) -> dict[str, Any]:
    """A StorageClass: its provisioner, binding mode and allowed topologies."""
    return {"metadata": _metadata(raw, ("name",)),
            **_pick(raw, ("provisioner", "volumeBindingMode", "allowedTopologies"))}  # fmt: skip


def trim_csi_node(raw: dict[str, Any]) -> dict[str, Any]:
    """A CSINode: its drivers' names and allocatable counts."""
    drivers = (raw.get("spec") or {}).get("drivers") if isinstance(raw.get("spec"), dict) else None
    kept = [_pick(driver, ("name", "allocatable")) for driver in drivers] if isinstance(drivers, list) else drivers
    return _with({"metadata": _metadata(raw, ("name",))}, "spec", {"drivers": kept} if kept else {})


def trim_selector(raw: dict[str, Any]) -> dict[str, Any]:
    """A Service, ReplicaSet, StatefulSet or ReplicationController: its name and ``spec.selector`` (not its status:
    a ReplicaSet's replica counts change often and are not read)."""
    return _with({"metadata": _metadata(raw, ("name", "namespace"))}, "spec", _pick(raw.get("spec"), ("selector",)))
