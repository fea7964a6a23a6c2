"""Bandwidth as extended resources: what a pod requests, what kube-scheduler counts, what a node advertises, and
the property that ties them: the engine's count equals kube-scheduler's and never exceeds a node's capacity."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from operators.api.quantity import Quantity
from operators.engine.admission.pod_bandwidth import resource_patch
from operators.engine.cluster.bandwidth import Accounting, pod_demand
from operators.engine.cluster.objects import Node, Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.cluster.usage import PodUsage
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.status.node_bandwidth import (
    Advertisement,
    advertised,
    advertisement,
    status_patch,
    unaccounted_usage,
)

IN, OUT, BOTH = "netaware.io/ingress-bandwidth", "netaware.io/egress-bandwidth", "netaware.io/bandwidth"
DUPLEX, COMBINED = Accounting.DUPLEX, Accounting.COMBINED
M = 1_000_000


def q(text: str) -> Quantity:
    return Quantity.parse(text)


def make_node(name: str = "n1", bandwidth: str | None = "1G", status: dict[str, Any] | None = None) -> Node:
    annotations = {"node.kubernetes.io/network-limit": bandwidth} if bandwidth else {}
    return Node.parse({"metadata": {"name": name, "annotations": annotations}, "status": status or {}})


def make_pod(
    name: str, node: str = "", annotations: dict[str, str] | None = None, resources: dict[str, str] | None = None
) -> Pod:
    container: dict[str, Any] = {"name": "c"}
    if resources:
        container["resources"] = {"requests": resources, "limits": resources}
    raw = {
        "metadata": {"name": name, "namespace": "ns", "annotations": annotations or {}},
        "spec": {"nodeName": node, "containers": [container]},
    }
    return Pod.parse(raw)


# -- pod demand: resources are what kube-scheduler counts, and win --------------------------------------------


@pytest.mark.parametrize(
    ("what", "annotations", "resources", "expected"),
    [
        ("annotations alone", {"kubernetes.io/ingress-bandwidth": "100M"}, {}, (100 * M, 0)),
        (
            "duplex resources win over annotations",
            {"kubernetes.io/ingress-bandwidth": "100M"},
            {IN: "30M"},
            (30 * M, 0),
        ),
        ("one direction's resource: the other is 0", {"kubernetes.io/egress-bandwidth": "5M"}, {OUT: "7M"}, (0, 7 * M)),
        (
            "combined resource split as the annotations say when they add up",
            {"kubernetes.io/ingress-bandwidth": "100M", "kubernetes.io/egress-bandwidth": "50M"},
            {BOTH: "150M"},
            (100 * M, 50 * M),
        ),
        (
            "combined resource that the annotations do not add up to: all egress",
            {"kubernetes.io/ingress-bandwidth": "100M"},
            {BOTH: "150M"},
            (0, 150 * M),
        ),
        (
            "combined resource, unreadable annotations: all egress",
            {"kubernetes.io/ingress-bandwidth": "x"},
            {BOTH: "9"},
            (0, 9),
        ),
    ],
)
def test_pod_demand(
    what: str, annotations: dict[str, str], resources: dict[str, str], expected: tuple[int, int]
) -> None:
    pod = make_pod("p", annotations=annotations, resources=resources)
    assert pod_demand(pod.annotations, pod.requests) == expected, what


def test_requests_per_mode_leave_zero_out() -> None:
    assert DUPLEX.requests(100, 0) == {IN: 100}
    assert DUPLEX.requests(100, 200) == {IN: 100, OUT: 200}
    assert COMBINED.requests(100, 200) == {BOTH: 300}
    assert COMBINED.requests(0, 0) == {}


def test_accounted_means_a_resource_of_the_mode() -> None:
    assert DUPLEX.accounted({OUT: q("1")})
    assert not DUPLEX.accounted({BOTH: q("1")})  # the other mode's: kube-scheduler does not count it here
    assert COMBINED.accounted({BOTH: q("1")})
    assert not COMBINED.accounted({"cpu": q("1")})


# -- what a node advertises --------------------------------------------------------------------------------------


def usage_of(accounting: Accounting, *pods: Pod) -> PodUsage:
    usage = unaccounted_usage(accounting)
    for pod in pods:
        usage.apply(None, pod)
    return usage


def test_a_node_advertises_its_capacity_less_its_unaccounted_pods() -> None:
    legacy = make_pod(
        "old", "n1", {"kubernetes.io/ingress-bandwidth": "100M", "kubernetes.io/egress-bandwidth": "300M"}
    )
    accounted = make_pod("new", "n1", resources={IN: "200M", OUT: "200M"})
    other_node = make_pod("far", "n2", {"kubernetes.io/ingress-bandwidth": "500M"})
    duplex = advertisement(make_node(), None, None, usage_of(DUPLEX, legacy, accounted, other_node), DUPLEX)
    # 1G - 100M and 1G - 300M; the combined resource is not this mode's: removed
    assert duplex == Advertisement({IN: 900 * M, OUT: 700 * M, BOTH: None})
    combined = advertisement(make_node(), None, None, usage_of(COMBINED, legacy, accounted, other_node), COMBINED)
    # in combined mode the duplex-resourced pod is unaccounted too: 1G - (100M + 300M) - (200M + 200M)
    assert combined == Advertisement({BOTH: 200 * M, IN: None, OUT: None})


def test_finished_and_unbound_pods_are_not_counted_and_a_deletion_gives_the_room_back() -> None:
    done = Pod.parse(
        {
            "metadata": {"name": "done", "namespace": "ns", "annotations": {"kubernetes.io/egress-bandwidth": "1G"}},
            "spec": {"nodeName": "n1"},
            "status": {"phase": "Succeeded"},
        }
    )
    pending = make_pod("pending", "", {"kubernetes.io/egress-bandwidth": "1G"})
    running = make_pod("running", "n1", {"kubernetes.io/egress-bandwidth": "400M"})
    usage = usage_of(DUPLEX, done, pending, running)
    assert advertisement(make_node(), None, None, usage, DUPLEX).resources[OUT] == 600 * M
    assert usage.apply(running, None) == {"n1"}
    assert advertisement(make_node(), None, None, usage, DUPLEX).resources[OUT] == 1000 * M


def test_overcommitted_legacy_pods_advertise_zero_not_a_negative_amount() -> None:
    legacy = make_pod("old", "n1", {"kubernetes.io/egress-bandwidth": "3G"})
    assert advertisement(make_node(), None, None, usage_of(DUPLEX, legacy), DUPLEX).resources[OUT] == 0


def test_unknown_capacity_or_unreadable_usage_advertises_zero_with_the_reason() -> None:
    unknown = advertisement(make_node(bandwidth=None), None, None, usage_of(DUPLEX), DUPLEX)
    assert unknown.resources == {IN: 0, OUT: 0, BOTH: None}
    assert unknown.problem == "node n1 bandwidth capacity unknown (no annotation, NodeSLO total or default)"
    default = advertisement(make_node(bandwidth=None), None, q("10G"), usage_of(DUPLEX), DUPLEX)
    assert default.resources[IN] == 10_000 * M and not default.problem
    slo = advertisement(make_node(bandwidth=None), "2G", None, usage_of(DUPLEX), DUPLEX)
    assert slo.resources[OUT] == 2000 * M
    broken = make_pod("bad", "n1", {"kubernetes.io/egress-bandwidth": "lots"})
    unreadable = advertisement(make_node(), None, None, usage_of(COMBINED, broken), COMBINED)
    assert unreadable.resources[BOTH] == 0
    assert "pod ns/bad" in unreadable.problem and "kubernetes.io/egress-bandwidth" in unreadable.problem


def test_status_patch_sets_capacity_and_allocatable_and_nothing_when_already_so() -> None:
    wanted = Advertisement({IN: 900 * M, OUT: 700 * M, BOTH: None})
    fresh = make_node(status={"allocatable": {"cpu": "4"}, "capacity": {BOTH: "5", "cpu": "4"}})
    assert status_patch(fresh, wanted) == {
        "status": {
            "capacity": {IN: "900000000", OUT: "700000000", BOTH: None},
            "allocatable": {IN: "900000000", OUT: "700000000"},
        }
    }
    # as the API server gives it back: canonical quantities
    done = make_node(status={"allocatable": {IN: "900M", OUT: "700M"}, "capacity": {IN: "900M", OUT: "700M"}})
    assert status_patch(done, wanted) is None
    assert advertised(done) == {IN: 900 * M, OUT: 700 * M}
    # kubelet rewrote allocatable from capacity: only what differs is patched back
    drifted = make_node(status={"allocatable": {IN: "1G", OUT: "700M"}, "capacity": {IN: "900M", OUT: "700M"}})
    assert status_patch(drifted, wanted) == {"status": {"allocatable": {IN: "900000000"}}}


# -- the webhook's resource requests -----------------------------------------------------------------------------


def admitted(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if init is not None:
        spec["initContainers"] = init
    return {"metadata": {"name": "p"}, "spec": spec}


BANDWIDTH = {
    "kubernetes.io/ingress-bandwidth": "100M",
    "kubernetes.io/egress-request": "20M",
    "kubernetes.io/egress-bandwidth": "50M",
}


def test_resource_patch_adds_requests_equal_to_limits_on_the_first_container() -> None:
    pod = admitted([{"name": "a"}, {"name": "b"}])
    patched = jsonpatch.apply_patch(pod, resource_patch(pod, BANDWIDTH, DUPLEX))
    # ingress: its limit (no request); egress: the request 20M, the guaranteed minimum
    assert patched["spec"]["containers"][0]["resources"] == {
        "requests": {IN: "100000000", OUT: "20000000"},
        "limits": {IN: "100000000", OUT: "20000000"},
    }
    assert "resources" not in patched["spec"]["containers"][1]
    combined = jsonpatch.apply_patch(pod, resource_patch(pod, BANDWIDTH, COMBINED))
    assert combined["spec"]["containers"][0]["resources"]["limits"] == {BOTH: "120000000"}


def test_resource_patch_keeps_the_containers_own_resources() -> None:
    pod = admitted([{"name": "a", "resources": {"requests": {"cpu": "1"}}}])
    patched = jsonpatch.apply_patch(pod, resource_patch(pod, {"kubernetes.io/egress-bandwidth": "1G"}, DUPLEX))
    assert patched["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "1", OUT: "1000000000"},
        "limits": {OUT: "1000000000"},
    }


@pytest.mark.parametrize(
    ("what", "pod"),
    [
        ("already requested (a reinvocation)", admitted([{"name": "a", "resources": {"requests": {IN: "1"}}}])),
        ("the user's own limit", admitted([{"name": "a"}, {"name": "b", "resources": {"limits": {BOTH: "5"}}}])),
        ("in an init container", admitted([{"name": "a"}], [{"name": "i", "resources": {"limits": {OUT: "5"}}}])),
        ("no container", admitted([])),
    ],
)
def test_resource_patch_adds_nothing_twice(what: str, pod: dict[str, Any]) -> None:
    assert resource_patch(pod, BANDWIDTH, DUPLEX) == [], what


def test_resource_patch_adds_nothing_without_bandwidth() -> None:
    assert resource_patch(admitted([{"name": "a"}]), {"kubernetes.io/egress-bandwidth": "0"}, DUPLEX) == []


# -- the property: the offline engine counts what kube-scheduler counts, and never beyond capacity ---------------

CAPACITY = 1000


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[str, int, int, int, bool]]:
    """(op, pod, in, out, carries resources): create a pod, bind it to a node, delete it."""
    steps = []
    for _ in range(draw(st.integers(1, 40))):
        steps.append(
            (
                draw(st.sampled_from(("create", "bind", "bind", "delete"))),
                draw(st.integers(0, 7)),
                draw(st.integers(0, 400)),
                draw(st.integers(0, 400)),
                draw(st.booleans()),
            )
        )
    return steps


def _pod(name: str, node: str, ingress: int, egress: int, resources: bool, accounting: Accounting) -> Pod:
    annotations = {"kubernetes.io/ingress-bandwidth": str(ingress), "kubernetes.io/egress-bandwidth": str(egress)}
    asked = {k: str(v) for k, v in accounting.requests(ingress, egress).items()} if resources else None
    return make_pod(name, node, annotations, asked)


def scheduler_fits(node: Node, bound: list[Pod], pod: Pod, accounting: Accounting) -> bool:
    """kube-scheduler's NodeResourcesFit on netaware's resources: the requested resources of the node's pods
    plus the pod's fit the node's allocatable (a resource the node does not advertise is 0)."""
    for name in accounting.resources:
        wanted = pod.requests[name].value() if name in pod.requests else 0
        if not wanted:
            continue
        used = sum(p.requests[name].value() for p in bound if name in p.requests)
        have = node.allocatable[name].value() if name in node.allocatable else 0
        if used + wanted > have:
            return False
    return True


@settings(max_examples=150, deadline=None)
@given(histories(), st.sampled_from((DUPLEX, COMBINED)))
def test_engine_and_kube_scheduler_count_the_same_and_never_beyond_capacity(
    history: list[tuple[str, int, int, int, bool]], accounting: Accounting
) -> None:
    nodes = ("n1", "n2")
    pods: dict[str, Pod] = {}
    live = PodUsage()  # the extender's count, by delta
    unaccounted = unaccounted_usage(accounting)  # the nodebandwidth controller's, by delta
    status: dict[str, Node] = {name: make_node(name, str(CAPACITY)) for name in nodes}

    def readvertise(name: str) -> None:  # what the controller writes after every change
        wanted = advertisement(status[name], None, None, unaccounted, accounting)
        patch = status_patch(status[name], wanted)
        if patch is not None:
            raw = jsonpatch.apply_patch(dict(status[name].raw), [{"op": "add", "path": "/status", "value": {}}])
            merged: dict[str, Any] = {}
            for section in ("capacity", "allocatable"):
                held = {k: str(v) for k, v in getattr(status[name], section).items()}
                held.update(patch["status"].get(section, {}))
                merged[section] = {k: v for k, v in held.items() if v is not None}
            raw["status"] = merged
            status[name] = Node.parse(raw)

    def change(old: Pod | None, new: Pod | None) -> None:
        live.apply(old, new)
        for name in unaccounted.apply(old, new):
            readvertise(name)

    for name in nodes:
        readvertise(name)
    asked: dict[str, tuple[int, int, bool]] = {}  # pod -> (ingress, egress, carries resources), as created
    for op, number, ingress, egress, resources in history:
        key = f"p{number}"
        held = pods.get(key)
        if op == "create" and held is None:
            asked[key] = (ingress, egress, resources)
            pods[key] = _pod(key, "", ingress, egress, resources, accounting)
            change(None, pods[key])
        elif op == "bind" and held is not None and not held.node_name:
            target = nodes[number % 2]
            bound_pod = _pod(key, target, *asked[key], accounting)
            if accounting.accounted(bound_pod.requests):
                on_node = [p for p in pods.values() if p.node_name == target]
                if not scheduler_fits(status[target], on_node, bound_pod, accounting):
                    continue  # kube-scheduler refuses it
            else:
                # an unaccounted pod (created while the webhook was down): kube-scheduler does not see its
                # bandwidth; it lands only where the extender's NetworkBandwidth filter lets it
                used = live.used(target)
                if not accounting.fits(CAPACITY, used[0], used[1], asked[key][0], asked[key][1]):
                    continue
            pods[key] = bound_pod
            change(held, bound_pod)
        elif op == "delete" and held is not None:
            del pods[key]
            change(held, None)
        snapshot = Snapshot(nodes=tuple(status.values()), pods=tuple(pods.values()))
        offline = ClusterIndex.build(snapshot)
        for name in nodes:
            engine = offline.usage.used(name)
            assert engine == live.used(name)  # offline (from the snapshot) = live (by delta)
            bound = [p for p in pods.values() if p.node_name == name]
            scheduler_counted = {
                resource: sum(p.requests[resource].value() for p in bound if resource in p.requests)
                for resource in accounting.resources
            }
            free_for_scheduler = {
                resource: status[name].allocatable[resource].value() - scheduler_counted[resource]
                for resource in accounting.resources
            }
            if accounting is Accounting.COMBINED:
                assert free_for_scheduler == {BOTH: CAPACITY - engine[0] - engine[1]}
                assert engine[0] + engine[1] <= CAPACITY
            else:
                assert free_for_scheduler == {IN: CAPACITY - engine[0], OUT: CAPACITY - engine[1]}
                assert max(engine) <= CAPACITY


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["requests", "limits", "resources", "name", IN, BOTH]), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@example({"containers": [{"name": "c"}], "initContainers": 5}, DUPLEX)
@example({"containers": [{"resources": {"requests": [1]}}], "initContainers": "x"}, COMBINED)
@given(
    st.dictionaries(
        st.sampled_from(["containers", "initContainers", "nodeName"]), JSON | st.lists(JSON, max_size=2), max_size=3
    ),
    st.sampled_from((DUPLEX, COMBINED)),
)
def test_resource_patch_survives_any_spec(spec: dict[str, Any], accounting: Accounting) -> None:
    """Whatever the pod's spec holds, the patch is a list of operations (the API server refuses what is not a pod),
    never an exception; and when there is a first container that is an object, the patch applies to the pod."""
    pod = {"metadata": {"name": "p"}, "spec": spec}
    operations = resource_patch(pod, {"kubernetes.io/egress-bandwidth": "1M"}, accounting)
    assert isinstance(operations, list)
    containers = spec.get("containers")
    if operations:
        assert isinstance(containers, list) and isinstance(containers[0], dict)
        jsonpatch.apply_patch(pod, operations)
