"""kube-scheduler is the judge: the engine's filters against the real kube-scheduler, pod by pod.

Six KWOK nodes of their own (two zones of two, a third zone with one node and a node without a zone label; one
node with a second taint, one cordoned; 2 cpus, 4 GiB and 6 pods each) and one PersistentVolume on d1. Then, one
at a time, 200 random pods (requests, tolerations, node selectors and node affinity, host ports, required
inter-pod affinity and anti-affinity, topology spread constraints, claims — bound to d1's volume or missing): for
each, the engine decides from a fresh read of the cluster which nodes pass kube-scheduler's default filters
(`schedule`, the in-tree filters only), then the pod is created and the real kube-scheduler decides. Where it
binds, the node must be one the engine passed; where it cannot, its PodScheduled condition must be the engine's
FailedScheduling message word for word (``0/N nodes are available: ...``, preemption's part aside); and the
engine must have passed no node. An unschedulable pod is deleted (its retries would change the state), and a
quarter of the steps delete a bound pod, so that the nodes neither stay empty nor fill up.
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from hack.control_plane.cluster import KWOK_ANNOTATION, ControlPlane
from operators.api.config.scheduler import IN_TREE_FILTERS, SchedulerConfig
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.scheduling.explain import unavailable
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.schedule import PASSED, schedule
from tests.support.e2e import delete_namespace

pytestmark = pytest.mark.e2e

NAMESPACE = "kube-differential"
MARK = "netaware.io/differential"  # the label of the test's nodes, and the key of the taint every pod tolerates
ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
PODS = 200
CONFIG = dataclasses.replace(SchedulerConfig(), filters=IN_TREE_FILTERS)
# (kind, list path) of what the engine reads
READ = (
    ("Node", "/api/v1/nodes"),
    ("Pod", "/api/v1/pods"),
    ("Namespace", "/api/v1/namespaces"),
    ("PersistentVolumeClaim", "/api/v1/persistentvolumeclaims"),
    ("PersistentVolume", "/api/v1/persistentvolumes"),
    ("StorageClass", "/apis/storage.k8s.io/v1/storageclasses"),
    ("CSINode", "/apis/storage.k8s.io/v1/csinodes"),
    ("Service", "/api/v1/services"),
    ("ReplicaSet", "/apis/apps/v1/replicasets"),
    ("StatefulSet", "/apis/apps/v1/statefulsets"),
    ("ReplicationController", "/api/v1/replicationcontrollers"),
)
API_VERSIONS = {"StorageClass": "storage.k8s.io/v1", "CSINode": "storage.k8s.io/v1", "ReplicaSet": "apps/v1",
                "StatefulSet": "apps/v1"}  # fmt: skip


class Api:
    """The API server over HTTPS with the admin's certificate (a request per call: no client library between)."""

    def __init__(self, plane: ControlPlane) -> None:
        self.server = plane.server
        self.context = plane.admin_context()

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.server + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=30, context=self.context) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            if error.code == 404 and method in ("GET", "DELETE"):
                return None
            raise AssertionError(f"{method} {path}: {error.code} {error.read()[:300]!r}") from None


def nodes() -> list[dict[str, Any]]:
    def node(name: str, zone: str | None, taints: list[dict[str, str]] = (), cordoned: bool = False) -> dict[str, Any]:  # type: ignore[assignment]
        labels = {MARK: "yes", HOST: name, **({ZONE: zone} if zone else {})}
        resources = {"cpu": "2", "memory": "4Gi", "pods": "6"}
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": labels, "annotations": {KWOK_ANNOTATION: "fake"}},
                "spec": {"taints": [{"key": MARK, "value": "yes", "effect": "NoSchedule"}, *taints],
                         "unschedulable": cordoned},
                "status": {"allocatable": resources, "capacity": resources}}  # fmt: skip

    dedicated = [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]
    return [node("d1", "dz-a"), node("d2", "dz-a"), node("d3", "dz-b"), node("d4", "dz-b", dedicated),
            node("d5", "dz-c", cordoned=True), node("d6", None)]  # fmt: skip


def storage() -> list[tuple[str, dict[str, Any]]]:
    """d1's local volume and the claim bound to it: (collection path, object)."""
    volume = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "diff-d1"},
              "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                       "local": {"path": "/mnt/d1"},
                       "claimRef": {"namespace": NAMESPACE, "name": "data-d1"},
                       "nodeAffinity": {"required": {"nodeSelectorTerms": [
                           {"matchExpressions": [{"key": HOST, "operator": "In", "values": ["d1"]}]}]}}}}  # fmt: skip
    meta = {"name": "data-d1", "namespace": NAMESPACE}
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
             "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local", "volumeName": "diff-d1",
                      "resources": {"requests": {"storage": "1Gi"}}}}  # fmt: skip
    return [("/api/v1/persistentvolumes", volume), (f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims", claim)]


def random_pod(rng: random.Random, index: int) -> dict[str, Any]:
    """One pod of the mix of the module docstring."""
    app = rng.choice("abc")
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {
            "cpu": rng.choice(["100m", "250m", "500m", "1"]), "memory": rng.choice(["128Mi", "512Mi", "1Gi"])}}}],
        "tolerations": [{"key": MARK, "operator": "Exists", "effect": "NoSchedule"}],
        "nodeSelector": {MARK: "yes"},
        "terminationGracePeriodSeconds": 0,
    }  # fmt: skip
    if rng.random() < 0.3:
        spec["tolerations"].append({"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"})
    if rng.random() < 0.15:
        spec["nodeSelector"][ZONE] = rng.choice(["dz-a", "dz-b"])
    if rng.random() < 0.1:
        avoid = {"key": ZONE, "operator": "NotIn", "values": [rng.choice(["dz-a", "dz-b"])]}
        required = {"nodeSelectorTerms": [{"matchExpressions": [avoid]}]}
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    if rng.random() < 0.15:
        port = rng.choice([8080, 8081])
        spec["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]

    def term() -> dict[str, Any]:
        return {"labelSelector": {"matchLabels": {"app": rng.choice("abc")}}, "topologyKey": rng.choice([HOST, ZONE])}

    inter: dict[str, Any] = {}
    if rng.random() < 0.2:
        inter["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term()]}
    if rng.random() < 0.12:
        inter["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term()]}
    if inter:
        spec["affinity"] = {**spec.get("affinity", {}), **inter}
    if rng.random() < 0.25:
        selector = {"matchLabels": {"app": rng.choice("abc")}}
        constraint = {"maxSkew": rng.choice([1, 2]), "topologyKey": rng.choice([HOST, ZONE]),
                      "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}  # fmt: skip
        if rng.random() < 0.3:
            constraint["minDomains"] = rng.choice([3, 4])
        spec["topologySpreadConstraints"] = [constraint]
    if rng.random() < 0.1:
        claim = rng.choice(["data-d1", "data-d1", "missing"])
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{index}", "namespace": NAMESPACE,
            "labels": {"app": app}}, "spec": spec}  # fmt: skip


def read_cluster(api: Api) -> list[dict[str, Any]]:
    objects = []
    for kind, path in READ:
        for item in (api.call("GET", path) or {}).get("items", []):
            objects.append({"apiVersion": API_VERSIONS.get(kind, "v1"), "kind": kind, **item})
    return objects


def engine_verdict(api: Api, pod: dict[str, Any]) -> tuple[set[str], str]:
    """The nodes the engine passes for ``pod`` (not yet created) and, when none, its FailedScheduling message."""
    objects = [*read_cluster(api), {**pod, "status": {"phase": "Pending"}}]
    index = ClusterIndex.build(build_snapshot(objects))
    target = next(p for p in index.snapshot.pods if p.namespace == NAMESPACE and p.name == pod["metadata"]["name"])
    result = schedule(target, index, CONFIG, stages=("filter",))
    passing = {node for node, verdicts in result.filters.items() if all(v == PASSED for v in verdicts.values())}
    return passing, "" if passing else unavailable(result)


def kube_verdict(api: Api, name: str) -> tuple[str, str]:
    """(node, "") once kube-scheduler binds the pod; ("", message) once it reports it unschedulable."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pod = api.call("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")
        if pod["spec"].get("nodeName"):
            return pod["spec"]["nodeName"], ""
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition["type"] == "PodScheduled" and condition.get("reason") == "Unschedulable":
                return "", condition["message"]
        time.sleep(0.02)
    raise AssertionError(f"kube-scheduler decided nothing for {name} in 30 s")


def delete(api: Api, name: str) -> None:
    api.call("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}", {"gracePeriodSeconds": 0})
    deadline = time.monotonic() + 30
    while api.call("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}") is not None:
        assert time.monotonic() < deadline, f"{name} not deleted in 30 s"
        time.sleep(0.02)


@pytest.fixture
def judged(cluster: ControlPlane) -> Iterator[Api]:
    api = Api(cluster)
    api.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": NAMESPACE, "labels": {"team": "diff"}}})  # fmt: skip
    made = nodes()
    try:
        for node in made:
            api.call("POST", "/api/v1/nodes", node)

        def settled(node: dict[str, Any]) -> bool:  # Ready, and the node controller's not-ready taints gone
            read = api.call("GET", f"/api/v1/nodes/{node['metadata']['name']}")
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in read["status"].get("conditions", []))
            keys = {taint["key"] for taint in read["spec"].get("taints") or []}
            return ready and not keys & {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}

        deadline = time.monotonic() + 60
        while not all(settled(node) for node in made):
            assert time.monotonic() < deadline, "the test's KWOK nodes not Ready and untainted in 60 s"
            time.sleep(0.2)
        for path, body in storage():
            api.call("POST", path, body)
        yield api
    finally:
        delete_namespace(cluster, NAMESPACE)
        cluster.kubectl("delete", "persistentvolume", "diff-d1", "--ignore-not-found", check=False)
        for node in made:
            cluster.kubectl("delete", "node", node["metadata"]["name"], "--ignore-not-found", check=False)


def test_every_decision_of_the_engine_is_kube_schedulers(judged: Api) -> None:
    api, rng = judged, random.Random(20261127)
    bound: list[str] = []
    tally: Counter[str] = Counter()
    disagreements = []
    for index in range(PODS):
        pod = random_pod(rng, index)
        name = pod["metadata"]["name"]
        passing, message = engine_verdict(api, pod)
        api.call("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod)
        node, reported = kube_verdict(api, name)
        if node:
            tally["bound"] += 1
            bound.append(name)
            if node not in passing:
                disagreements.append(f"{name}: kube-scheduler bound it to {node}; the engine passed {sorted(passing)}"
                                     f" ({message}) for {json.dumps(pod['spec'])}")  # fmt: skip
        else:
            tally["unschedulable"] += 1
            # "0/N nodes are available: <PreFilter's or the filters' reasons>." then, after a space, what the
            # PostFilter plugins (preemption) said, which the engine does not model
            if passing or not (reported == message or reported.startswith(message + " ")):
                disagreements.append(f"{name}: kube-scheduler: {reported!r}; the engine passed {sorted(passing)}: "
                                     f"{message!r} for {json.dumps(pod['spec'])}")  # fmt: skip
            delete(api, name)
        if bound and rng.random() < 0.25:
            delete(api, bound.pop(rng.randrange(len(bound))))
    print(f"kube-scheduler vs the engine: {dict(tally)} of {PODS} pods; {len(disagreements)} disagreements")
    print("\n".join(disagreements))
    assert disagreements == []
    # the mix reached both outcomes
    assert tally["bound"] >= 50 and tally["unschedulable"] >= 30, tally
