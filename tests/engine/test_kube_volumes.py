"""kube-scheduler's volume filters (operators/engine/cluster/kube/volumes.py, binding.py) against upstream's tables,
kubernetes v1.37.2 ``pkg/scheduler/framework/plugins``: volumezone/volume_zone_test.go, volumebinding/
volume_binding_test.go (its Filter cases) and binder_test.go (FindPodVolumes without a CSIDriver),
nodevolumelimits/csi_test.go (the cases without VolumeAttachments nor in-tree migration), volumerestrictions/
volume_restrictions_test.go. Objects, cases and expected statuses are copied from the tables; where a table uses a
fake lister, the message is the real lister's (``persistentvolumeclaim`` where the fake says
``persistentvolumeclaims``, ``storageclass.storage.k8s.io`` for ``storageclasses.storage.k8s.io``), which is what
kube-scheduler writes in its events.

Each plugin is run alone as upstream's tests run it: its PreFilter (a message: the pod is rejected; SKIP: its Filter
does not run), then its Filter on the node. The last tests run the four in kube-scheduler's order."""

from __future__ import annotations

from typing import Any

import pytest

from operators.engine.cluster.kube import volumes
from operators.engine.cluster.kube.binding import BIND_CONFLICT, NODE_CONFLICT, PV_NOT_EXIST, UNBOUND_IMMEDIATE
from operators.engine.cluster.snapshot import build_snapshot

SKIP = "Skip"
PASS: tuple[str, tuple[str, ...]] = ("", ())
HOSTNAME = "kubernetes.io/hostname"
BETA_ZONE, BETA_REGION = "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region"
ZONE, REGION = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"


# -- builders: the raw objects upstream's helpers make ---------------------------------------------------------------


def node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}}}


def pod(
    name: str,
    *claims: str,
    namespace: str = "default",
    uid: str = "",
    on: str = "",
    volumes_: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    found = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    spec: dict[str, Any] = {"volumes": found + (volumes_ or [])}
    if on:
        spec["nodeName"] = on
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": spec,
        "status": {"phase": "Running" if on else "Pending"},
    }


def pvc(
    name: str,
    namespace: str = "default",
    *,
    volume: str = "",
    storage_class: str | None = None,
    modes: list[str] | None = None,
    request: str = "",
    annotations: dict[str, str] | None = None,
    phase: str = "",
    uid: str = "",
    owner_uid: str | None = None,
    volume_mode: str = "",
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if volume:
        spec["volumeName"] = volume
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if modes:
        spec["accessModes"] = modes
    if request:
        spec["resources"] = {"requests": {"storage": request}}
    if volume_mode:
        spec["volumeMode"] = volume_mode
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid, "annotations": annotations or {}}
    if owner_uid is not None:
        meta["ownerReferences"] = [{"kind": "Pod", "name": "p", "uid": owner_uid, "controller": True}]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase} if phase else {},
    }


def bound_pvc(name: str, volume: str, storage_class: str | None = None, **more: Any) -> dict[str, Any]:
    """makePVC(...).withBoundPV(volume): the volume name and the bind-completed annotation."""
    return pvc(
        name,
        volume=volume,
        storage_class=storage_class,
        annotations={"pv.kubernetes.io/bind-completed": "true"},
        **more,
    )


def pv(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    storage_class: str = "",
    phase: str = "",
    capacity: str = "",
    affinity: dict[str, list[str]] | None = None,
    claim: tuple[str, str, str] | None = None,
    csi: tuple[str, str] | None = None,
    source: dict[str, Any] | None = None,
    volume_mode: str = "",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"storageClassName": storage_class, **(source or {})}
    if capacity:
        spec["capacity"] = {"storage": capacity}
    if affinity is not None:  # withNodeAffinity: one term, an In expression per key
        expressions = [{"key": k, "operator": "In", "values": v} for k, v in affinity.items()]
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}
    if claim is not None:
        spec["claimRef"] = {"namespace": claim[0], "name": claim[1], "uid": claim[2]}
    if csi is not None:
        spec["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    if volume_mode:
        spec["volumeMode"] = volume_mode
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"phase": phase} if phase else {},
    }


def storage_class(
    name: str, mode: str | None = None, provisioner: str = "", topologies: list[dict[str, list[str]]] | None = None
) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
    }
    if mode is not None:
        raw["volumeBindingMode"] = mode
    if topologies is not None:
        raw["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": k, "values": v} for k, v in term.items()]} for term in topologies
        ]
    return raw


def csi_node(name: str, drivers: list[str], limit: int | None) -> dict[str, Any]:
    found = [
        {"name": d, "nodeID": name, **({"allocatable": {"count": limit}} if limit is not None else {})} for d in drivers
    ]
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": found},
    }


def run(
    plugin: str, incoming: dict[str, Any], objects: list[dict[str, Any]], on: dict[str, Any]
) -> tuple[str, tuple[str, ...]]:
    """One plugin as upstream's tests run it: (PreFilter's message or SKIP, ()) or ("", Filter's reasons)."""
    incoming = {**incoming, "spec": {k: v for k, v in incoming["spec"].items() if k != "nodeName"}}
    snapshot = build_snapshot([*objects, incoming, on])
    me = next(p for p in snapshot.pods if p.name == incoming["metadata"]["name"] and not p.node_name)
    state = volumes.new_state(me, snapshot)
    if state is None:
        return (SKIP, ())
    message = dict(volumes.PREFILTERS)[plugin](state)
    if message:
        return (message, ())
    if plugin in state.skipped:
        return (SKIP, ())
    return ("", dict(volumes.FILTERS)[plugin](state, snapshot.node_by_name[on["metadata"]["name"]]))


# -- VolumeZone: TestSingleZone, TestMultiZone, TestWithBinding ------------------------------------------------------

SINGLE_ZONE = [
    pv("Vol_1", labels={BETA_ZONE: "us-west1-a"}),
    pv("Vol_2", labels={BETA_REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_3", labels={BETA_REGION: "us-west1"}),
    pv("Vol_Stable_1", labels={ZONE: "us-west1-a"}),
    pv("Vol_Stable_2", labels={REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_Stable_3", labels={ZONE: "us-west1-a", REGION: "us-west1-a"}),
    *[pvc(f"PVC_{n}", volume=f"Vol_{n}") for n in ("1", "2", "3", "Stable_1", "Stable_2", "Stable_3")],
    pvc("PVC_4", volume="Vol_not_exist"),
]
MULTI_ZONE = [
    pv("Vol_1", labels={BETA_ZONE: "us-west1-a"}),
    pv("Vol_2", labels={BETA_ZONE: "us-west1-b", "uselessLabel": "none"}),
    pv("Vol_3", labels={BETA_ZONE: "us-west1-c__us-west1-a"}),
    pv("Vol_Stable_1", labels={ZONE: "us-west1-a"}),
    pv("Vol_Stable_2", labels={ZONE: "us-west1-c__us-west1-a"}),
    *[pvc(f"PVC_{n}", volume=f"Vol_{n}") for n in ("1", "2", "3", "Stable_1", "Stable_2")],
    pvc("PVC_4", volume="Vol_not_exist"),
]
WITH_BINDING = [
    # Class_Immediate has no volumeBindingMode in upstream's table; the API server stores it as Immediate
    storage_class("Class_Immediate", "Immediate"),
    storage_class("Class_Wait", "WaitForFirstConsumer"),
    pv("Vol_1", labels={BETA_ZONE: "us-west1-a"}),
    pvc("PVC_1", volume="Vol_1"),
    pvc("PVC_NoSC", storage_class="Class_0"),
    pvc("PVC_EmptySC"),
    pvc("PVC_WaitSC", storage_class="Class_Wait"),
    pvc("PVC_ImmediateSC", storage_class="Class_Immediate"),
]
USELESS = {"uselessLabel": "none"}
CONFLICT = ("", (volumes.ZONE_CONFLICT,))

ZONE_CASES = [
    # TestSingleZone
    ("pod without volume", SINGLE_ZONE, pod("pod_1"), {BETA_ZONE: "us-west1-a"}, (SKIP, ())),
    ("node without labels", SINGLE_ZONE, pod("pod_1", "PVC_1"), {}, PASS),
    ("beta zone label matched", SINGLE_ZONE, pod("pod_1", "PVC_1"), {BETA_ZONE: "us-west1-a", **USELESS}, PASS),
    ("beta region label matched", SINGLE_ZONE, pod("pod_1", "PVC_2"), {BETA_REGION: "us-west1", **USELESS}, PASS),
    (
        "beta region label doesn't match",
        SINGLE_ZONE,
        pod("pod_1", "PVC_2"),
        {BETA_REGION: "no_us-west1", **USELESS},
        CONFLICT,
    ),
    (
        "beta zone label doesn't match",
        SINGLE_ZONE,
        pod("pod_1", "PVC_1"),
        {BETA_ZONE: "no_us-west1-a", **USELESS},
        CONFLICT,
    ),
    ("zone label matched", SINGLE_ZONE, pod("pod_1", "PVC_Stable_1"), {ZONE: "us-west1-a", **USELESS}, PASS),
    ("region label matched", SINGLE_ZONE, pod("pod_1", "PVC_Stable_2"), {REGION: "us-west1", **USELESS}, PASS),
    (
        "region label doesn't match",
        SINGLE_ZONE,
        pod("pod_1", "PVC_Stable_2"),
        {REGION: "no_us-west1", **USELESS},
        CONFLICT,
    ),
    (
        "zone label doesn't match",
        SINGLE_ZONE,
        pod("pod_1", "PVC_Stable_1"),
        {ZONE: "no_us-west1-a", **USELESS},
        CONFLICT,
    ),
    (
        "pv with zone and region, node with only zone",
        SINGLE_ZONE,
        pod("pod_1", "PVC_Stable_3"),
        {ZONE: "us-west1-a"},
        CONFLICT,
    ),
    (
        "pv with zone,node with beta zone",
        SINGLE_ZONE,
        pod("pod_1", "PVC_Stable_1"),
        {BETA_ZONE: "us-west1-a"},
        CONFLICT,
    ),
    ("pv with beta label,node with ga label, matched", SINGLE_ZONE, pod("pod_1", "PVC_1"), {ZONE: "us-west1-a"}, PASS),
    (
        "pv with beta label,node with ga label, don't match",
        SINGLE_ZONE,
        pod("pod_1", "PVC_1"),
        {ZONE: "us-west1-b"},
        CONFLICT,
    ),
    # TestMultiZone
    ("multi: node without labels", MULTI_ZONE, pod("pod_1", "PVC_3"), {}, PASS),
    ("multi: beta zone label matched", MULTI_ZONE, pod("pod_1", "PVC_3"), {BETA_ZONE: "us-west1-a", **USELESS}, PASS),
    (
        "multi: beta zone label doesn't match",
        MULTI_ZONE,
        pod("pod_1", "PVC_1"),
        {BETA_ZONE: "us-west1-b", **USELESS},
        CONFLICT,
    ),
    ("multi: zone label matched", MULTI_ZONE, pod("pod_1", "PVC_Stable_2"), {ZONE: "us-west1-a", **USELESS}, PASS),
    (
        "multi: zone label doesn't match",
        MULTI_ZONE,
        pod("pod_1", "PVC_Stable_1"),
        {ZONE: "us-west1-b", **USELESS},
        CONFLICT,
    ),
    # TestWithBinding
    (
        "label zone failure domain matched",
        WITH_BINDING,
        pod("pod_1", "PVC_1"),
        {BETA_ZONE: "us-west1-a", **USELESS},
        PASS,
    ),
    (
        "unbound volume empty storage class",
        WITH_BINDING,
        pod("pod_1", "PVC_EmptySC"),
        {BETA_ZONE: "us-west1-a"},
        ("PersistentVolumeClaim had no pv name and storageClass name", ()),
    ),
    (
        "unbound volume no storage class",
        WITH_BINDING,
        pod("pod_1", "PVC_NoSC"),
        {BETA_ZONE: "us-west1-a"},
        ('storageclass.storage.k8s.io "Class_0" not found', ()),
    ),
    # upstream: "VolumeBindingMode not set for StorageClass", unreachable once defaulted; an Immediate class's
    # unbound claim is volume_zone.go's "PersistentVolume had no name"
    (
        "unbound volume immediate binding mode",
        WITH_BINDING,
        pod("pod_1", "PVC_ImmediateSC"),
        {BETA_ZONE: "us-west1-a"},
        ("PersistentVolume had no name", ()),
    ),
    (
        "unbound volume wait binding mode",
        WITH_BINDING,
        pod("pod_1", "PVC_WaitSC"),
        {BETA_ZONE: "us-west1-a"},
        (SKIP, ()),
    ),
]


@pytest.mark.parametrize(
    ("objects", "incoming", "labels", "expected"), [c[1:] for c in ZONE_CASES], ids=[c[0] for c in ZONE_CASES]
)
def test_volume_zone(
    objects: list[dict[str, Any]],
    incoming: dict[str, Any],
    labels: dict[str, str],
    expected: tuple[str, tuple[str, ...]],
) -> None:
    assert run(volumes.VOLUME_ZONE, incoming, objects, node("host1", labels)) == expected


# -- VolumeBinding: TestVolumeBinding (Filter) -----------------------------------------------------------------------

IMMEDIATE_SC = storage_class("immediate-sc", "Immediate")
WAIT_SC = storage_class("wait-sc", "WaitForFirstConsumer")
WAIT_HDD_SC = storage_class("wait-hdd-sc", "WaitForFirstConsumer")
WAIT_CAPACITY_SC = storage_class(
    "wait-sc-with-storage-capacity", "WaitForFirstConsumer", "driver-with-storage-capacity"
)
CLASSES = [IMMEDIATE_SC, WAIT_SC, WAIT_HDD_SC, WAIT_CAPACITY_SC]
NODE_KEY = "nodeKey"


def make_node(name: str, **labels: str) -> dict[str, Any]:
    """makeNode(name): the hostname label, and withLabel's."""
    return node(name, {HOSTNAME: name, **labels})


def local_pv(name: str, storage_class: str, capacity: str, host: str) -> dict[str, Any]:
    return pv(name, storage_class=storage_class, phase="Available", capacity=capacity, affinity={HOSTNAME: [host]})


def zonal_pv(name: str, capacity: str, zone: str) -> dict[str, Any]:
    return pv(
        name,
        storage_class="wait-sc",
        phase="Available",
        capacity=capacity,
        affinity={REGION: [f"region-{zone}"], ZONE: [f"zone-{zone}"]},
    )


def zonal_node(name: str, zone: str) -> dict[str, Any]:
    return node(name, {HOSTNAME: name, REGION: f"region-{zone}", ZONE: f"zone-{zone}"})


BIND = ("", (BIND_CONFLICT,))
THREE = [make_node("node-a"), make_node("node-b"), make_node("node-c")]
LOCAL_PVS = [
    local_pv("pv-a-0", "wait-sc", "200Gi", "node-a"),
    local_pv("pv-a-1", "wait-sc", "200Gi", "node-a"),
    local_pv("pv-b-0", "wait-sc", "100Gi", "node-b"),
    local_pv("pv-b-1", "wait-sc", "100Gi", "node-b"),
]
HDD_PVS = [
    local_pv("pv-a-2", "wait-hdd-sc", "200Gi", "node-a"),
    local_pv("pv-a-3", "wait-hdd-sc", "200Gi", "node-a"),
    local_pv("pv-b-2", "wait-hdd-sc", "100Gi", "node-b"),
    local_pv("pv-b-3", "wait-hdd-sc", "100Gi", "node-b"),
]
ZONAL_NODES = [zonal_node(f"zone-{z}-node-{n}", z) for z in "abc" for n in "ab"]
ZONAL_PVS = [
    zonal_pv("pv-a-0", "200Gi", "a"),
    zonal_pv("pv-a-1", "200Gi", "a"),
    zonal_pv("pv-b-0", "100Gi", "b"),
    zonal_pv("pv-b-1", "100Gi", "b"),
]
CAPACITY_NODES = [make_node(f"node-{n}", nodeKey=f"node-{n}") for n in "abc"]

BINDING_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], list[Any]]] = [
    ("pod has not pvcs", pod("pod-a"), [make_node("node-a")], [], [(SKIP, ())]),
    (
        "all bound",
        pod("pod-a", "pvc-a"),
        [make_node("node-a")],
        [bound_pvc("pvc-a", "pv-a", "wait-sc"), pv("pv-a", storage_class="wait-sc", phase="Available")],
        [PASS],
    ),
    (
        "PVC does not exist",
        pod("pod-a", "pvc-a"),
        [make_node("node-a")],
        [],
        [('persistentvolumeclaim "pvc-a" not found', ())],
    ),
    (
        "Part of PVCs do not exist",
        pod("pod-a", "pvc-a", "pvc-b"),
        [make_node("node-a")],
        [bound_pvc("pvc-a", "pv-a", "wait-sc")],
        [('persistentvolumeclaim "pvc-b" not found', ())],
    ),
    (
        "immediate claims not bound",
        pod("pod-a", "pvc-a"),
        [make_node("node-a")],
        [pvc("pvc-a", storage_class="immediate-sc")],
        [(UNBOUND_IMMEDIATE, ())],
    ),
    (
        "unbound claims no matches",
        pod("pod-a", "pvc-a"),
        [make_node("node-a")],
        [pvc("pvc-a", storage_class="wait-sc")],
        [BIND],
    ),
    (
        "bound and unbound unsatisfied",
        pod("pod-a", "pvc-a", "pvc-b"),
        [make_node("node-a", foo="barbar")],
        [
            bound_pvc("pvc-a", "pv-a", "wait-sc"),
            pvc("pvc-b", storage_class="wait-sc"),
            pv("pv-a", storage_class="wait-sc", phase="Available", affinity={"foo": ["bar"]}),
        ],
        [("", (NODE_CONFLICT, BIND_CONFLICT))],
    ),
    (
        "pv not found",
        pod("pod-a", "pvc-a"),
        [make_node("node-a")],
        [bound_pvc("pvc-a", "pv-a", "wait-sc")],
        [("", (PV_NOT_EXIST,))],
    ),
    (
        "pv not found claim lost",
        pod("pod-a", "pvc-a"),
        [make_node("node-a")],
        [bound_pvc("pvc-a", "pv-a", "wait-sc", phase="Lost")],
        [('persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a"', ())],
    ),
    (
        "local volumes with close capacity are preferred",
        pod("pod-a", "pvc-a"),
        THREE,
        [pvc("pvc-a", storage_class="wait-sc", request="50Gi"), *LOCAL_PVS],
        [PASS, PASS, BIND],
    ),
    (
        "local volumes with close capacity are preferred (multiple pvcs)",
        pod("pod-a", "pvc-0", "pvc-1"),
        THREE,
        [
            pvc("pvc-0", storage_class="wait-sc", request="50Gi"),
            pvc("pvc-1", storage_class="wait-hdd-sc", request="100Gi"),
            *LOCAL_PVS,
            *HDD_PVS,
        ],
        [PASS, PASS, BIND],
    ),
    (
        "zonal volumes with close capacity are preferred",
        pod("pod-a", "pvc-a"),
        ZONAL_NODES,
        [pvc("pvc-a", storage_class="wait-sc", request="50Gi"), *ZONAL_PVS],
        [PASS, PASS, PASS, PASS, BIND, BIND],
    ),
    # CSIStorageCapacity objects are not in the snapshot: every provisioner has room (as in these cases)
    (
        "storage capacity score",
        pod("pod-a", "pvc-dynamic"),
        CAPACITY_NODES,
        [pvc("pvc-dynamic", storage_class="wait-sc-with-storage-capacity", request="10Gi")],
        [PASS, PASS, PASS],
    ),
    (
        "storage capacity score with static binds",
        pod("pod-a", "pvc-dynamic", "pvc-static"),
        CAPACITY_NODES,
        [
            pvc("pvc-dynamic", storage_class="wait-sc-with-storage-capacity", request="10Gi"),
            pvc("pvc-static", storage_class="wait-sc", request="50Gi"),
            *[local_pv(f"pv-static-{n}", "wait-sc", "100Gi", f"node-{n}") for n in "abc"],
        ],
        [PASS, PASS, PASS],
    ),
    (
        "dynamic provisioning with multiple PVCs of the same StorageClass",
        pod("pod-a", "pvc-dynamic-0", "pvc-dynamic-1"),
        [make_node("node-a", nodeKey="node-a")],
        [pvc(f"pvc-dynamic-{i}", storage_class="wait-sc-with-storage-capacity", request="50Gi") for i in range(2)],
        [PASS],
    ),
]


@pytest.mark.parametrize(
    ("incoming", "nodes", "objects", "expected"), [c[1:] for c in BINDING_CASES], ids=[c[0] for c in BINDING_CASES]
)
def test_volume_binding(
    incoming: dict[str, Any],
    nodes: list[dict[str, Any]],
    objects: list[dict[str, Any]],
    expected: list[tuple[str, tuple[str, ...]]],
) -> None:
    got = [run(volumes.VOLUME_BINDING, incoming, [*CLASSES, *objects], n) for n in nodes]
    assert got == expected


# -- VolumeBinding: binder_test.go, TestFindPodVolumesWithoutProvisioning / WithProvisioning ("no CSIDriver") --------

WAIT_CLASS = storage_class("waitClass", "WaitForFirstConsumer", "kubernetes.io/no-provisioner")
BINDER_CLASSES = [
    storage_class(
        "waitClassWithProvisioner",
        "WaitForFirstConsumer",
        "test-provisioner",
        [{NODE_KEY: ["node1", "reference-value"]}],
    ),
    storage_class("immediateClass", "Immediate"),
    WAIT_CLASS,
    storage_class("topoMismatchClass", "WaitForFirstConsumer", "test-provisioner", [{NODE_KEY: ["reference-value"]}]),
]


def make_test_pvc(
    name: str, size: str, state: str, volume: str, storage_class: str, selected: str = ""
) -> dict[str, Any]:
    """makeTestPVC: namespace testns, uid pvc-uid, a storage request, volumeMode Filesystem; bound (annotation and
    volume), pre-bound (volume only), selected node (annotation only) or unbound."""
    annotations = {"pv.kubernetes.io/bind-completed": "yes"} if state == "bound" else {}
    if state == "selected":
        annotations["volume.kubernetes.io/selected-node"] = selected
    return pvc(
        name,
        "testns",
        volume=volume if state in ("bound", "prebound") else "",
        storage_class=storage_class,
        request=size,
        annotations=annotations,
        uid="pvc-uid",
        volume_mode="Filesystem",
    )


def make_test_pv(
    name: str, host: str, capacity: str, bound_to: dict[str, Any] | None, storage_class: str
) -> dict[str, Any]:
    """makeTestPV: volumeMode Filesystem, phase Available, node affinity nodeKey In (host), claimRef to a claim."""
    claim = None if bound_to is None else ("testns", bound_to["metadata"]["name"], "pvc-uid")
    return pv(
        name,
        storage_class=storage_class,
        phase="Available",
        capacity=capacity,
        claim=claim,
        affinity={NODE_KEY: [host]} if host else None,
        volume_mode="Filesystem",
    )


UNBOUND = make_test_pvc("unbound-pvc", "1G", "unbound", "", "waitClass")
UNBOUND2 = make_test_pvc("unbound-pvc2", "5G", "unbound", "", "waitClass")
PREBOUND = make_test_pvc("prebound-pvc", "1G", "prebound", "pv-node1a", "waitClass")
BOUND = make_test_pvc("bound-pvc", "1G", "bound", "pv-bound", "waitClass")
IMMEDIATE_UNBOUND = make_test_pvc("immediate-unbound-pvc", "1G", "unbound", "", "immediateClass")
IMMEDIATE_BOUND = make_test_pvc("immediate-bound-pvc", "1G", "bound", "pv-bound-immediate", "immediateClass")
PROVISIONED = make_test_pvc("provisioned-pvc", "1Gi", "unbound", "", "waitClassWithProvisioner")
NO_PROVISIONER = make_test_pvc("no-provisioner-pvc", "1Gi", "unbound", "", "waitClass")
TOPO_MISMATCH = make_test_pvc("topo-mismatch-pvc", "1Gi", "unbound", "", "topoMismatchClass")
SELECTED_NODE = make_test_pvc("provisioned-pvc", "1Gi", "selected", "", "waitClassWithProvisioner", selected="node1")
PV_NODE1A = make_test_pv("pv-node1a", "node1", "5G", None, "waitClass")
PV_NODE1B = make_test_pv("pv-node1b", "node1", "10G", None, "waitClass")
PV_NODE2 = make_test_pv("pv-node2", "node2", "1G", None, "waitClass")
PV_BOUND = make_test_pv("pv-bound", "node1", "1G", BOUND, "waitClass")
PV_NODE1A_BOUND = make_test_pv("pv-node1a", "node1", "5G", UNBOUND, "waitClass")
PV_BOUND_IMMEDIATE = make_test_pv("pv-bound-immediate", "node1", "1G", IMMEDIATE_BOUND, "immediateClass")
PV_BOUND_IMMEDIATE_NODE2 = make_test_pv("pv-bound-immediate", "node2", "1G", IMMEDIATE_BOUND, "immediateClass")
# makeGenericEphemeralPVC: the claim of test-pod's volume test-volume, bound to pv-bound, owned by the pod (uid "")
GENERIC = make_test_pvc("test-pod-test-volume", "1G", "bound", "pv-bound", "immediateClass")
GENERIC_OWNED = {
    **GENERIC,
    "metadata": {**GENERIC["metadata"], "ownerReferences": [{"name": "test-pod", "uid": "", "controller": True}]},
}
PV_BOUND_GENERIC = make_test_pv("pv-bound", "node1", "1G", GENERIC_OWNED, "waitClass")
FAIL = "fail"  # shouldFail: the PreFilter rejects the pod


def ephemeral_pod(volume: str) -> dict[str, Any]:
    """makePod("test-pod").withNamespace("testns").withGenericEphemeralVolume(volume)."""
    return pod("test-pod", namespace="testns", volumes_=[{"name": volume, "ephemeral": {"volumeClaimTemplate": {}}}])


# (name, the pod's claims or its generic ephemeral volume, PVs, the claims known when not the pod's, expected)
BINDER_CASES: list[tuple[str, list[dict[str, Any]] | str, list[dict[str, Any]], list[dict[str, Any]] | None, Any]] = [
    ("no-volumes", [], [], None, (SKIP, ())),
    ("pvc-not-found", [BOUND], [], [], FAIL),
    ("bound-pvc", [BOUND], [PV_BOUND], None, PASS),
    ("bound-pvc,pv-not-exists", [BOUND], [], None, ("", (PV_NOT_EXIST,))),
    ("prebound-pvc", [PREBOUND], [PV_NODE1A_BOUND], None, FAIL),
    ("unbound-pvc,pv-same-node", [UNBOUND], [PV_NODE2, PV_NODE1A, PV_NODE1B], None, PASS),
    ("unbound-pvc,pv-different-node", [UNBOUND], [PV_NODE2], None, BIND),
    ("two-unbound-pvcs", [UNBOUND, UNBOUND2], [PV_NODE1A, PV_NODE1B], None, PASS),
    ("two-unbound-pvcs,order-by-size", [UNBOUND2, UNBOUND], [PV_NODE1A, PV_NODE1B], None, PASS),
    ("two-unbound-pvcs,partial-match", [UNBOUND, UNBOUND2], [PV_NODE1A], None, BIND),
    ("one-bound,one-unbound", [UNBOUND, BOUND], [PV_BOUND, PV_NODE1A], None, PASS),
    ("one-bound,one-unbound,no-match", [UNBOUND, BOUND], [PV_BOUND, PV_NODE2], None, BIND),
    ("one-prebound,one-unbound", [UNBOUND, PREBOUND], [PV_NODE1A, PV_NODE1B], None, FAIL),
    ("immediate-bound-pvc", [IMMEDIATE_BOUND], [PV_BOUND_IMMEDIATE], None, PASS),
    ("immediate-bound-pvc-wrong-node", [IMMEDIATE_BOUND], [PV_BOUND_IMMEDIATE_NODE2], None, ("", (NODE_CONFLICT,))),
    ("immediate-unbound-pvc", [IMMEDIATE_UNBOUND], [], None, FAIL),
    ("immediate-unbound-pvc,delayed-mode-bound", [IMMEDIATE_UNBOUND, BOUND], [PV_BOUND], None, FAIL),
    ("immediate-unbound-pvc,delayed-mode-unbound", [IMMEDIATE_UNBOUND, UNBOUND], [], None, FAIL),
    ("generic-ephemeral,no-pvc", "no-such-pvc", [], [], FAIL),
    ("generic-ephemeral,with-pvc", "test-volume", [PV_BOUND_GENERIC], [GENERIC_OWNED], PASS),
    ("generic-ephemeral,wrong-pvc", "test-volume", [PV_BOUND_GENERIC], [GENERIC], FAIL),
    # TestFindPodVolumesWithProvisioning
    ("one-provisioned", [PROVISIONED], [], None, PASS),
    ("two-unbound-pvcs,one-matched,one-provisioned", [UNBOUND, PROVISIONED], [PV_NODE1A], None, PASS),
    ("one-bound,one-provisioned", [BOUND, PROVISIONED], [PV_BOUND], None, PASS),
    ("one-binding,one-selected-node", [BOUND, SELECTED_NODE], [PV_BOUND], None, PASS),
    ("one-immediate-bound,one-provisioned", [IMMEDIATE_BOUND, PROVISIONED], [PV_BOUND_IMMEDIATE], None, PASS),
    ("invalid-provisioner", [NO_PROVISIONER], [], None, BIND),
    ("volume-topology-unsatisfied", [TOPO_MISMATCH], [], None, BIND),
]


@pytest.mark.parametrize(
    ("claims", "pvs", "cached", "expected"), [c[1:] for c in BINDER_CASES], ids=[c[0] for c in BINDER_CASES]
)
def test_find_pod_volumes(
    claims: list[dict[str, Any]] | str, pvs: list[dict[str, Any]], cached: list[dict[str, Any]] | None, expected: Any
) -> None:
    if isinstance(claims, str):
        incoming, claims = ephemeral_pod(claims), []
    else:
        incoming = pod("test-pod", *(c["metadata"]["name"] for c in claims), namespace="testns")
    objects = [*BINDER_CLASSES, *(claims if cached is None else cached), *pvs]
    got = run(volumes.VOLUME_BINDING, incoming, objects, node("node1", {NODE_KEY: "node1"}))
    if expected == FAIL:
        assert got[0] not in ("", SKIP), got
        assert got[1] == ()
    else:
        assert got == expected


# -- NodeVolumeLimits: TestCSILimits (without VolumeAttachments nor in-tree migration) -------------------------------

EBS, GCE, HOSTPATH, IN_TREE_EBS = (
    "ebs.csi.aws.com",
    "pd.csi.storage.gke.io",
    "kubernetes.io/hostpath",
    "kubernetes.io/aws-ebs",
)
LIMITS_NODE = "node-for-max-pd-test-1"


def csi_objects(drivers: list[str]) -> list[dict[str, Any]]:
    """getFakeCSIPVLister and getFakeCSIPVCLister("csi", drivers), getFakeCSIStorageClassLister("csi-sc",
    drivers[0])."""
    found = []
    for driver in drivers:
        for j in range(4):
            name = f"csi-{driver}-{j}"
            source = (
                {"awsElasticBlockStore": {"volumeID": name}}
                if driver == IN_TREE_EBS
                else {"hostPath": {"path": "/tmp"}}
                if driver == HOSTPATH
                else {}
            )
            found += [pv(name, csi=None if source else (driver, name), source=source), pvc(name, volume=name)]
    found += [
        pvc("csi-4", storage_class="csi-sc"),
        pvc("csi-5"),
        pvc("csi-6", storage_class="csi-sc", volume="missing-in-action"),
        storage_class("csi-sc", provisioner=drivers[0]),
    ]
    return found


def ephemeral(name: str, uid: str, *volumes_: str) -> dict[str, Any]:
    return pod(name, namespace="test", uid=uid, volumes_=[{"name": v, "ephemeral": {}} for v in volumes_])


def claim_of(pod_name: str, volume: str, owner: str | None) -> dict[str, Any]:
    return pvc(f"{pod_name}-{volume}", "test", storage_class="csi-sc", owner_uid=owner)


CONFIG_AND_SECRET = [{"name": "c", "configMap": {"name": "c"}}, {"name": "s", "secret": {"secretName": "s"}}]
RUNNING = pod("running", f"csi-{EBS}-3")
PENDING = pod("pending", "csi-4")
UNBOUND_PVC_POD2 = pod("unbound2", "csi-4")
MISSING_PV = pod("missing-pv", "csi-6")
NO_SC = pod("no-sc", "csi-5")
GCE_TWO = pod("gce-two", f"csi-{GCE}-1", f"csi-{GCE}-2")
IN_TREE_ONE = pod("in-tree-one", f"csi-{IN_TREE_EBS}-0")
IN_TREE_TWO = pod("in-tree-two", f"csi-{IN_TREE_EBS}-1", f"csi-{IN_TREE_EBS}-2")
EBS_ONE = pod("ebs-one", f"csi-{EBS}-0")
EBS_TWO = pod("ebs-two", f"csi-{EBS}-1", f"csi-{EBS}-2")
NON_MIGRATABLE = pod("non-migratable", f"csi-{HOSTPATH}-0")
EPHEMERAL = ephemeral("abc", "12345", "xyz")
EPHEMERAL_CLAIM = claim_of("abc", "xyz", "12345")
CONFLICTING_CLAIM = claim_of("abc", "xyz", None)
EPHEMERAL_TWO = ephemeral("abc", "12345II", "x", "y")
CLAIM_X, CLAIM_Y = claim_of("abc", "x", "12345II"), claim_of("abc", "y", "12345II")
MAX = ("", (volumes.MAX_VOLUME_COUNT,))
MISSING_EPHEMERAL = ("", ('looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found',))

# (test, new pod, existing pods, extra claims, max volumes, drivers, limit source, expected)
LIMITS_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], int, list[str], str, Any]] = [
    ("fits when node volume limit >= new pods CSI volume", EBS_ONE, [RUNNING, EBS_TWO], [], 4, [EBS], "csinode", PASS),
    ("doesn't when node volume limit <= pods CSI volume", EBS_ONE, [RUNNING, EBS_TWO], [], 2, [EBS], "csinode", MAX),
    (
        "should when driver does not support volume limits",
        EBS_ONE,
        [RUNNING, EBS_TWO],
        [],
        2,
        [EBS],
        "csinode-with-no-limit",
        PASS,
    ),
    (
        "count pending PVCs towards volume limit <= pods CSI volume",
        EBS_ONE,
        [PENDING, EBS_TWO],
        [],
        2,
        [EBS],
        "csinode",
        MAX,
    ),
    (
        "count multiple pending pvcs towards volume limit >= pods CSI volume",
        EBS_ONE,
        [PENDING, UNBOUND_PVC_POD2, EBS_TWO],
        [],
        4,
        [EBS],
        "csinode",
        PASS,
    ),
    (
        "should count PVCs with invalid PV name but valid SC",
        EBS_ONE,
        [MISSING_PV, EBS_TWO],
        [],
        2,
        [EBS],
        "csinode",
        MAX,
    ),
    ("don't count pvcs with missing SC towards volume limit", EBS_ONE, [RUNNING, NO_SC], [], 2, [EBS], "csinode", PASS),
    (
        "count pvcs with the same type towards volume limit",
        EBS_ONE,
        [GCE_TWO, EBS_TWO],
        [],
        2,
        [EBS, GCE],
        "csinode",
        MAX,
    ),
    (
        "don't count pvcs with different type towards volume limit",
        GCE_TWO,
        [EBS_TWO, RUNNING],
        [],
        2,
        [EBS, GCE],
        "csinode",
        PASS,
    ),
    (
        "should not limit pod if volume used does not report limits",
        IN_TREE_ONE,
        [IN_TREE_TWO],
        [],
        2,
        [IN_TREE_EBS, EBS],
        "csinode-with-no-limit",
        PASS,
    ),
    (
        "should not count non-migratable in-tree volumes",
        NON_MIGRATABLE,
        [EBS_TWO],
        [],
        2,
        [HOSTPATH, EBS],
        "csinode",
        PASS,
    ),
    ("ephemeral volume missing", EPHEMERAL, [], [], 0, [EBS], "csinode-with-no-limit", MISSING_EPHEMERAL),
    (
        "ephemeral volume not owned",
        EPHEMERAL,
        [],
        [CONFLICTING_CLAIM],
        0,
        [EBS],
        "csinode-with-no-limit",
        ("", ("PVC test/abc-xyz was not created for pod test/abc (pod is not owner)",)),
    ),
    ("ephemeral volume unbound", EPHEMERAL, [], [EPHEMERAL_CLAIM], 0, [EBS], "csinode-with-no-limit", PASS),
    (
        "ephemeral doesn't when node volume limit <= pods CSI volume",
        EPHEMERAL,
        [RUNNING, EBS_TWO],
        [EPHEMERAL_CLAIM],
        2,
        [EBS],
        "csinode",
        MAX,
    ),
    (
        "ephemeral doesn't when node volume limit <= pods ephemeral CSI volume",
        EBS_ONE,
        [RUNNING, EPHEMERAL_TWO],
        [CLAIM_X, CLAIM_Y],
        2,
        [EBS],
        "csinode",
        MAX,
    ),
    (
        "persistent doesn't when node volume limit <= pods ephemeral CSI volume + persistent volume",
        EBS_ONE,
        [RUNNING, EPHEMERAL, EBS_TWO],
        [EPHEMERAL_CLAIM],
        3,
        [EBS],
        "csinode",
        MAX,
    ),
    (
        "persistent okay when node volume limit > pods ephemeral CSI volume + persistent volume",
        EBS_ONE,
        [RUNNING, EPHEMERAL, EBS_TWO],
        [EPHEMERAL_CLAIM],
        5,
        [EBS],
        "csinode",
        PASS,
    ),
    (
        "skip Filter when the pod only uses secrets and configmaps",
        pod("only-config", volumes_=CONFIG_AND_SECRET),
        [],
        [],
        2,
        [EBS],
        "csinode",
        (SKIP, ()),
    ),
    (
        "don't skip Filter when the pod has pvcs",
        pod("pvc-config", f"csi-{EBS}-0", volumes_=CONFIG_AND_SECRET),
        [],
        [],
        2,
        [EBS],
        "csinode",
        PASS,
    ),
    (
        "don't skip Filter when the pod has ephemeral volumes",
        pod("abc", namespace="test", volumes_=[*CONFIG_AND_SECRET, {"name": "xyz", "ephemeral": {}}]),
        [],
        [],
        0,
        [EBS],
        "csinode-with-no-limit",
        MISSING_EPHEMERAL,
    ),
]


@pytest.mark.parametrize(
    ("incoming", "existing", "claims", "limit", "drivers", "source", "expected"),
    [c[1:] for c in LIMITS_CASES],
    ids=[c[0] for c in LIMITS_CASES],
)
def test_csi_limits(
    incoming: dict[str, Any],
    existing: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    limit: int,
    drivers: list[str],
    source: str,
    expected: Any,
) -> None:
    placed = [{**p, "spec": {**p["spec"], "nodeName": LIMITS_NODE}} for p in existing]
    limits = [csi_node(LIMITS_NODE, drivers, limit if source == "csinode" else None)]
    objects = [*csi_objects(drivers), *claims, *placed, *limits]
    assert run(volumes.NODE_VOLUME_LIMITS, incoming, objects, node(LIMITS_NODE)) == expected


def test_csi_limits_without_a_csi_node_do_not_limit() -> None:
    """getVolumeLimits(nil) is empty: no limit (csi.go)."""
    placed = [{**p, "spec": {**p["spec"], "nodeName": LIMITS_NODE}} for p in (RUNNING, EBS_TWO)]
    assert run(volumes.NODE_VOLUME_LIMITS, EBS_ONE, [*csi_objects([EBS]), *placed], node(LIMITS_NODE)) == PASS


# -- VolumeRestrictions: TestGCEDiskConflicts, TestAWSDiskConflicts, TestRBDDiskConflicts, TestISCSIDiskConflicts,
#    TestAccessModeConflicts -------------------------------------------------------------------------------------------

DISKS = {
    "GCE": ({"gcePersistentDisk": {"pdName": "foo"}}, {"gcePersistentDisk": {"pdName": "bar"}}),
    "AWS": ({"awsElasticBlockStore": {"volumeID": "foo"}}, {"awsElasticBlockStore": {"volumeID": "bar"}}),
    "RBD": (
        {"rbd": {"monitors": ["a", "b"], "pool": "foo", "image": "bar", "fsType": "ext4"}},
        {"rbd": {"monitors": ["c", "d"], "pool": "foo", "image": "bar", "fsType": "ext4"}},
    ),
    "ISCSI": (
        {
            "iscsi": {
                "targetPortal": "127.0.0.1:3260",
                "iqn": "iqn.2016-12.server:storage.target01",
                "fsType": "ext4",
                "lun": 0,
            }
        },
        {
            "iscsi": {
                "targetPortal": "127.0.0.1:3260",
                "iqn": "iqn.2017-12.server:storage.target01",
                "fsType": "ext4",
                "lun": 0,
            }
        },
    ),
}
DISK_NODE = "node-1"


def with_disk(name: str, source: dict[str, Any] | None, on: str = "") -> dict[str, Any]:
    return pod(name, on=on, volumes_=[{"name": "d", **source}] if source is not None else [])


DISK_CASES = [
    (kind, case, incoming, existing, expected)
    for kind, (state, state2) in DISKS.items()
    for case, incoming, existing, expected in [
        ("nothing", None, None, (SKIP, ())),
        ("one state", None, state, (SKIP, ())),
        ("same state", state, state, ("", (volumes.DISK_CONFLICT,))),
        ("different state", state2, state, PASS),
    ]
] + [("GCE", "pod with a volume that doesn't have restrictions", {}, None, (SKIP, ()))]


@pytest.mark.parametrize(
    ("incoming", "existing", "expected"), [c[2:] for c in DISK_CASES], ids=[f"{c[0]}: {c[1]}" for c in DISK_CASES]
)
def test_disk_conflicts(incoming: dict[str, Any] | None, existing: dict[str, Any] | None, expected: Any) -> None:
    placed = [with_disk("existing", existing, on=DISK_NODE)] if existing is not None else []
    got = run(volumes.VOLUME_RESTRICTIONS, with_disk("incoming", incoming), placed, node(DISK_NODE))
    assert got == expected


def test_disks_mounted_read_only_by_both_do_not_conflict() -> None:
    """isVolumeConflict: GCE PD, iSCSI and RBD only conflict unless both mount read-only; AWS EBS always does."""
    for kind, (state, _) in DISKS.items():
        source = next(iter(state))
        read_only = {source: {**state[source], "readOnly": True}}
        placed = [with_disk("existing", read_only, on=DISK_NODE)]
        got = run(volumes.VOLUME_RESTRICTIONS, with_disk("incoming", read_only), placed, node(DISK_NODE))
        assert got == (("", (volumes.DISK_CONFLICT,)) if kind == "AWS" else PASS), kind


RWOP = "ReadWriteOncePod"
ACCESS_CLAIMS = [
    pvc("claim-with-rwop-1", modes=[RWOP]),
    pvc("claim-with-rwop-2", modes=[RWOP]),
    pvc("claim-with-rwx", modes=["ReadWriteMany"]),
]
WITH_ONE = pod("pod-with-one-pvc", "claim-with-rwop-1", on=DISK_NODE)
WITH_TWO = pod("pod-with-two-pvcs", "claim-with-rwop-1", "claim-with-rwop-2", on=DISK_NODE)
WITH_RWX = pod("pod-with-rwx", "claim-with-rwx", on=DISK_NODE)
ACCESS_CASES = [
    ("nothing", pod("nothing"), [], [], (SKIP, ())),
    (
        "failed to get PVC",
        pod("pod-with-one-pvc", "claim-with-rwop-1"),
        [],
        [],
        ('persistentvolumeclaim "claim-with-rwop-1" not found', ()),
    ),
    ("no access mode conflict", pod("pod-with-one-pvc", "claim-with-rwop-1"), [WITH_RWX], ACCESS_CLAIMS, (SKIP, ())),
    (
        "access mode conflict, unschedulable",
        pod("pod-with-one-conflict", "claim-with-rwop-1"),
        [WITH_ONE, WITH_RWX],
        ACCESS_CLAIMS,
        ("", (volumes.READ_WRITE_ONCE_POD_CONFLICT,)),
    ),
    (
        "two conflicts, unschedulable",
        pod("pod-with-two-conflicts", "claim-with-rwop-1", "claim-with-rwop-2"),
        [WITH_TWO, WITH_RWX],
        ACCESS_CLAIMS,
        ("", (volumes.READ_WRITE_ONCE_POD_CONFLICT,)),
    ),
]


@pytest.mark.parametrize(
    ("incoming", "existing", "claims", "expected"), [c[1:] for c in ACCESS_CASES], ids=[c[0] for c in ACCESS_CASES]
)
def test_access_mode_conflicts(
    incoming: dict[str, Any], existing: list[dict[str, Any]], claims: list[dict[str, Any]], expected: Any
) -> None:
    assert run(volumes.VOLUME_RESTRICTIONS, incoming, [*claims, *existing], node(DISK_NODE)) == expected


# -- the four in kube-scheduler's order (default_plugins.go: VolumeRestrictions, NodeVolumeLimits, VolumeBinding,
#    VolumeZone; every PreFilter before any Filter, the first UnschedulableAndUnresolvable ends the PreFilters) -------


def pipeline(incoming: dict[str, Any], objects: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> Any:
    snapshot = build_snapshot([*objects, incoming, *nodes])
    state = volumes.prefilter(next(p for p in snapshot.pods if not p.node_name), snapshot)
    return volumes.prefilter_problem(state), [
        volumes.failure(state, snapshot.node_by_name[n["metadata"]["name"]]) for n in nodes
    ]


def test_a_pod_without_claims_nor_disks_is_not_looked_at() -> None:
    snapshot = build_snapshot([pod("p", volumes_=CONFIG_AND_SECRET), node("n")])
    assert volumes.prefilter(snapshot.pods[0], snapshot) is None
    assert volumes.failure(None, snapshot.nodes[0]) == ("", ())
    assert volumes.prefilter_problem(None) == ""


def test_a_missing_claim_is_volume_restrictions_first() -> None:
    """VolumeRestrictions' PreFilter looks the claim up first (VolumeBinding would say the same words)."""
    problem, failures = pipeline(pod("p", "gone"), [], [node("n")])
    assert problem == 'persistentvolumeclaim "gone" not found'
    assert failures == [(volumes.VOLUME_RESTRICTIONS, (problem,))]


def test_an_unbound_immediate_claim_is_volume_binding_before_volume_zone() -> None:
    problem, failures = pipeline(pod("p", "c"), [pvc("c", storage_class="fast"), storage_class("fast")], [node("n")])
    assert problem == UNBOUND_IMMEDIATE
    assert failures == [(volumes.VOLUME_BINDING, (UNBOUND_IMMEDIATE,))]


def test_a_bound_claim_whose_volume_is_gone_is_rejected_by_volume_zone_prefilter() -> None:
    """VolumeBinding's PreFilter passes a bound claim (its Filter would say pv(s) don't exist), but VolumeZone's
    PreFilter looks the volume up before any Filter runs."""
    problem, failures = pipeline(pod("p", "c"), [bound_pvc("c", "pv-gone")], [node("n")])
    assert problem == 'persistentvolume "pv-gone" not found'
    assert failures == [(volumes.VOLUME_ZONE, (problem,))]


def test_filters_answer_in_order_per_node() -> None:
    objects = [
        bound_pvc("c", "v", modes=[RWOP]),
        pv("v", labels={ZONE: "z1"}, affinity={HOSTNAME: ["a", "b"]}, csi=(EBS, "h-v")),
        csi_node("b", [EBS], 0),
    ]
    nodes = [
        node("a", {HOSTNAME: "a", ZONE: "z2"}),
        node("b", {HOSTNAME: "b", ZONE: "z2"}),
        node("c", {HOSTNAME: "c", ZONE: "z2"}),
        node("d", {HOSTNAME: "d"}),
        node("e", {HOSTNAME: "a", ZONE: "z1"}),
    ]
    problem, failures = pipeline(pod("p", "c"), objects, nodes)
    assert problem == ""
    assert failures == [
        (volumes.VOLUME_ZONE, (volumes.ZONE_CONFLICT,)),  # a: the volume's node affinity holds, its zone does not
        (volumes.NODE_VOLUME_LIMITS, (volumes.MAX_VOLUME_COUNT,)),  # b: no room for a volume of that driver
        (volumes.VOLUME_BINDING, (NODE_CONFLICT,)),  # c: before VolumeZone
        (volumes.VOLUME_BINDING, (NODE_CONFLICT,)),  # d: no zone label (VolumeZone would pass)
        PASS,
    ]
    # a placed pod using the ReadWriteOncePod claim: VolumeRestrictions rejects every node first
    problem, failures = pipeline(pod("p", "c"), [*objects, pod("q", "c", on="e")], nodes)
    assert failures == [(volumes.VOLUME_RESTRICTIONS, (volumes.READ_WRITE_ONCE_POD_CONFLICT,))] * len(nodes)


def test_a_pod_whose_volumes_do_not_parse_is_rejected_everywhere() -> None:
    raw = pod("p")
    raw["spec"]["volumes"] = {"name": "v"}
    problem, failures = pipeline(raw, [], [node("n")])
    assert problem.startswith(f"{volumes.UNREADABLE}: spec.volumes: expected a list")
    assert failures == [("", (problem,))]


# -- cases upstream's tables leave out, expected values derived by hand from the code cited -------------------------


def test_claims_are_matched_smallest_first_and_need_every_access_mode() -> None:
    """binder.go findMatchingVolumes sorts the claims by request (byPVCSize); FindMatchingVolume takes the smallest
    volume whose access modes hold all the claim's (CheckAccessModes). The small claim takes the 5G volume that the
    large one needed for ReadWriteMany: no volume is left for it, and waitClass cannot provision."""
    small = pvc("small", storage_class="waitClass", request="1G", modes=["ReadWriteOnce"])
    large = pvc("large", storage_class="waitClass", request="4G", modes=["ReadWriteMany"])
    shared = pv(
        "shared",
        storage_class="waitClass",
        phase="Available",
        capacity="5G",
        source={"accessModes": ["ReadWriteOnce", "ReadWriteMany"]},
    )
    once = pv(
        "once", storage_class="waitClass", phase="Available", capacity="10G", source={"accessModes": ["ReadWriteOnce"]}
    )
    objects = [WAIT_CLASS, small, large, shared, once]
    assert run(volumes.VOLUME_BINDING, pod("p", "large", "small"), objects, node("n")) == BIND
    # with room for both (a second ReadWriteMany volume), both match
    wide = pv(
        "wide", storage_class="waitClass", phase="Available", capacity="10G", source={"accessModes": ["ReadWriteMany"]}
    )
    assert run(volumes.VOLUME_BINDING, pod("p", "large", "small"), [*objects, wide], node("n")) == PASS


def test_a_volume_pre_bound_to_the_claim_is_taken_or_nothing_is() -> None:
    """FindMatchingVolume: a volume whose claimRef names the claim (a claimRef without uid names any claim of that
    name) is returned whatever its phase, or nil when its node affinity rejects the node — then no other volume is
    tried; an available volume of another phase is skipped."""
    claim = pvc("c", storage_class="waitClass", request="1G", uid="c-uid")
    pre = pv(
        "pre",
        storage_class="waitClass",
        phase="Pending",
        capacity="1G",
        claim=("default", "c", ""),
        affinity={NODE_KEY: ["node1"]},
    )
    free = pv("free", storage_class="waitClass", phase="Available", capacity="1G")
    released = pv("released", storage_class="waitClass", phase="Released", capacity="1G")
    objects = [WAIT_CLASS, claim, pre, free]
    assert run(volumes.VOLUME_BINDING, pod("p", "c"), objects, node("node1", {NODE_KEY: "node1"})) == PASS
    assert run(volumes.VOLUME_BINDING, pod("p", "c"), objects, node("node2", {NODE_KEY: "node2"})) == BIND
    assert run(volumes.VOLUME_BINDING, pod("p", "c"), [WAIT_CLASS, claim, released], node("n")) == BIND
    assert run(volumes.VOLUME_BINDING, pod("p", "c"), [WAIT_CLASS, claim, free], node("n")) == PASS
    larger = pvc("c", storage_class="waitClass", request="2G", uid="c-uid")  # the volume is smaller than asked
    assert run(volumes.VOLUME_BINDING, pod("p", "c"), [WAIT_CLASS, larger, free], node("n")) == BIND


def test_a_claim_with_a_selected_node_is_provisioned_there_only() -> None:
    """FindPodVolumes: a delayed claim annotated volume.kubernetes.io/selected-node fails every other node at once;
    on its node it is checked for provisioning (checkVolumeProvisions)."""
    objects = [*BINDER_CLASSES, SELECTED_NODE]
    incoming = pod("test-pod", "provisioned-pvc", namespace="testns")
    assert run(volumes.VOLUME_BINDING, incoming, objects, node("node1", {NODE_KEY: "node1"})) == PASS
    assert run(volumes.VOLUME_BINDING, incoming, objects, node("node2", {NODE_KEY: "node1"})) == BIND


def test_a_volume_attached_already_counts_once_and_class_provisioners_map_to_csi_drivers() -> None:
    """csi.go Filter: a new volume the node's pods use already is not counted again; getCSIDriverInfoFromSC counts an
    unbound claim under its class's provisioner, an in-tree one under its CSI driver (when the node has a CSINode)
    and none for azure-file or vsphere-volume (isCSIMigrationOn is false for them)."""
    existing = pod("existing", f"csi-{EBS}-0", on="n")
    objects = [*csi_objects([EBS]), existing, csi_node("n", [EBS], 1)]
    assert run(volumes.NODE_VOLUME_LIMITS, pod("p", f"csi-{EBS}-0"), objects, node("n")) == PASS
    assert run(volumes.NODE_VOLUME_LIMITS, pod("p", f"csi-{EBS}-1"), objects, node("n")) == MAX
    for provisioner, expected in (
        ("kubernetes.io/aws-ebs", MAX),
        ("kubernetes.io/azure-file", PASS),
        ("other.csi.example.com", PASS),
        (EBS, MAX),
    ):
        found = [*objects, storage_class("in-tree", provisioner=provisioner), pvc("u", storage_class="in-tree")]
        assert run(volumes.NODE_VOLUME_LIMITS, pod("p", "u"), found, node("n")) == expected, provisioner
    # azure-file is not counted even under its own name
    found = [
        storage_class("in-tree", provisioner="kubernetes.io/azure-file"),
        pvc("u", storage_class="in-tree"),
        csi_node("n", ["kubernetes.io/azure-file"], 0),
    ]
    assert run(volumes.NODE_VOLUME_LIMITS, pod("p", "u"), found, node("n")) == PASS


def test_only_read_write_once_pod_claims_in_use_conflict() -> None:
    """readWriteOncePodPVCsForPod keeps the claims with the ReadWriteOncePod access mode: a ReadWriteMany claim used
    by a placed pod is no conflict (PreFilter: Skip)."""
    incoming = pod("p", "claim-with-rwx")
    assert run(volumes.VOLUME_RESTRICTIONS, incoming, [*ACCESS_CLAIMS, WITH_RWX], node(DISK_NODE)) == (SKIP, ())


def test_a_claim_being_deleted_rejects_the_pod_and_finished_pods_hold_nothing() -> None:
    """volume_binding.go podHasPVCs: a claim with a deletionTimestamp rejects the pod. scheduler.go's pod informer
    leaves out Succeeded and Failed pods: their claims, disks and CSI volumes are not on their node."""
    deleting = {**pvc("c", storage_class="wait-sc"), "metadata": {**pvc("c")["metadata"], "deletionTimestamp": "t"}}
    assert run(volumes.VOLUME_BINDING, pod("p", "c"), [WAIT_SC, deleting], node("n")) == (
        'persistentvolumeclaim "c" is being deleted',
        (),
    )
    finished = {**pod("done", f"csi-{EBS}-1", on="n"), "status": {"phase": "Succeeded"}}
    objects = [*csi_objects([EBS]), finished, csi_node("n", [EBS], 1)]
    assert run(volumes.NODE_VOLUME_LIMITS, pod("p", f"csi-{EBS}-0"), objects, node("n")) == PASS
    finished["status"]["phase"] = "Running"
    assert run(volumes.NODE_VOLUME_LIMITS, pod("p", f"csi-{EBS}-0"), objects, node("n")) == MAX
    rwop = [pvc("claim-with-rwop-1", modes=[RWOP]), {**WITH_ONE, "status": {"phase": "Failed"}}]
    assert run(volumes.VOLUME_RESTRICTIONS, pod("p", "claim-with-rwop-1"), rwop, node(DISK_NODE)) == (SKIP, ())
