"""The extender shares an answer between pods only when every plugin would answer them alike: a cached answer
always equals the answer computed for the pod alone, on a fresh extender."""

from __future__ import annotations

import pathlib
from typing import Any

import orjson
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.api.config.scheduler import parse_config
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import Snapshot, build_snapshot
from operators.extender.answers import ExtenderState
from operators.extender.server import Call, filter_body, prioritize_body

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "hack" / "examples"
BANDWIDTH_CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [
        {
            "plugins": {"multiPoint": {"enabled": [{"name": "NetworkBandwidth", "weight": 1}]}},
            "pluginConfig": [{"name": "NetworkBandwidth", "args": {"defaultNodeBandwidth": "1G"}}],
        }
    ],
}
EXAMPLE_CONFIG = parse_config(yaml.safe_load((ROOT / "hack" / "configs" / "scheduler-config.yaml").read_text()))
AMOUNTS = ["0", "10M", "90M", "100M", "400M", "900M", "2G"]


def node(name: str, bandwidth: str | None) -> dict[str, Any]:
    annotations = {"node.koordinator.sh/network-bandwidth": bandwidth} if bandwidth else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": annotations}}


def pod(
    name: str,
    requests: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    node_name: str = "",
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"requests": requests or {}, "limits": requests or {}}}],
        },
    }


def filter_of(state: ExtenderState, raw: dict[str, Any], names: list[str]) -> dict[str, Any]:
    call = Call(state, state.index(), Pod.parse(raw), list(names), None)
    return dict(orjson.loads(filter_body(call)[0]))


def scores_of(state: ExtenderState, raw: dict[str, Any], names: list[str]) -> list[dict[str, Any]]:
    call = Call(state, state.index(), Pod.parse(raw), list(names), None)
    return list(orjson.loads(prioritize_body(call)))


def test_a_pod_requesting_more_bandwidth_is_not_answered_with_a_smaller_pods_answer() -> None:
    """The reproduction: an unlabelled pod requesting 10M, then one requesting 900M in the same namespace; the
    second must fail the 100M node, as it does when asked alone."""
    snapshot = build_snapshot([node("small", "100M"), node("big", "10G")])
    state = ExtenderState(lambda: snapshot, parse_config(BANDWIDTH_CONFIG))
    names = ["small", "big"]
    first = filter_of(state, pod("light", {"netaware.io/egress-bandwidth": "10M"}), names)
    assert first["NodeNames"] == ["small", "big"]
    second = filter_of(state, pod("heavy", {"netaware.io/egress-bandwidth": "900M"}), names)
    assert second["NodeNames"] == ["big"]
    assert "insufficient egress bandwidth" in second["FailedNodes"]["small"]


def test_the_scores_follow_each_pods_request() -> None:
    """Duplex: a node's total is twice its capacity. 10M leaves 95 % of the 100M node's 200M, 99 % of 1G's and of
    10G's (truncated): normalised 0, 100, 100. 900M leaves 0 of 200M, 55 % of 2G, 95 % of 20G: normalised 0,
    55*100//95 = 57, 100; on the extender's 0..10 scale 0, 5, 10."""
    snapshot = build_snapshot([node("small", "100M"), node("mid", "1G"), node("big", "10G")])
    state = ExtenderState(lambda: snapshot, parse_config(BANDWIDTH_CONFIG))
    names = ["small", "mid", "big"]
    light = scores_of(state, pod("light", {"netaware.io/egress-bandwidth": "10M"}), names)
    heavy = scores_of(state, pod("heavy", {"netaware.io/egress-bandwidth": "900M"}), names)
    assert [entry["Score"] for entry in light] == [0, 10, 10]
    assert [entry["Score"] for entry in heavy] == [0, 5, 10]


def test_replicas_of_one_shape_share_the_answer() -> None:
    """The cache still pays: two replicas that differ only in name and uid get one computation."""
    snapshot = build_snapshot([node("small", "100M"), node("big", "10G")])
    state = ExtenderState(lambda: snapshot, parse_config(BANDWIDTH_CONFIG))
    for name in ("r-1", "r-2", "r-3"):
        filter_of(state, pod(name, {"netaware.io/egress-bandwidth": "10M"}), ["small", "big"])
    assert state.answers_reused == 2


def example_documents() -> list[dict[str, Any]]:
    return [d for path in sorted(EXAMPLES.glob("*.yaml")) for d in yaml.safe_load_all(path.read_text()) if d]


pending_pods = st.builds(
    lambda requests, annotations, labels: (requests, annotations, labels),
    st.dictionaries(
        st.sampled_from(["netaware.io/egress-bandwidth", "netaware.io/ingress-bandwidth", "netaware.io/bandwidth"]),
        st.sampled_from(AMOUNTS),
        max_size=2,
    ),
    st.dictionaries(
        st.sampled_from(["kubernetes.io/egress-bandwidth", "kubernetes.io/ingress-request", "unrelated/key"]),
        st.sampled_from([*AMOUNTS, "fast"]),
        max_size=2,
    ),
    st.sampled_from(
        [
            {},
            {"appgroup.diktyo.x-k8s.io": "a1", "appgroup.diktyo.x-k8s.io.workload": "p1"},
            {"appgroup.diktyo.x-k8s.io": "a1", "appgroup.diktyo.x-k8s.io.workload": "p2"},
            {"appgroup.diktyo.x-k8s.io": "onlineboutique", "appgroup.diktyo.x-k8s.io.workload": "p1"},
            {"team": "x"},
        ]
    ),
)


@settings(max_examples=60, deadline=None)
@given(
    capacities=st.lists(st.sampled_from([None, "100M", "500M", "1G", "10G"]), min_size=8, max_size=8),
    placed=st.lists(st.tuples(st.integers(0, 7), st.sampled_from(AMOUNTS)), max_size=6),
    sequence=st.lists(pending_pods, min_size=1, max_size=6),
    with_names=st.booleans(),
)
def test_a_cached_answer_always_equals_the_answer_computed_alone(
    capacities: list[str | None],
    placed: list[tuple[int, str]],
    sequence: list[tuple[dict[str, str], dict[str, str], dict[str, str]]],
    with_names: bool,
) -> None:
    documents = [d for d in example_documents() if d["kind"] != "Node"]
    nodes = [d for d in example_documents() if d["kind"] == "Node"]
    for position, capacity in enumerate(capacities):
        annotations = nodes[position]["metadata"].setdefault("annotations", {})
        annotations.pop("node.koordinator.sh/network-bandwidth", None)
        if capacity:
            annotations["node.koordinator.sh/network-bandwidth"] = capacity
    names = [n["metadata"]["name"] for n in nodes]
    documents += nodes
    documents += [
        pod(f"placed-{i}", {"netaware.io/egress-bandwidth": amount}, node_name=names[where])
        for i, (where, amount) in enumerate(placed)
    ]
    snapshot: Snapshot = build_snapshot(documents)
    asked = names if with_names else names[:5]
    shared = ExtenderState(lambda: snapshot, EXAMPLE_CONFIG)
    for position, (requests, annotations, labels) in enumerate(sequence):
        raw = pod(f"pending-{position}", requests, annotations, labels)
        alone = ExtenderState(lambda: snapshot, EXAMPLE_CONFIG)
        assert filter_of(shared, raw, asked) == filter_of(alone, raw, asked)
        assert scores_of(shared, raw, asked) == scores_of(alone, raw, asked)
