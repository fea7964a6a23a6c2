"""The webhook's bandwidth guarantee: a created pod also requests its bandwidth as extended resources, once."""

from __future__ import annotations

import base64
import json
import pathlib
from typing import Any

import jsonpatch
import yaml

from operators.engine.cluster.bandwidth import Accounting
from operators.engine.cluster.snapshot import Snapshot, build_snapshot
from webhooks.server import decide
from webhooks.view import ClusterView

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "hack" / "examples"


def review(pod: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"kind": "Pod"}, "namespace": "default", "operation": "CREATE", "object": pod},
    }


def admit(pod: dict[str, Any], view: ClusterView, mode: Accounting | None) -> tuple[dict[str, Any], list[Any]]:
    response = decide(review(pod), view, resources=mode)["response"]
    assert response["allowed"], response
    patch = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    return jsonpatch.apply_patch(pod, patch), patch


def view() -> ClusterView:
    documents = [d for d in yaml.safe_load_all((EXAMPLES / "appgroup-a1.yaml").read_text()) if d]
    snapshot: Snapshot = build_snapshot(documents)
    return ClusterView.from_snapshot(snapshot)


def workload_pod(selector: str) -> dict[str, Any]:
    labels = {"appgroup.diktyo.x-k8s.io": "a1", "appgroup.diktyo.x-k8s.io.workload": selector}
    return {
        "metadata": {"name": "p", "namespace": "default", "labels": labels},
        "spec": {"containers": [{"name": "c"}]},
    }


def test_an_appgroup_pod_requests_its_dependencies_bandwidth_and_a_reinvocation_adds_nothing() -> None:
    cluster = view()
    first, _ = admit(workload_pod("p1"), cluster, Accounting.DUPLEX)
    # p1 depends on p2 with minBandwidth 100Mi (104857600 bits/s): its egress request; nothing points at p1
    assert first["metadata"]["annotations"]["kubernetes.io/egress-request"] == "100Mi"
    assert first["spec"]["containers"][0]["resources"] == {
        "requests": {"netaware.io/egress-bandwidth": "104857600"},
        "limits": {"netaware.io/egress-bandwidth": "104857600"},
    }
    again, patch = admit(first, cluster, Accounting.DUPLEX)
    assert patch == [] and again == first


def test_combined_mode_requests_ingress_plus_egress_and_off_requests_nothing() -> None:
    pod = workload_pod("")
    pod["metadata"]["annotations"] = {"kubernetes.io/ingress-bandwidth": "30M", "kubernetes.io/egress-bandwidth": "20M"}
    combined, _ = admit(pod, view(), Accounting.COMBINED)
    assert combined["spec"]["containers"][0]["resources"]["requests"] == {"netaware.io/bandwidth": "50000000"}
    off, _ = admit(pod, view(), None)
    assert "resources" not in off["spec"]["containers"][0]


def test_with_the_guarantee_a_pod_that_asks_for_bandwidth_is_admitted_marked_once() -> None:
    """The retry entry (webhooks/configuration.py) skips pods that carry netaware.io/admitted: every pod that asks for
    bandwidth (the entry's CEL, in Python) is marked when admitted, once; the others and, without the guarantee (one
    entry, no retry), every pod, are not."""
    from webhooks.configuration import asks_for_bandwidth

    cluster = view()
    plain = {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [{"name": "c"}]}}
    asking = {**plain, "metadata": {**plain["metadata"], "annotations": {"koordinator.sh/networkQOS": "{}"}}}
    member = workload_pod("p1")
    assert [asks_for_bandwidth(p["metadata"].get("annotations") or {}, p["metadata"].get("labels") or {})
            for p in (plain, asking, member)] == [False, True, True]  # fmt: skip
    for pod in (asking, member):
        admitted, _ = admit(pod, cluster, Accounting.DUPLEX)
        assert admitted["metadata"]["annotations"]["netaware.io/admitted"] == "true"
        again, patch = admit(admitted, cluster, Accounting.DUPLEX)
        assert patch == [] and again == admitted
        unguaranteed, _ = admit(pod, cluster, None)
        assert "netaware.io/admitted" not in (unguaranteed["metadata"].get("annotations") or {})
    admitted, patch = admit(plain, cluster, Accounting.DUPLEX)
    assert patch == [] and admitted == plain
