"""The trim keeps every field the engine reads. The engine runs over recording objects (every key it reads is
logged with its path); each path read must exist in the rich fixture below (so that a new field read makes this
test ask for it) and must read the same value from the trimmed object as from the original."""

from __future__ import annotations

import copy
import datetime
import pathlib
from collections.abc import Iterator
from typing import Any

import yaml

from operators.api.appgroup import AppGroup
from operators.api.config.descheduler import parse_policy
from operators.api.config.scheduler import parse_config
from operators.engine.admission.scheduling_gate import needs_gate
from operators.engine.cluster import fit
from operators.engine.cluster.kube import defaults, volumes
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.descheduling import evictability
from operators.engine.descheduling.lownodeload import plan
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.schedule import schedule
from operators.engine.simulation.cluster import Cluster
from operators.engine.status.reconcile import reconcile
from operators.sources.trim import (
    LAST_APPLIED,
    Trim,
    trim_claim,
    trim_csi_node,
    trim_gate_status,
    trim_node,
    trim_pod,
    trim_selector,
    trim_storage_class,
    trim_volume,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "hack" / "examples"
NOW = datetime.datetime(2026, 11, 23, tzinfo=datetime.UTC)
WHOLE = "*"
ITEM = "[]"

Path = tuple[str, ...]


def _wrap(value: Any, path: Path, log: set[Path]) -> Any:
    if isinstance(value, dict):
        return Recording(value, path, log)
    if isinstance(value, list):
        return RecordingList(value, path, log)
    return value


class Recording(dict[str, Any]):
    """A dict that logs the path of every key read (``*`` when it is read whole: iterated or copied)."""

    def __init__(self, data: dict[str, Any], path: Path, log: set[Path]) -> None:
        super().__init__(data)
        self._path, self._log = path, log

    def __getitem__(self, key: str) -> Any:
        self._log.add((*self._path, key))
        return _wrap(super().__getitem__(key), (*self._path, key), self._log)

    def get(self, key: str, default: Any = None) -> Any:
        self._log.add((*self._path, key))
        return _wrap(super().__getitem__(key), (*self._path, key), self._log) if key in self else default

    def __iter__(self) -> Iterator[str]:
        self._log.add((*self._path, WHOLE))
        return super().__iter__()

    def keys(self) -> Any:
        self._log.add((*self._path, WHOLE))
        return super().keys()

    def items(self) -> Any:
        self._log.add((*self._path, WHOLE))
        return [(key, _wrap(value, (*self._path, key), self._log)) for key, value in super().items()]

    def values(self) -> Any:
        self._log.add((*self._path, WHOLE))
        return [_wrap(value, (*self._path, key), self._log) for key, value in super().items()]


class RecordingList(list[Any]):
    def __init__(self, data: list[Any], path: Path, log: set[Path]) -> None:
        super().__init__(data)
        self._path, self._log = path, log

    def __iter__(self) -> Iterator[Any]:
        for value in super().__iter__():
            yield _wrap(value, (*self._path, ITEM), self._log)

    def __getitem__(self, index: Any) -> Any:
        return _wrap(super().__getitem__(index), (*self._path, ITEM), self._log)


def documents(name: str) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all((EXAMPLES / name).read_text()) if document]


RICH_NODE_EXTRAS = {
    "metadata": {"uid": "n-uid", "annotations": {LAST_APPLIED: "{}"}, "managedFields": [{"manager": "kubelet"}]},
    "spec": {"unschedulable": False, "taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]},
    "status": {"conditions": [{"type": "Ready", "status": "True"}], "images": [{"names": ["busybox"]}]},
}
FULL_SELECTOR = {"matchLabels": {"app": "x"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}
# a pod affinity term with every field kube-scheduler's InterPodAffinity reads
FULL_TERM = {
    "labelSelector": FULL_SELECTOR,
    "topologyKey": "zone",
    "namespaces": ["default"],
    "namespaceSelector": FULL_SELECTOR,
    "matchLabelKeys": ["pod-template-hash"],
    "mismatchLabelKeys": ["t"],
}
RICH_POD_EXTRAS = {
    "metadata": {
        "uid": "p-uid",
        "creationTimestamp": "2026-11-01T00:00:00Z",
        "deletionTimestamp": "2026-11-02T00:00:00Z",
        "ownerReferences": [
            {"kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "apiVersion": "apps/v1", "controller": True}
        ],
        "managedFields": [{"manager": "kubectl"}],
    },
    "spec": {
        "priority": 100,
        "priorityClassName": "system-node-critical",
        "overhead": {"cpu": "10m"},
        "tolerations": [{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "schedulingGates": [{"name": "netaware.io/topology-order"}, {"name": "example.com/quota"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]
                }
            },
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [FULL_TERM],
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": FULL_TERM}],
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [FULL_TERM],
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": FULL_TERM}],
            },
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "minDomains": 2,
                "nodeAffinityPolicy": "Honor",
                "nodeTaintsPolicy": "Ignore",
                "labelSelector": FULL_SELECTOR,
                "matchLabelKeys": ["pod-template-hash"],
            }
        ],
        "volumes": [
            {"name": "scratch", "emptyDir": {}},
            {"name": "config", "configMap": {"name": "c"}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data", "readOnly": False}},
            {"name": "eph", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
            {"name": "pd", "gcePersistentDisk": {"pdName": "pd-1", "readOnly": True}},
            {"name": "ebs", "awsElasticBlockStore": {"volumeID": "vol-1", "readOnly": False}},
            {"name": "iscsi", "iscsi": {"iqn": "iqn.x", "targetPortal": "10.0.0.1:3260", "lun": 0, "readOnly": True}},
            {"name": "rbd", "rbd": {"monitors": ["m1"], "pool": "p", "image": "i", "readOnly": False}},
        ],
        "initContainers": [
            {"name": "init", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}},
            {
                "name": "sidecar",
                "restartPolicy": "Always",
                "image": "envoy",
                "ports": [{"containerPort": 9901, "hostPort": 9901, "hostIP": "10.0.0.1", "protocol": "TCP"}],
            },
        ],
        "hostNetwork": False,
    },
    "status": {"qosClass": "Burstable", "podIP": "10.0.0.9", "conditions": [{"type": "Ready"}]},
}


META_EXTRAS = {"resourceVersion": "7", "managedFields": [{"manager": "kubectl"}], "generation": 2}
# the kinds kube-scheduler's volume plugins and default spread selector read, with fields they do not read
STORAGE_AND_SELECTORS: list[dict[str, Any]] = [
    {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "data",
            "namespace": "default",
            "uid": "c-uid",
            "deletionTimestamp": "2026-11-02T00:00:00Z",
            "labels": {"app": "db"},
            **META_EXTRAS,
            "annotations": {
                "pv.kubernetes.io/bind-completed": "yes",
                "volume.kubernetes.io/selected-node": "n-1",
                "volume.beta.kubernetes.io/storage-class": "fast",
                LAST_APPLIED: "{}",
                "pv.kubernetes.io/bound-by-controller": "yes",
            },
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": "p",
                    "uid": "p-uid",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "finalizers": ["kubernetes.io/pvc-protection"],
        },
        "spec": {
            "volumeName": "pv-1",
            "storageClassName": "fast",
            "accessModes": ["ReadWriteOnce"],
            "volumeMode": "Filesystem",
            "selector": FULL_SELECTOR,
            "volumeAttributesClassName": "gold",
            "dataSource": {"kind": "VolumeSnapshot", "name": "s"},
            "resources": {"requests": {"storage": "10Gi", "other": "1"}, "limits": {"storage": "20Gi"}},
        },
        "status": {"phase": "Bound", "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"]},
    },
    {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": "pv-1",
            "uid": "v-uid",
            "deletionTimestamp": "2026-11-02T00:00:00Z",
            **META_EXTRAS,
            "labels": {"topology.kubernetes.io/zone": "Z1"},
            "annotations": {
                "volume.beta.kubernetes.io/storage-class": "fast",
                "pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com",
            },
        },
        "spec": {
            "storageClassName": "fast",
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "volumeMode": "Filesystem",
            "volumeAttributesClassName": "gold",
            "persistentVolumeReclaimPolicy": "Delete",
            "mountOptions": ["noatime"],
            "claimRef": {
                "namespace": "default",
                "name": "data",
                "uid": "c-uid",
                "kind": "PersistentVolumeClaim",
                "resourceVersion": "6",
            },
            "csi": {
                "driver": "ebs.csi.aws.com",
                "volumeHandle": "vol-1",
                "fsType": "ext4",
                "volumeAttributes": {"a": "b"},
            },
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["Z1"]}
                            ],
                            "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n-9"]}],
                        }
                    ]
                }
            },
        },
        "status": {"phase": "Bound", "lastPhaseTransitionTime": "2026-11-01T00:00:00Z"},
    },
    {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "fast", **META_EXTRAS},
        "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete",
        "parameters": {"type": "gp3"},
        "allowVolumeExpansion": True,
        "allowedTopologies": [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["Z1"]}]}],
    },
    {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": "n-1", **META_EXTRAS},
        "spec": {
            "drivers": [
                {"name": "ebs.csi.aws.com", "nodeID": "i-1", "topologyKeys": ["zone"], "allocatable": {"count": 25}}
            ]
        },
    },
    {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "default", **META_EXTRAS},
        "spec": {"selector": {"app": "p1"}, "ports": [{"port": 80}], "clusterIP": "10.0.0.1"},
        "status": {"loadBalancer": {}},
    },
    {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "rs", "namespace": "default", **META_EXTRAS},
        "spec": {
            "replicas": 2,
            "selector": {
                "matchLabels": {"app": "p1"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}],
            },
            "template": {"metadata": {"labels": {"app": "p1"}}},
        },
        "status": {"replicas": 2, "readyReplicas": 1},
    },
    {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "ss", "namespace": "default", **META_EXTRAS},
        "spec": {"selector": FULL_SELECTOR, "serviceName": "db"},
        "status": {"replicas": 1},
    },
    {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "rc", "namespace": "default", **META_EXTRAS},
        "spec": {"selector": {"app": "old"}, "replicas": 1},
        "status": {"replicas": 1},
    },
]
NEW_KIND_TRIMS: dict[str, Trim] = {
    "PersistentVolumeClaim": trim_claim,
    "PersistentVolume": trim_volume,
    "StorageClass": trim_storage_class,
    "CSINode": trim_csi_node,
    "Service": trim_selector,
    "ReplicaSet": trim_selector,
    "StatefulSet": trim_selector,
    "ReplicationController": trim_selector,
}


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def fixture() -> list[dict[str, Any]]:
    """The example cluster, every node and pod enriched with the fields the engine may read (and some it
    does not)."""
    objects = documents("cluster.yaml") + documents("pods.yaml") + documents("appgroup-a1.yaml")
    objects += documents("networktopology.yaml") + documents("netperf-configmap.yaml")
    objects += documents("slo-controller-config.yaml")
    enriched = []
    for obj in objects:
        rich = obj
        if obj.get("kind") == "Node":
            rich = _merge(obj, RICH_NODE_EXTRAS)
        elif obj.get("kind") == "Pod":
            rich = _merge(obj, RICH_POD_EXTRAS)
            resources = {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}}
            rich["spec"]["containers"][0].setdefault("resources", resources)
            rich["spec"]["containers"][0]["ports"] = [
                {"containerPort": 80, "name": "http"},
                {"containerPort": 53, "hostPort": 53, "hostIP": "0.0.0.0", "protocol": "UDP"},
            ]
        enriched.append(rich)
    return enriched + copy.deepcopy(STORAGE_AND_SELECTORS)


def run_engine(objects: list[dict[str, Any]]) -> None:
    """Every engine entry point a live component runs over a cluster cache's pods and nodes."""
    snapshot = build_snapshot(objects)
    reconcile(snapshot, NOW)
    policy = parse_policy(yaml.safe_load((ROOT / "hack" / "configs" / "descheduler-policy.yaml").read_text()))
    plan(snapshot, policy, NOW)
    config = parse_config(yaml.safe_load((ROOT / "hack" / "configs" / "scheduler-config.yaml").read_text()))
    index = ClusterIndex.build(snapshot)
    for pod in snapshot.pods:
        state = volumes.prefilter(pod, snapshot)
        volumes.prefilter_problem(state)
        defaults.default_selector(pod, snapshot)
        for node in snapshot.nodes:
            volumes.failure(state, node)
            for check in (volumes.restrictions_filter, volumes.limits_filter, volumes.zone_filter):
                if state is not None and not state.problem:
                    check(state, node)
        schedule(pod, index, config)
        evictability.protection(pod)
        evictability.order_key(pod, 0.5)
        for node in snapshot.nodes:
            fit.tolerates(pod, node)
            fit.placement_allows(pod, node)
    Cluster.from_snapshot(snapshot, 1_000_000_000)


def _at(obj: Any, path: Path) -> list[Any]:
    """The values at ``path`` (``[]`` steps into every list item); ``*`` reads the container itself."""
    values = [obj]
    for step in path:
        if step == WHOLE:
            break
        found = []
        for value in values:
            if step == ITEM and isinstance(value, list):
                found.extend(value)
            elif isinstance(value, dict) and step in value:
                found.append(value[step])
        values = found
    return values


def test_the_trim_keeps_every_field_the_engine_reads() -> None:
    objects = fixture()
    read: dict[str, set[Path]] = {"Node": set(), "Pod": set(), **{kind: set() for kind in NEW_KIND_TRIMS}}
    recorded = [
        Recording(obj, (), read[obj["kind"]]) if obj.get("kind") in read else obj for obj in copy.deepcopy(objects)
    ]
    run_engine(recorded)
    trims = {"Node": trim_node, "Pod": trim_pod, **NEW_KIND_TRIMS}
    assert all(read.values())
    maps = {("metadata", "labels"), ("metadata", "annotations")}
    for kind, logged in read.items():
        originals = [obj for obj in objects if obj.get("kind") == kind]
        # A key read from labels or annotations is a read of the map (the records view it whole), any key.
        # (The storage kinds read three annotations by key: those are checked key by key.)
        whole = kind in ("Pod", "Node")
        paths = {(*path[:2], WHOLE) if whole and path[:2] in maps and len(path) == 3 else path for path in logged}
        for path in sorted(paths):
            if path[:1] in (("apiVersion",), ("kind",)):
                continue  # list items carry neither; the cache adds them back
            if path[-1] == LAST_APPLIED:
                continue  # read only as part of copying all annotations: a copy of the spec, dropped by design
            if path[-1] != WHOLE:
                assert any(_at(obj, path) for obj in originals), f"{kind} {'.'.join(path)}: add it to the fixture"
            for original in originals:
                trimmed = trims[kind](copy.deepcopy(original))
                kept, was = _at(trimmed, path), _at(original, path)
                if path[-1] != WHOLE and any(isinstance(value, (dict, list)) for value in was):
                    continue  # a step on the way: what is read below it is logged (and checked) on its own
                if path[-2:] == ("annotations", WHOLE):
                    was = [{k: v for k, v in value.items() if k != LAST_APPLIED} for value in was]
                if kind == "Pod" and path[:3] == ("spec", "volumes", ITEM):  # only the volumes read are kept
                    kept_volumes = [v for v in original["spec"]["volumes"] if "configMap" not in v]
                    was = _at({"spec": {"volumes": kept_volumes}}, path)
                assert kept == was, f"{kind} {'.'.join(path)}: the trim changed {was!r} into {kept!r}"


def test_the_trim_drops_what_the_engine_does_not_read() -> None:
    pod = fixture()[-1] if fixture()[-1]["kind"] == "Pod" else next(o for o in fixture() if o["kind"] == "Pod")
    trimmed = trim_pod(pod)
    assert "managedFields" not in trimmed["metadata"] and "resourceVersion" not in trimmed["metadata"]
    assert "podIP" not in trimmed["status"] and "hostNetwork" not in trimmed["spec"]
    assert [volume["name"] for volume in trimmed["spec"]["volumes"]] == [
        "scratch",
        "data",
        "eph",
        "pd",
        "ebs",
        "iscsi",
        "rbd",
    ]
    assert trimmed["spec"]["volumes"][2] == {"name": "eph", "ephemeral": {}}  # the claim template is not read
    assert trimmed["metadata"]["ownerReferences"] == [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "controller": True}
    ]
    assert sorted(trimmed["spec"]["affinity"]) == ["nodeAffinity", "podAffinity", "podAntiAffinity"]
    assert trimmed["spec"]["initContainers"][1] == {
        "restartPolicy": "Always",
        "ports": [{"hostPort": 9901, "hostIP": "10.0.0.1", "protocol": "TCP"}],
    }


def test_the_new_kinds_keep_only_what_is_read() -> None:
    claim, volume, storage_class, csi_node, service, replica_set = (
        trim(copy.deepcopy(raw))
        for trim, raw in list(zip(NEW_KIND_TRIMS.values(), STORAGE_AND_SELECTORS, strict=True))[:6]
    )
    assert claim["metadata"]["annotations"] == {
        "pv.kubernetes.io/bind-completed": "yes",
        "volume.kubernetes.io/selected-node": "n-1",
        "volume.beta.kubernetes.io/storage-class": "fast",
    }
    assert claim["metadata"]["ownerReferences"] == [{"uid": "p-uid", "controller": True}]
    assert claim["spec"]["resources"] == {"requests": {"storage": "10Gi"}} and "dataSource" not in claim["spec"]
    assert claim["status"] == {"phase": "Bound"} and "resourceVersion" not in claim["metadata"]
    assert volume["spec"]["csi"] == {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"}
    assert volume["spec"]["claimRef"] == {"namespace": "default", "name": "data", "uid": "c-uid"}
    assert "mountOptions" not in volume["spec"] and volume["status"] == {"phase": "Bound"}
    assert sorted(storage_class) == ["allowedTopologies", "metadata", "provisioner", "volumeBindingMode"]
    assert csi_node["spec"] == {"drivers": [{"name": "ebs.csi.aws.com", "allocatable": {"count": 25}}]}
    assert service == {"metadata": {"name": "web", "namespace": "default"}, "spec": {"selector": {"app": "p1"}}}
    assert "status" not in replica_set and sorted(replica_set["spec"]) == ["selector"]
    # a ReplicaSet's status moving (its replica counts) is no change once trimmed
    moved = copy.deepcopy(STORAGE_AND_SELECTORS[5])
    moved["status"]["readyReplicas"] = 2
    moved["metadata"]["resourceVersion"] = "8"
    assert trim_selector(moved) == replica_set


def _appgroup(
    ready: str = "True", running: int = 1, version: str = "7", message: str = "2 workloads"
) -> dict[str, Any]:
    return {
        "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
        "kind": "AppGroup",
        "metadata": {"name": "a1", "namespace": "default", "resourceVersion": version, "generation": 1},
        "spec": {"numMembers": 2, "topologySortingAlgorithm": "KahnSort", "workloads": []},
        "status": {
            "runningWorkloads": running,
            "topologyOrder": [{"workload": {"kind": "Deployment", "name": "p1", "selector": "p1"}, "index": 1}],
            "placements": [{"selector": "p1", "pods": [], "podCount": running}],
            "conditions": [
                {"type": "Ready", "status": ready, "reason": "TopologyOrdered", "message": message,
                 "lastTransitionTime": "2026-11-23T00:00:00Z", "observedGeneration": 1},
                {"type": "Complete", "status": "False", "reason": "Waiting", "message": f"{running} running",
                 "lastTransitionTime": "2026-11-23T00:00:00Z"},
            ],
        },
    }  # fmt: skip


def test_the_webhooks_appgroups_keep_the_order_and_ready_alone() -> None:
    trimmed = trim_gate_status(_appgroup())
    assert trimmed["status"] == {
        "topologyOrder": [{"workload": {"kind": "Deployment", "name": "p1", "selector": "p1"}, "index": 1}],
        "conditions": [{"type": "Ready", "status": "True", "reason": "TopologyOrdered",
                        "lastTransitionTime": "2026-11-23T00:00:00Z"}],
    }  # fmt: skip
    assert "resourceVersion" not in trimmed["metadata"] and trimmed["spec"] == _appgroup()["spec"]
    # what the controller writes as pods run is no change; Ready turning False is one
    assert trim_gate_status(_appgroup(running=2, version="8", message="other")) == trimmed
    assert trim_gate_status(_appgroup(ready="False")) != trimmed
    # without a status, or with an empty one: the spec alone
    assert "status" not in trim_gate_status({**_appgroup(), "status": {"runningWorkloads": 0}})


def test_the_gate_decides_the_same_on_the_webhooks_appgroups() -> None:
    pod = {"metadata": {"labels": {"appgroup.diktyo.x-k8s.io": "a1", "appgroup.diktyo.x-k8s.io.workload": "p1"}},
           "spec": {"containers": []}}  # fmt: skip
    for ready in ("True", "False"):
        whole = _appgroup(ready)
        whole["metadata"]["annotations"] = {"netaware.io/ordered-scheduling": "plan"}
        groups = [AppGroup.model_validate(raw) for raw in (whole, trim_gate_status(copy.deepcopy(whole)))]
        assert [needs_gate(pod, "default", [group], False) for group in groups] == [ready == "True"] * 2
