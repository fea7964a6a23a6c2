"""The in-process answers to kubectl's simplest calls (hack/control_plane/rest.py): which forms they take, and how a
resource name resolves, as kubectl resolves it. tests/e2e/test_in_process_kubectl.py compares them with kubectl's."""

from __future__ import annotations

import pytest

from hack.control_plane.rest import Get, Resource, choose, parse_get, resources_of

pytestmark = pytest.mark.packaging


def test_the_forms_answered_and_every_other_left_to_kubectl() -> None:
    assert parse_get(("get", "pods", "-o", "json")) == Get("pods", None, "default", None)
    assert parse_get(("get", "pod", "web-1", "-n", "shop", "-o", "json")) == Get("pod", "web-1", "shop", None)
    assert parse_get(("get", "pods", "-A", "-l", "app=web", "-o", "json")) == Get("pods", None, None, "app=web")
    assert parse_get(("get", "-n", "shop", "appgroup", "--selector", "a=b", "-o", "json")) == Get(
        "appgroup", None, "shop", "a=b"
    )
    for other in (
        ("get", "pods"),  # kubectl's table
        ("get", "pods", "-o", "wide"),
        ("get", "pods/web-1", "-o", "json"),  # kind/name
        ("get", "pods,nodes", "-o", "json"),
        ("get", "appgroups.appgroup.diktyo.x-k8s.io", "-o", "json"),  # resource.group
        ("get", "pods", "--field-selector", "spec.nodeName=n1", "-o", "json"),
        ("get", "pod", "web-1", "-A", "-o", "json"),  # kubectl refuses it: its error, not ours
        ("get", "pod", "web-1", "-l", "app=web", "-o", "json"),  # ... and this one
        ("get", "pods", "-n", "-o", "json"),  # -n without its value
        ("get", "pod", "a", "b", "-o", "json"),
        ("describe", "pod", "a", "-o", "json"),
    ):
        assert parse_get(other) is None, other


DISCOVERY = {  # an APIGroupDiscoveryList as /apis serves it, cut to what the resolution reads
    "kind": "APIGroupDiscoveryList",
    "items": [
        {"metadata": {"name": ""}, "versions": [{"version": "v1", "resources": [
            {"resource": "events", "singularResource": "event", "scope": "Namespaced", "shortNames": ["ev"],
             "responseKind": {"kind": "Event"}},
            {"resource": "nodes", "singularResource": "node", "scope": "Cluster", "shortNames": ["no"],
             "responseKind": {"kind": "Node"}}]}]},
        {"metadata": {"name": "events.k8s.io"}, "versions": [{"version": "v1", "resources": [
            {"resource": "events", "singularResource": "event", "scope": "Namespaced", "shortNames": ["ev"],
             "responseKind": {"kind": "Event"}}]}]},
        {"metadata": {"name": "network.diktyo.x-k8s.io"}, "versions": [
            {"version": "v1alpha1", "resources": [{"resource": "networktopologies", "singularResource":
             "networktopology", "scope": "Namespaced", "shortNames": ["nt"],
             "responseKind": {"kind": "NetworkTopology"}}]},
            {"version": "v1alpha0", "resources": [{"resource": "old", "scope": "Namespaced"}]}]},
        {"metadata": {"name": "a.example"}, "versions": [{"version": "v1", "resources": [
            {"resource": "widgets", "singularResource": "widget", "scope": "Cluster", "shortNames": ["w"],
             "responseKind": {"kind": "Widget"}}]}]},
        {"metadata": {"name": "b.example"}, "versions": [{"version": "v1", "resources": [
            {"resource": "wheels", "singularResource": "wheel", "scope": "Cluster", "shortNames": ["w"],
             "responseKind": {"kind": "Wheel"}}]}]},
    ],
}  # fmt: skip


def test_a_name_resolves_as_kubectl_resolves_it() -> None:
    names = resources_of(DISCOVERY)
    topology = Resource("network.diktyo.x-k8s.io/v1alpha1", "networktopologies", True, "NetworkTopology")
    for name in ("networktopologies", "networktopology", "nt"):  # plural, singular, short name
        assert choose(names[name]) == topology
    assert "old" not in names  # a version other than the preferred (first) one
    assert choose(names["event"]) == Resource("v1", "events", True, "Event")  # the core group's, before events.k8s.io
    assert choose(names["no"]) == Resource("v1", "nodes", False, "Node")
    assert choose(names["w"]) is None  # two groups, neither core: kubectl's to settle
    assert choose(names["widget"]) == Resource("a.example/v1", "widgets", False, "Widget")


def test_the_paths_are_the_api_servers() -> None:
    pods = Resource("v1", "pods", True, "Pod")
    assert pods.path("shop", "web-1") == "/api/v1/namespaces/shop/pods/web-1"
    assert pods.path(None, None) == "/api/v1/pods"  # every namespace
    nodes = Resource("v1", "nodes", False, "Node")
    assert nodes.path("default", "n1") == "/api/v1/nodes/n1"  # cluster-scoped: the namespace plays no part
    groups = Resource("appgroup.diktyo.x-k8s.io/v1alpha1", "appgroups", True, "AppGroup")
    assert groups.path("a b", None) == "/apis/appgroup.diktyo.x-k8s.io/v1alpha1/namespaces/a%20b/appgroups"
