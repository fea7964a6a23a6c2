"""kubectl against the real API server: the CRDs, the examples, printer columns, explain, schema validation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hack.control_plane.cluster import ControlPlane
from tests.support.e2e import EXAMPLES, eventually, example, kubectl_json

pytestmark = pytest.mark.e2e


def test_examples_apply_with_default_validation(cluster: ControlPlane) -> None:
    # The Nodes of cluster.yaml are KWOK's already (created from the same file); apply patches them.
    done = cluster.kubectl("apply", "-f", str(EXAMPLES))
    assert "appgroup.appgroup.diktyo.x-k8s.io/a1" in done.stdout
    assert "networktopology.networktopology.diktyo.x-k8s.io/net-topology-test" in done.stdout
    pods = kubectl_json(cluster, "get", "pods", "-n", "default")["items"]
    assert {pod["metadata"]["name"] for pod in pods} >= {"p2-deployment-7d4b9c-abcde", "p3-deployment-5f6c7d-fghij"}
    eventually(
        lambda: all(pod["status"].get("phase") == "Running" for pod in kubectl_json(cluster, "get", "pods")["items"]),
        what="KWOK runs the example pods",
    )


def test_printer_columns_and_explain(cluster: ControlPlane) -> None:
    cluster.kubectl("apply", "-f", str(EXAMPLES / "appgroup-a1.yaml"), "-f", str(EXAMPLES / "networktopology.yaml"))
    table = cluster.kubectl("get", "ag", "a1").stdout.splitlines()
    assert table[0].split() == ["NAME", "ALGORITHM", "RUNNING", "READY", "AGE"]
    assert table[1].split()[:2] == ["a1", "KahnSort"]
    assert cluster.kubectl("get", "nt").stdout.splitlines()[0].split() == ["NAME", "NODES", "CALCULATED", "AGE"]
    slo = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": {"name": "printer-columns"}}
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(slo))
    header = cluster.kubectl("get", "nslo", "printer-columns").stdout.splitlines()[0].split()
    assert header == ["NAME", "BANDWIDTH", "VALID", "AGE"]
    wide = cluster.kubectl("get", "nslo", "printer-columns", "-o", "wide").stdout.splitlines()[0].split()
    assert wide == ["NAME", "BANDWIDTH", "SOURCE", "VALID", "AGE"]  # Source has priority 1
    cluster.kubectl("delete", "nslo", "printer-columns")
    explained = cluster.kubectl("explain", "appgroup.spec").stdout
    assert "numMembers" in explained and "topologySortingAlgorithm" in explained and "workloads" in explained
    assert "minBandwidth" in cluster.kubectl("explain", "appgroup.spec.workloads.dependencies").stdout


def invalid(change: dict[str, Any]) -> dict[str, Any]:
    group = example("appgroup-a1.yaml")[0]
    group["metadata"]["name"] = "invalid"
    group["spec"].update(change.get("spec", {}))
    if "minBandwidth" in change:
        group["spec"]["workloads"][0]["dependencies"][0]["minBandwidth"] = change["minBandwidth"]
    return group


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"spec": {"numMembers": 0}},
            "spec.numMembers: Invalid value: 0: spec.numMembers in body should be greater than or equal to 1",
        ),
        (
            {"spec": {"topologySortingAlgorithm": "BubbleSort"}},
            'spec.topologySortingAlgorithm: Unsupported value: "BubbleSort"',
        ),
        ({"minBandwidth": "10Q"}, "minBandwidth: Invalid value"),
        ({"minBandwidth": "-5G"}, "minBandwidth: Invalid value"),
    ],
)
def test_invalid_appgroups_are_refused_by_the_crd_schema(
    cluster: ControlPlane, change: dict[str, Any], message: str
) -> None:
    done = cluster.kubectl("apply", "-f", "-", stdin=json.dumps(invalid(change)), check=False)
    assert done.returncode != 0
    assert message in done.stderr, done.stderr
