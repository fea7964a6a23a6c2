"""The kinds a process's cluster cache can follow (:mod:`operators.sources.cache`): each one's collection path,
apiVersion and kind, the trim applied on arrival, and the label or field selector that narrows it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from operators.api import keys
from operators.sources.trim import (
    Trim,
    trim_claim,
    trim_csi_node,
    trim_gate_status,
    trim_node,
    trim_other,
    trim_pod,
    trim_pod_and_scheduler,
    trim_selector,
    trim_status,
    trim_storage_class,
    trim_volume,
)


@dataclass(frozen=True)
class Kind:
    """A kind to follow: its collection path, apiVersion/kind (list items carry neither) and its trim."""

    name: str
    path: str
    api_version: str
    kind: str
    trim: Trim = trim_other
    selector: str = ""  # a label selector: only these objects are listed and watched
    fields: str = ""  # a field selector, likewise (the node agent: its node's pods, its own NodeSLO)


def _custom(plural: str, group: str, kind: str) -> Kind:
    return Kind(plural, f"/apis/{group}/{keys.V1ALPHA1}/{plural}", f"{group}/{keys.V1ALPHA1}", kind)


NODES = Kind("nodes", "/api/v1/nodes", "v1", "Node", trim_node)
PODS = Kind("pods", "/api/v1/pods", "v1", "Pod", trim_pod)
APPGROUP_PODS = Kind("pods", "/api/v1/pods", "v1", "Pod", trim_pod, keys.APPGROUP_LABEL)  # pods of AppGroups
CLEANUP_PODS = Kind("pods", "/api/v1/pods", "v1", "Pod", trim_pod_and_scheduler)  # netaware cleanup: who schedules
NAMESPACES = Kind("namespaces", "/api/v1/namespaces", "v1", "Namespace")
APPGROUPS = _custom("appgroups", keys.APPGROUP_GROUP, "AppGroup")
APPGROUP_SPECS = dataclasses.replace(APPGROUPS, trim=trim_status)  # status writes are no change
APPGROUP_GATES = dataclasses.replace(APPGROUPS, trim=trim_gate_status)  # ... but for the order and Ready (the webhook)
NETWORKTOPOLOGIES = _custom("networktopologies", keys.NETWORKTOPOLOGY_GROUP, "NetworkTopology")
NODESLOS = _custom("nodeslos", keys.SLO_GROUP, "NodeSLO")
NODEMETRICS = _custom("nodemetrics", keys.SLO_GROUP, "NodeMetric")
# what kube-scheduler's volume plugins read (engine/cluster/kube/volumes.py)
PERSISTENTVOLUMECLAIMS = Kind("persistentvolumeclaims", "/api/v1/persistentvolumeclaims", "v1", "PersistentVolumeClaim",
                              trim_claim)  # fmt: skip
PERSISTENTVOLUMES = Kind("persistentvolumes", "/api/v1/persistentvolumes", "v1", "PersistentVolume", trim_volume)
STORAGECLASSES = Kind("storageclasses", "/apis/storage.k8s.io/v1/storageclasses", "storage.k8s.io/v1", "StorageClass",
                      trim_storage_class)  # fmt: skip
CSINODES = Kind("csinodes", "/apis/storage.k8s.io/v1/csinodes", "storage.k8s.io/v1", "CSINode", trim_csi_node)
# what selects a pod for the default topology spread constraints (engine/cluster/kube/defaults.py)
SERVICES = Kind("services", "/api/v1/services", "v1", "Service", trim_selector)
REPLICASETS = Kind("replicasets", "/apis/apps/v1/replicasets", "apps/v1", "ReplicaSet", trim_selector)
STATEFULSETS = Kind("statefulsets", "/apis/apps/v1/statefulsets", "apps/v1", "StatefulSet", trim_selector)
REPLICATIONCONTROLLERS = Kind("replicationcontrollers", "/api/v1/replicationcontrollers", "v1", "ReplicationController",
                              trim_selector)  # fmt: skip
# What kube-scheduler's filters read beyond nodes and pods: namespaces' labels (inter-pod affinity), the storage
# (the volume filters), what selects a pod for the default spread (Services and controllers)
FILTER_KINDS = (NAMESPACES, PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES, STORAGECLASSES, CSINODES, SERVICES,
                REPLICASETS, STATEFULSETS, REPLICATIONCONTROLLERS)  # fmt: skip

# The snapshot slot each kind fills.
SLOTS = {
    "nodes": "nodes",
    "pods": "pods",
    "namespaces": "namespaces",
    "appgroups": "app_groups",
    "networktopologies": "network_topologies",
    "nodeslos": "node_slos",
    "nodemetrics": "node_metrics",
    "persistentvolumeclaims": "persistent_volume_claims",
    "persistentvolumes": "persistent_volumes",
    "storageclasses": "storage_classes",
    "csinodes": "csi_nodes",
    "services": "services",
    "replicasets": "replica_sets",
    "statefulsets": "stateful_sets",
    "replicationcontrollers": "replication_controllers",
}


def union(kinds: Iterable[Kind]) -> tuple[Kind, ...]:
    """One kind per name: when components ask for the same kind differently (a label selector, a lighter trim),
    the broader of the two: every object, trimmed only of what no component reads."""
    chosen: dict[str, Kind] = {}
    for kind in kinds:
        held = chosen.get(kind.name)
        if held is None or held == kind:
            chosen[kind.name] = kind
            continue
        selector = kind.selector if held.selector == kind.selector else ""
        fields = kind.fields if held.fields == kind.fields else ""
        trim = kind.trim if held.trim == kind.trim else trim_other
        chosen[kind.name] = dataclasses.replace(kind, selector=selector, fields=fields, trim=trim)
    return tuple(chosen.values())


def selecting(kind: Kind) -> dict[str, str]:
    return {
        **({"labelSelector": kind.selector} if kind.selector else {}),
        **({"fieldSelector": kind.fields} if kind.fields else {}),
    }
