"""Pod bandwidth at admission: every rule, every precedence conflict, patches."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import jsonpatch
import pytest
import yaml

from operators.api.appgroup import AppGroup
from operators.engine.admission.pod_bandwidth import Denied, admit_pod, json_patch
from operators.engine.cluster.objects import Namespace

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "hack" / "examples"
A1 = AppGroup.model_validate(yaml.safe_load((EXAMPLES / "appgroup-a1.yaml").read_text()))
IB, EB, IR, ER = (
    "kubernetes.io/ingress-bandwidth",
    "kubernetes.io/egress-bandwidth",
    "kubernetes.io/ingress-request",
    "kubernetes.io/egress-request",
)


def pod(
    annotations: dict[str, str] | None = None, selector: str | None = None, namespace: str = "default"
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": namespace}
    if annotations is not None:
        meta["annotations"] = annotations
    if selector:
        meta["labels"] = {"appgroup.diktyo.x-k8s.io": "a1", "appgroup.diktyo.x-k8s.io.workload": selector}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [{"name": "c"}]}}


def ns(**annotations: str) -> Namespace:
    return Namespace.parse(
        {
            "metadata": {
                "name": "default",
                "annotations": {
                    f"netaware.io/default-{key.replace('_', '-')}": value for key, value in annotations.items()
                },
            }
        }
    )


def added(raw: dict[str, Any], namespace: Namespace | None = None) -> dict[str, str]:
    admission = admit_pod(raw, [A1], namespace)
    return admission.annotations(raw["metadata"].get("annotations") or {})


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("p1", {ER: "100Mi", "netaware.io/bandwidth-source": "kubernetes.io/egress-request=appgroup"}),
        (
            "p2",
            {
                IR: "100Mi",
                ER: "250Mi",
                "netaware.io/bandwidth-source": (
                    "kubernetes.io/egress-request=appgroup,kubernetes.io/ingress-request=appgroup"
                ),
            },
        ),
        ("p3", {IR: "250Mi", "netaware.io/bandwidth-source": "kubernetes.io/ingress-request=appgroup"}),
    ],
)
def test_seeds_a1_requests(selector: str, expected: dict[str, str]) -> None:
    assert added(pod(selector=selector)) == expected


def test_existing_values_are_never_overwritten() -> None:
    result = added(pod({ER: "50M"}, selector="p1"))
    assert result == {}  # the pod's own request wins over the AppGroup's


def test_koordinator_annotation_fills_what_is_missing_and_beats_the_appgroup() -> None:
    qos = json.dumps({"ingressLimit": "300M", "egressLimit": "400M", "egressRequest": "200M"})
    result = added(pod({"koordinator.sh/networkQOS": qos, IB: "200M"}, selector="p2"))
    assert result[EB] == "400M" and result[ER] == "200M"  # networkQOS over the AppGroup's 250Mi
    assert IB not in result  # already on the pod
    assert result[IR] == "100Mi"  # the AppGroup fills what networkQOS does not have
    sources = dict(item.split("=") for item in result["netaware.io/bandwidth-source"].split(","))
    assert sources == {EB: "koordinator.sh/networkQOS", ER: "koordinator.sh/networkQOS", IR: "appgroup"}


def test_namespace_defaults_fill_the_rest_and_requests_default_to_limits() -> None:
    result = added(pod({}, selector="p1"), ns(ingress_bandwidth="1G", egress_bandwidth="500M", ingress_request="10M"))
    assert result[IB] == "1G" and result[EB] == "500M"
    assert result[IR] == "10M"  # the namespace's request default
    assert result[ER] == "100Mi"  # the AppGroup wins over namespace defaults
    result = added(pod({IB: "300M"}))
    assert result == {IR: "300M", "netaware.io/bandwidth-source": "kubernetes.io/ingress-request=limit"}


def test_a_pod_outside_any_rule_is_left_alone() -> None:
    assert added(pod()) == {}
    assert added(pod(selector="unknown")) == {}
    assert added(pod(selector="p1", namespace="elsewhere")) == {}  # the AppGroup covers "default" only


@pytest.mark.parametrize(
    ("annotations", "namespace", "message"),
    [
        ({IB: "10Q"}, None, "metadata.annotations[kubernetes.io/ingress-bandwidth]: not a quantity"),
        ({EB: "-5M"}, None, 'metadata.annotations[kubernetes.io/egress-bandwidth]: negative bandwidth (got "-5M")'),
        (
            {IB: "100M", IR: "200M"},
            None,
            'kubernetes.io/ingress-request "200M" is above kubernetes.io/ingress-bandwidth "100M"',
        ),
        (
            {"koordinator.sh/networkQOS": "{bad"},
            None,
            "metadata.annotations[koordinator.sh/networkQOS]: not valid JSON",
        ),
        ({"koordinator.sh/networkQOS": "[1]"}, None, "expected a JSON object"),
        ({"koordinator.sh/networkQOS": '{"ingressLimit": "fast"}'}, None, "networkQOS].ingressLimit: not a quantity"),
        (
            {EB: "100M"},
            None,
            'kubernetes.io/egress-request "250Mi" (from appgroup) is above kubernetes.io/egress-bandwidth',
        ),
        ({IB: "2P"}, None, "metadata.annotations[kubernetes.io/ingress-bandwidth]: out of range"),
        ({IB: "1e99999999"}, None, "metadata.annotations[kubernetes.io/ingress-bandwidth]: out of range"),
        ({"koordinator.sh/networkQOS": '{"egressRequest": "-1"}'}, None, "networkQOS].egressRequest: negative"),
    ],
)
def test_bad_values_are_denied_naming_annotation_and_value(
    annotations: dict[str, str], namespace: Namespace | None, message: str
) -> None:
    with pytest.raises(Denied) as raised:
        admit_pod(pod(annotations, selector="p2"), [A1], namespace)
    assert message in str(raised.value)


def test_a_broken_namespace_default_is_skipped_and_reported_never_a_denial() -> None:
    namespace = ns(egress_bandwidth="lots", ingress_bandwidth="200M")
    admission = admit_pod(pod({}), [], namespace)  # the pod itself is fine: it is admitted
    assert admission.added == {IB: "200M", IR: "200M"}  # the valid default still applies, the broken one not
    assert admission.namespace_problems == (
        "Namespace default metadata.annotations[netaware.io/default-egress-bandwidth]: not a quantity: no digits "
        '(got "lots"); the default is ignored',
    )
    full = {IB: "1M", EB: "1M", IR: "1M", ER: "1M"}  # a pod that sets all four is untouched by any default
    assert admit_pod(pod(full), [], namespace).added == {}


def test_patch_creates_the_map_escapes_keys_and_is_idempotent() -> None:
    raw = pod(selector="p2")  # no annotations map at all
    annotations = added(raw)
    patch = json_patch(raw, annotations)
    assert patch == [{"op": "add", "path": "/metadata/annotations", "value": annotations}]
    mutated = jsonpatch.apply_patch(raw, patch)
    assert added(mutated) == {}  # a second admission changes nothing
    existing = pod({"team": "x"}, selector="p3")
    patch = json_patch(existing, added(existing))
    assert [op["path"] for op in patch] == [
        "/metadata/annotations/kubernetes.io~1ingress-request",
        "/metadata/annotations/netaware.io~1bandwidth-source",
    ]
    assert jsonpatch.apply_patch(existing, patch)["metadata"]["annotations"]["kubernetes.io/ingress-request"] == "250Mi"
