"""kube-scheduler's DefaultSelector (operators/engine/cluster/kube/defaults.py) against upstream's tables:
``pkg/scheduler/framework/plugins/helper/spread_test.go`` (TestGetPodServices, TestDefaultSelector) of 1.37.2, their
objects and expected selectors copied, plus how upstream merges what it finds (``labels.Merge`` for Services and
ReplicationControllers, ``Selector.Add`` for ReplicaSets and StatefulSets), read from ``helper/spread.go``."""

from __future__ import annotations

from typing import Any

import pytest

from operators.api.selectors import Requirement, Selector
from operators.engine.cluster.kube.defaults import controller_of, default_selector, services_of
from operators.engine.cluster.snapshot import Snapshot, build_snapshot


def service(name: str, namespace: str, selector: dict[str, str] | None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {} if selector is None else {"selector": selector},
    }


def controller(kind: str, name: str, namespace: str, match_labels: dict[str, str]) -> dict[str, Any]:
    api_version = "v1" if kind == "ReplicationController" else "apps/v1"
    selector: Any = match_labels if kind == "ReplicationController" else {"matchLabels": match_labels}
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": selector},
    }


def pod(name: str, namespace: str, labels: dict[str, str], owner: tuple[str, str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
    if owner is not None:  # st.MakePod().OwnerReference(name, gvk): apiVersion, kind, name, controller: true
        meta["ownerReferences"] = [{"apiVersion": owner[0], "kind": owner[1], "name": owner[2], "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {}}


def pod_in(snapshot: Snapshot, name: str) -> Any:
    return next(p for p in snapshot.pods if p.name == name)


def as_set(selector: Selector) -> dict[str, str]:
    """A selector made of single-value In requirements as the labels.Set upstream's tests compare it with."""
    found = {}
    for requirement in selector.requirements:
        assert requirement.operator == "In" and len(requirement.values) == 1, requirement
        found[requirement.key] = next(iter(requirement.values))
    assert len(found) == len(selector.requirements)
    return found


# -- TestGetPodServices ---------------------------------------------------------------------------------------------

SERVICES = [service(f"service-{i}", "test", {"app": f"test-{i}"}) for i in range(3)]
PODS = [pod(f"test-pod-{i}", "test", {"app": f"test-{i}", "label": f"label-{i}"}) for i in range(5)]


@pytest.mark.parametrize(
    ("index", "expected"),
    [(0, ["service-0"]), (1, ["service-1"]), (2, ["service-2"]), (3, []), (4, [])],
    ids=[f"GetPodServices for pod-{i}" for i in range(5)],
)
def test_get_pod_services(index: int, expected: list[str]) -> None:
    snapshot = build_snapshot([*SERVICES, *PODS])
    assert [s.name for s in services_of(pod_in(snapshot, f"test-pod-{index}"), snapshot)] == expected


# -- TestDefaultSelector --------------------------------------------------------------------------------------------

NS, POD = "test", "test-pod"
SERVICE = service("test-service", NS, {"podLabelKey": "podLabelVal"})
REPLICA_SET = controller("ReplicaSet", "test-replicaset", NS, {"replicaSetLabelKey": "replicaSetLabelVal"})
RC = controller(
    "ReplicationController", "test-replicationcontroller", NS, {"replicationLabelKey": "replicationLabelVal"}
)
STATEFUL_SET = controller("StatefulSet", "test-statefulset", NS, {"statefulSetLabelKey": "statefulSetLabelVal"})
LABELS = {"podLabelKey": "podLabelVal"}

# upstream's cases share one informer: each adds its objects to those of the cases before it
DEFAULT_SELECTOR_CASES = [
    ("DefaultSelector for default case", None, [], {}),
    ("DefaultSelector for no OwnerReference pod case", None, [SERVICE], {"podLabelKey": "podLabelVal"}),
    (
        "DefaultSelector for ReplicaSet OwnerReference pod case",
        ("apps/v1", "ReplicaSet", "test-replicaset"),
        [SERVICE, REPLICA_SET],
        {"podLabelKey": "podLabelVal", "replicaSetLabelKey": "replicaSetLabelVal"},
    ),
    (
        "DefaultSelector for ReplicationController OwnerReference pod case",
        ("v1", "ReplicationController", "test-replicationcontroller"),
        [SERVICE, REPLICA_SET, RC],
        {"podLabelKey": "podLabelVal", "replicationLabelKey": "replicationLabelVal"},
    ),
    (
        "DefaultSelector for StatefulSet OwnerReference pod case",
        ("apps/v1", "StatefulSet", "test-statefulset"),
        [SERVICE, REPLICA_SET, RC, STATEFUL_SET],
        {"podLabelKey": "podLabelVal", "statefulSetLabelKey": "statefulSetLabelVal"},
    ),
]


@pytest.mark.parametrize(
    ("owner", "objects", "expected"),
    [case[1:] for case in DEFAULT_SELECTOR_CASES],
    ids=[case[0] for case in DEFAULT_SELECTOR_CASES],
)
def test_default_selector(
    owner: tuple[str, str, str] | None, objects: list[dict[str, Any]], expected: dict[str, str]
) -> None:
    snapshot = build_snapshot([*objects, pod(POD, NS, LABELS, owner)])
    selector = default_selector(pod_in(snapshot, POD), snapshot)
    assert as_set(selector) == expected
    assert [r.key for r in selector.requirements] == sorted(expected)  # labels.Set.String() sorts by key


# -- how upstream merges (helper/spread.go) -------------------------------------------------------------------------


def test_services_that_do_not_select_the_pod_or_have_no_selector_add_nothing() -> None:
    objects = [
        service("a", NS, {"app": "x"}),
        service("b", NS, None),
        service("c", NS, {}),
        service("other-namespace", "elsewhere", {"podLabelKey": "podLabelVal"}),
        service("d", NS, {"podLabelKey": "podLabelVal", "tier": "web"}),
    ]
    snapshot = build_snapshot([*objects, pod(POD, NS, {**LABELS, "tier": "web"})])
    selected = services_of(pod_in(snapshot, POD), snapshot)
    assert [s.name for s in selected] == ["d"]  # nil selectors match nothing (an empty one is stored as nil)
    assert as_set(default_selector(pod_in(snapshot, POD), snapshot)) == {"podLabelKey": "podLabelVal", "tier": "web"}


def test_a_replication_controller_is_merged_into_the_set_and_its_keys_win() -> None:
    """labels.Merge(services, rc.Spec.Selector): the RC's value replaces the Services' for a key they share."""
    rc = controller("ReplicationController", "rc", NS, {"podLabelKey": "other", "r": "1"})
    snapshot = build_snapshot([SERVICE, rc, pod(POD, NS, LABELS, ("v1", "ReplicationController", "rc"))])
    assert as_set(default_selector(pod_in(snapshot, POD), snapshot)) == {"podLabelKey": "other", "r": "1"}


def test_a_replica_set_adds_its_requirements_beside_the_services() -> None:
    """selector.Add(r...): both requirements stay for a shared key; expressions are kept as they are."""
    raw = controller("ReplicaSet", "rs", NS, {"podLabelKey": "podLabelVal"})
    raw["spec"]["selector"]["matchExpressions"] = [{"key": "env", "operator": "NotIn", "values": ["dev"]}]
    snapshot = build_snapshot([SERVICE, raw, pod(POD, NS, LABELS, ("apps/v1", "ReplicaSet", "rs"))])
    selector = default_selector(pod_in(snapshot, POD), snapshot)
    assert list(selector.requirements) == [
        Requirement("env", "NotIn", frozenset({"dev"})),
        Requirement("podLabelKey", "In", frozenset({"podLabelVal"})),
        Requirement("podLabelKey", "In", frozenset({"podLabelVal"})),
    ]


@pytest.mark.parametrize(
    "owner",
    [
        ("apps/v1", "ReplicaSet", "missing"),  # not found: nothing added
        ("extensions/v1beta1", "ReplicaSet", "rs"),  # another group version: not a supported controller
        ("apps/v1", "Deployment", "rs"),  # another kind
        ("apps/v1", "ReplicaSet", None),  # not the controller (controller unset)
    ],
)
def test_other_owners_add_nothing(owner: tuple[str, str, str | None]) -> None:
    raw = pod(POD, NS, LABELS, (owner[0], owner[1], owner[2] or "rs"))
    if owner[2] is None:
        del raw["metadata"]["ownerReferences"][0]["controller"]
    rs = controller("ReplicaSet", "rs", NS, {"r": "1"})
    snapshot = build_snapshot([SERVICE, rs, raw])
    assert as_set(default_selector(pod_in(snapshot, POD), snapshot)) == {"podLabelKey": "podLabelVal"}


def test_a_replica_set_without_a_selector_adds_nothing_and_the_first_controller_reference_counts() -> None:
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": NS}, "spec": {}}
    ss = controller("StatefulSet", "ss", NS, {"s": "1"})
    raw = pod(POD, NS, LABELS)
    raw["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "other"},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "ss", "controller": True},
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "controller": True},
    ]
    snapshot = build_snapshot([rs, ss, raw])
    assert controller_of(pod_in(snapshot, POD)) == ("apps/v1", "StatefulSet", "ss")
    assert as_set(default_selector(pod_in(snapshot, POD), snapshot)) == {"s": "1"}
    raw["metadata"]["ownerReferences"] = raw["metadata"]["ownerReferences"][2:]
    snapshot = build_snapshot([rs, ss, raw])
    assert default_selector(pod_in(snapshot, POD), snapshot).is_empty
