"""The node agent's plan (pure): classes from the NodeSLO by the status rule, pods sorted into classes, per-pod
leaves, stable class ids. Expected values derived by hand from the numbers in each test."""

from __future__ import annotations

from typing import Any

import pytest

from operators.api.nodeslo import NodeSLO
from operators.api.quantity import Quantity
from operators.engine.cluster.objects import Node, Pod
from operators.engine.enforcement.plan import MIN_RATE, TrafficClass, node_plan, qos_class

M = 1_000_000


def make_node(annotations: dict[str, str] | None = None) -> Node:
    return Node.parse({"metadata": {"name": "n1", "annotations": annotations or {}}})


def slo(spec: dict[str, Any]) -> NodeSLO:
    """A NodeSLO as Koordinator's slo-controller writes it: a spec and no status."""
    return NodeSLO.model_validate({"metadata": {"name": "n1"}, "spec": spec})


STRATEGY = {
    "resourceQOSStrategy": {
        "lsClass": {"networkQOS": {"enable": True, "egressRequest": 30, "egressLimit": 80, "ingressRequest": "200M"}},
        "beClass": {"networkQOS": {"enable": True, "egressRequest": 10, "egressLimit": 50}},
    }
}


def make_pod(
    name: str,
    label: str | None = None,
    annotations: dict[str, str] | None = None,
    qos: str | None = None,
    ip: str = "10.0.0.1",
    host_network: bool = False,
    node: str = "n1",
) -> Pod:
    status: dict[str, Any] = {"phase": "Running", "podIP": ip}
    if qos:
        status["qosClass"] = qos
    return Pod.parse(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "labels": {"koordinator.sh/qosClass": label} if label else {},
                "annotations": annotations or {},
            },
            "spec": {"nodeName": node, "hostNetwork": host_network, "containers": [{"name": "c"}]},
            "status": status,
        }
    )


def test_classes_take_the_nodeslo_rule_rate_is_the_request_and_ceil_the_limit() -> None:
    plan = node_plan(make_node({"node.koordinator.sh/network-bandwidth": "1G"}), slo(STRATEGY), [])
    egress = plan.directions["egress"]
    assert egress.total == 1000 * M
    assert egress.classes == (
        # system: what ls (300M) and be (100M) do not request; may use the whole node
        TrafficClass("system", 0x10, 0, 600 * M, 1000 * M),
        # lsr requests nothing: HTB's smallest rate, the whole node as ceil
        TrafficClass("lsr", 0x20, 1, MIN_RATE, 1000 * M),
        TrafficClass("ls", 0x30, 2, 300 * M, 800 * M),  # 30 % and 80 % of 1G
        TrafficClass("be", 0x40, 3, 100 * M, 500 * M),  # 10 % and 50 %
    )
    ingress = {c.name: (c.rate, c.ceil) for c in plan.directions["ingress"].classes}
    assert ingress == {
        "system": (800 * M, 1000 * M),  # 1G - ls's absolute 200M
        "lsr": (MIN_RATE, 1000 * M),
        "ls": (200 * M, 1000 * M),
        "be": (MIN_RATE, 1000 * M),
    }


def test_the_total_comes_from_the_nodeslo_when_the_node_has_no_annotation_and_nothing_is_shaped_without_one() -> None:
    plan = node_plan(make_node(), slo({**STRATEGY, "systemStrategy": {"totalNetworkBandwidth": "10G"}}), [])
    assert {c.name: c.ceil for c in plan.directions["egress"].classes}["ls"] == 8000 * M
    nothing = node_plan(make_node(), None, [make_pod("a")])
    assert nothing.directions == {}
    assert nothing.problems[0].startswith("nothing shaped: no bandwidth for node n1")
    assert node_plan(make_node(), None, [], default_total=Quantity.parse("1G")).directions["egress"].total == 1000 * M


@pytest.mark.parametrize(
    ("what", "pod", "expected"),
    [
        ("SYSTEM label", make_pod("a", "SYSTEM"), "system"),
        ("LSE joins LSR", make_pod("a", "LSE"), "lsr"),
        ("LSR label", make_pod("a", "LSR"), "lsr"),
        ("LS label", make_pod("a", "LS"), "ls"),
        ("BE label wins over Guaranteed", make_pod("a", "BE", qos="Guaranteed"), "be"),
        ("unlabelled Guaranteed", make_pod("a", qos="Guaranteed"), "ls"),
        ("unlabelled Burstable", make_pod("a", qos="Burstable"), "ls"),
        ("unlabelled BestEffort", make_pod("a", qos="BestEffort"), "be"),
        ("unlabelled, no QoS reported, no requests", make_pod("a"), "be"),
        ("an unknown label reads as unlabelled", make_pod("a", "GOLD", qos="Burstable"), "ls"),
    ],
)
def test_pods_are_sorted_into_classes(what: str, pod: Pod, expected: str) -> None:
    assert qos_class(pod) == expected, what


def test_limited_pods_get_leaves_with_stable_ids_and_the_rest_join_their_class() -> None:
    pods = [
        make_pod(
            "web",
            "LS",
            {"kubernetes.io/egress-bandwidth": "200M", "kubernetes.io/egress-request": "50M"},
            ip="10.0.0.2",
        ),
        make_pod("batch", qos="BestEffort", ip="10.0.0.3"),
        make_pod("agent", "SYSTEM", {"kubernetes.io/ingress-bandwidth": "10M"}, ip="10.0.0.4"),
        make_pod("new", "LS", {"kubernetes.io/egress-bandwidth": "1G"}, ip="10.0.0.5"),
        make_pod("host", "LS", {"kubernetes.io/egress-bandwidth": "1M"}, host_network=True),
        make_pod("elsewhere", node="n2"),
        make_pod("bad", "LS", {"kubernetes.io/egress-bandwidth": "lots"}, ip="10.0.0.6"),
    ]
    node = make_node({"node.koordinator.sh/network-bandwidth": "1G"})
    plan = node_plan(node, slo(STRATEGY), pods, previous={"egress": {"ns/web": 0x105}})
    egress = {p.key: (p.ip, p.qos_class, p.minor, p.rate, p.ceil) for p in plan.directions["egress"].pods}
    assert egress == {
        "ns/agent": ("10.0.0.4", "system", None, 0, 0),
        "ns/bad": ("10.0.0.6", "ls", None, 0, 0),  # unreadable limit: in its class, not limited, reported
        "ns/batch": ("10.0.0.3", "be", None, 0, 0),
        "ns/new": ("10.0.0.5", "ls", 0x100, 1000 * M, 1000 * M),  # a new leaf: the lowest free id
        "ns/web": ("10.0.0.2", "ls", 0x105, 50 * M, 200 * M),  # keeps the id the kernel has
    }
    ingress = {p.key: (p.minor, p.rate, p.ceil) for p in plan.directions["ingress"].pods if p.minor is not None}
    assert ingress == {"ns/agent": (0x100, 10 * M, 10 * M)}  # the limit is the rate when no request is given
    assert any("pod ns/host has no IP of its own" in problem for problem in plan.problems)
    assert any("pod ns/bad: metadata.annotations[kubernetes.io/egress-bandwidth]" in p for p in plan.problems)
    # one pod gone: the others keep their ids (one leaf removed, nothing renumbered)
    again = node_plan(node, slo(STRATEGY), [p for p in pods if p.name != "web"], previous={"egress": {"ns/new": 0x100}})
    assert {p.key: p.minor for p in again.directions["egress"].pods if p.minor} == {"ns/new": 0x100}
