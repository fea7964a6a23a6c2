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

from operators.api.config.descheduler import parse_policy
from operators.api.config.scheduler import parse_config
from operators.engine.cluster import fit
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.descheduling import evictability
from operators.engine.descheduling.lownodeload import plan
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.schedule import schedule
from operators.engine.simulation.cluster import Cluster
from operators.engine.status.reconcile import reconcile
from operators.sources.trim import LAST_APPLIED, trim_node, trim_pod

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
RICH_POD_EXTRAS = {
    "metadata": {
        "uid": "p-uid",
        "creationTimestamp": "2026-11-01T00:00:00Z",
        "deletionTimestamp": "2026-11-02T00:00:00Z",
        "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "apiVersion": "apps/v1"}],
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
            "podAntiAffinity": {"x": 1},
        },
        "volumes": [{"name": "scratch", "emptyDir": {}}, {"name": "config", "configMap": {"name": "c"}}],
        "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}}],
        "hostNetwork": False,
    },
    "status": {"qosClass": "Burstable", "podIP": "10.0.0.9", "conditions": [{"type": "Ready"}]},
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
        enriched.append(rich)
    return enriched


def run_engine(objects: list[dict[str, Any]]) -> None:
    """Every engine entry point a live component runs over a cluster cache's pods and nodes."""
    snapshot = build_snapshot(objects)
    reconcile(snapshot, NOW)
    policy = parse_policy(yaml.safe_load((ROOT / "hack" / "configs" / "descheduler-policy.yaml").read_text()))
    plan(snapshot, policy, NOW)
    config = parse_config(yaml.safe_load((ROOT / "hack" / "configs" / "scheduler-config.yaml").read_text()))
    index = ClusterIndex.build(snapshot)
    for pod in snapshot.pods:
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
    read: dict[str, set[Path]] = {"Node": set(), "Pod": set()}
    recorded = [
        Recording(obj, (), read[obj["kind"]]) if obj.get("kind") in read else obj for obj in copy.deepcopy(objects)
    ]
    run_engine(recorded)
    trims = {"Node": trim_node, "Pod": trim_pod}
    assert read["Pod"] and read["Node"]
    maps = {("metadata", "labels"), ("metadata", "annotations")}
    for kind, logged in read.items():
        originals = [obj for obj in objects if obj.get("kind") == kind]
        # A key read from labels or annotations is a read of the map (the records view it whole), any key.
        paths = {(*path[:2], WHOLE) if path[:2] in maps and len(path) == 3 else path for path in logged}
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
                if path[:3] == ("spec", "volumes", ITEM):  # only local volumes are read (and kept)
                    was = _at({"spec": {"volumes": [v for v in original["spec"]["volumes"] if "emptyDir" in v]}}, path)
                assert kept == was, f"{kind} {'.'.join(path)}: the trim changed {was!r} into {kept!r}"


def test_the_trim_drops_what_the_engine_does_not_read() -> None:
    pod = fixture()[-1] if fixture()[-1]["kind"] == "Pod" else next(o for o in fixture() if o["kind"] == "Pod")
    trimmed = trim_pod(pod)
    assert "managedFields" not in trimmed["metadata"] and "resourceVersion" not in trimmed["metadata"]
    assert "podIP" not in trimmed["status"] and "hostNetwork" not in trimmed["spec"]
    assert trimmed["spec"]["volumes"] == [{"name": "scratch", "emptyDir": {}}]
    assert trimmed["metadata"]["ownerReferences"] == [{"kind": "ReplicaSet", "name": "rs"}]
    assert "podAntiAffinity" not in trimmed["spec"]["affinity"]
