"""The topology-order gate at admission: who gets it, idempotence, and the patch as the API server applies it."""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch
import pytest

from operators.engine.cluster.snapshot import build_snapshot
from webhooks.server import decide
from webhooks.view import ClusterView

GATE = "netaware.io/topology-order"
READY = {"type": "Ready", "status": "True", "reason": "TopologyComputed", "message": "ordered",
         "lastTransitionTime": "2026-11-23T06:00:00Z"}  # fmt: skip


def appgroup(annotations: dict[str, str] | None = None, ready: bool = True, ordered: bool = True) -> dict[str, Any]:
    workloads = [
        {"workload": {"kind": "Deployment", "name": s, "selector": s}, "dependencies": deps}
        for s, deps in (("p1", [{"workload": {"kind": "Deployment", "name": "p2", "selector": "p2"}}]), ("p2", []))
    ]
    status: dict[str, Any] = {"conditions": [READY if ready else {**READY, "status": "False", "reason": "Cycle"}]}
    if ordered:
        status["topologyOrder"] = [
            {"workload": {"kind": "Deployment", "name": "p1", "selector": "p1"}, "index": 1},
            {"workload": {"kind": "Deployment", "name": "p2", "selector": "p2"}, "index": 2},
        ]
    return {
        "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
        "kind": "AppGroup",
        "metadata": {"name": "shop", "namespace": "default", "annotations": annotations or {}},
        "spec": {"numMembers": 2, "topologySortingAlgorithm": "KahnSort", "workloads": workloads},
        "status": status,
    }


def view(*groups: dict[str, Any]) -> ClusterView:
    return ClusterView.from_snapshot(build_snapshot(list(groups)))


def pod(selector: str | None = "p1", group: str = "shop", **spec: Any) -> dict[str, Any]:
    labels = {"appgroup.diktyo.x-k8s.io": group, "appgroup.diktyo.x-k8s.io.workload": selector} if selector else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": labels},
        "spec": {"containers": [{"name": "c"}], **spec},
    }


def admitted(pod_body: dict[str, Any], cluster: ClusterView, gate_by_default: bool = False) -> dict[str, Any]:
    """The pod as the API server stores it after applying the webhook's patch."""
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"kind": "Pod"}, "namespace": "default", "operation": "CREATE",
                    "object": pod_body},
    }  # fmt: skip
    response = decide(review, cluster, gate_by_default)["response"]
    assert response["allowed"]
    patch = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    return jsonpatch.apply_patch(pod_body, patch)  # type: ignore[no-any-return]


def gates(body: dict[str, Any]) -> list[str]:
    return [gate["name"] for gate in body["spec"].get("schedulingGates") or ()]


def test_opted_in_appgroup_gates_its_pods() -> None:
    cluster = view(appgroup({"netaware.io/ordered-scheduling": "true"}))
    assert gates(admitted(pod("p1"), cluster)) == [GATE]
    assert gates(admitted(pod("p2"), cluster)) == [GATE]


def test_a_foreign_gate_is_kept_and_ours_added_after_it() -> None:
    cluster = view(appgroup({"netaware.io/ordered-scheduling": "true"}))
    body = pod("p1", schedulingGates=[{"name": "other.io/quota"}])
    assert gates(admitted(body, cluster)) == ["other.io/quota", GATE]


def test_reinvocation_adds_nothing() -> None:
    cluster = view(appgroup({"netaware.io/ordered-scheduling": "true"}))
    once = admitted(pod("p1"), cluster)
    assert admitted(once, cluster) == once


@pytest.mark.parametrize(
    ("group", "body", "by_default"),
    [
        (appgroup(), pod("p1"), False),  # not opted in
        (appgroup({"netaware.io/ordered-scheduling": "false"}), pod("p1"), True),  # opted out of the default
        (appgroup({"netaware.io/ordered-scheduling": "true"}, ready=False), pod("p1"), False),  # not Ready
        (appgroup({"netaware.io/ordered-scheduling": "true"}, ordered=False), pod("p1"), False),  # no order yet
        (appgroup({"netaware.io/ordered-scheduling": "true"}), pod("p9"), False),  # workload not in the order
        (appgroup({"netaware.io/ordered-scheduling": "true"}), pod(None), False),  # outside any AppGroup
        (appgroup({"netaware.io/ordered-scheduling": "true"}), pod("p1", group="other"), False),  # no such AppGroup
        (appgroup({"netaware.io/ordered-scheduling": "true"}), pod("p1", nodeName="n-1"), False),  # bound already
        # planned by the extender when kube-scheduler asks: never gated, not even by default
        (appgroup({"netaware.io/ordered-scheduling": "plan-ungated"}), pod("p1"), False),
        (appgroup({"netaware.io/ordered-scheduling": "plan-ungated"}), pod("p1"), True),
    ],
)
def test_pods_that_are_never_gated(group: dict[str, Any], body: dict[str, Any], by_default: bool) -> None:
    assert gates(admitted(body, view(group), by_default)) == []


def test_the_flag_gates_every_ready_appgroup_by_default() -> None:
    assert gates(admitted(pod("p1"), view(appgroup()), gate_by_default=True)) == [GATE]
