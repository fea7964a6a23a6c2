"""The node agent's plan (pure): classes from the NodeSLO by the status rule, pods sorted into classes, per-pod
leaves, stable class ids. Expected values derived by hand from the numbers in each test."""

from __future__ import annotations

from typing import Any

import pytest

from operators.api.quantity import Quantity
from operators.engine.cluster.objects import Pod
from operators.engine.enforcement.plan import MIN_RATE, TrafficClass, node_plan, qos_class
from tests.support.agent import make_node, make_pod, slo

M = 1_000_000


STRATEGY = {
    "resourceQOSStrategy": {
        "lsClass": {"networkQOS": {"enable": True, "egressRequest": 30, "egressLimit": 80, "ingressRequest": "200M"}},
        "beClass": {"networkQOS": {"enable": True, "egressRequest": 10, "egressLimit": 50}},
    }
}


def test_classes_take_the_nodeslo_rule_rate_is_the_request_and_ceil_the_limit() -> None:
    plan = node_plan(make_node({"node.koordinator.sh/network-bandwidth": "1G"}), slo(STRATEGY), [])
    egress = plan.directions["egress"]
    assert egress.total == 1000 * M
    assert egress.classes == (
        # system: what lsr (HTB's smallest rate, 8k), ls (300M) and be (100M) leave; may use the whole node.
        # Its NodeSLO request (Koordinator's remainder) is 600M: lsr's rate counts against the root too.
        TrafficClass("system", 0x10, 0, 600 * M - MIN_RATE, 1000 * M, 600 * M),
        # lsr requests nothing: HTB's smallest rate, the whole node as ceil
        TrafficClass("lsr", 0x20, 1, MIN_RATE, 1000 * M, 0),
        TrafficClass("ls", 0x30, 2, 300 * M, 800 * M, 300 * M),  # 30 % and 80 % of 1G
        TrafficClass("be", 0x40, 3, 100 * M, 500 * M, 100 * M),  # 10 % and 50 %
    )
    ingress = {c.name: (c.rate, c.ceil) for c in plan.directions["ingress"].classes}
    assert ingress == {
        "system": (800 * M - 2 * MIN_RATE, 1000 * M),  # 1G - ls's absolute 200M - lsr's and be's smallest rates
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


def test_every_pod_gets_a_leaf_with_a_stable_id_and_its_own_limit_when_it_has_one() -> None:
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
    plan = node_plan(node, slo(STRATEGY), pods, previous={"egress": {"10.0.0.2": 0x105}})
    egress = {p.key: (p.ip, p.qos_class, p.minor, p.rate, p.ceil, p.limited) for p in plan.directions["egress"].pods}
    assert egress == {
        # sorted by key, new leaves take the lowest free ids (0x105 is web's, read back from the kernel)
        "ns/agent": ("10.0.0.4", "system", 0x100, MIN_RATE, 1000 * M, False),  # system's ceil: the whole node
        "ns/bad": ("10.0.0.6", "ls", 0x101, MIN_RATE, 800 * M, False),  # unreadable limit: ls's ceil, reported
        "ns/batch": ("10.0.0.3", "be", 0x102, MIN_RATE, 500 * M, False),  # be's ceil, 50 % of 1G
        "ns/new": ("10.0.0.5", "ls", 0x103, MIN_RATE, 1000 * M, True),  # its own 1G, above its class's 800M
        "ns/web": ("10.0.0.2", "ls", 0x105, 50 * M, 200 * M, True),  # keeps the id the kernel has
    }
    ingress = {p.key: (p.minor, p.rate, p.ceil, p.limited) for p in plan.directions["ingress"].pods}
    assert ingress["ns/agent"] == (0x100, MIN_RATE, 10 * M, True)
    assert ingress["ns/web"] == (0x104, MIN_RATE, 1000 * M, False)  # ls ingress: limit 100 % of 1G
    assert any("pod ns/host has no IP of its own" in problem for problem in plan.problems)
    assert any("pod ns/bad: metadata.annotations[kubernetes.io/egress-bandwidth]" in p for p in plan.problems)
    # one pod gone: the others keep their ids (one leaf removed, nothing renumbered)
    held = {p.ip: p.minor for p in plan.directions["egress"].pods}
    again = node_plan(node, slo(STRATEGY), [p for p in pods if p.name != "web"], previous={"egress": held})
    assert {p.ip: p.minor for p in again.directions["egress"].pods} == {
        k: v for k, v in held.items() if k != "10.0.0.2"
    }


@pytest.mark.parametrize(
    ("ip", "why"),
    [("not-an-ip", "is not an IP address"), ("fd00::5", "is IPv6"), ("10.0.0.9", "is another pod's too")],
)
def test_pods_whose_address_cannot_be_classified_are_reported_and_left_out(ip: str, why: str) -> None:
    pods = [make_pod("a", ip="10.0.0.9"), make_pod("b", ip=ip)]
    plan = node_plan(make_node({"node.koordinator.sh/network-bandwidth": "1G"}), None, pods)
    assert [p.key for p in plan.directions["egress"].pods] == ["ns/a"]
    assert any(problem.startswith("pod ns/b: status.podIP") and why in problem for problem in plan.problems)


@pytest.mark.parametrize(
    ("network_qos", "expected"),
    [
        (
            {"lsClass": {"networkQOS": {"egressRequest": 70}}, "beClass": {"networkQOS": {"egressRequest": "400M"}}},
            "the egressRequests of lsrClass, lsClass and beClass add up to 1100000000 bits/s, "
            "more than the node's 1000000000",
        ),
        (
            {"beClass": {"networkQOS": {"ingressRequest": 40, "ingressLimit": 30}}},
            "spec.resourceQOSStrategy.beClass.networkQOS.ingressRequest: 400000000 bits/s "
            "is above ingressLimit 300000000",
        ),
    ],
)
def test_impossible_nodeslo_values_make_no_plan_and_name_the_field(network_qos: dict[str, Any], expected: str) -> None:
    plan = node_plan(
        make_node({"node.koordinator.sh/network-bandwidth": "1G"}), slo({"resourceQOSStrategy": network_qos}), []
    )
    assert plan.directions == {}
    assert any(expected in problem and problem.startswith("invalid NodeSLO n1: ") for problem in plan.problems), (
        plan.problems
    )


def test_more_pods_than_leaf_ids_change_nothing_and_say_so() -> None:
    node = make_node({"node.koordinator.sh/network-bandwidth": "1G"})
    crowd = [make_pod(f"p{i}", ip=f"10.{i // 250}.{i % 250}.1") for i in range(0xF00 + 1)]  # 3,841 > 0x100..0xFFF
    plan = node_plan(node, None, crowd)
    assert plan.directions == {}
    assert plan.problems == (
        "node n1 has no NodeSLO: every class requests nothing and may use the whole total",
        "nothing changed: 3841 pods with addresses, more than the 3840 leaf ids a direction has",
    )


@pytest.mark.parametrize("total", ["0", "7"])
def test_a_total_below_htbs_smallest_rate_shapes_nothing_and_says_so(total: str) -> None:
    plan = node_plan(make_node({"node.koordinator.sh/network-bandwidth": total}), None, [make_pod("a")])
    assert plan.directions == {}
    assert plan.problems == (f"nothing shaped: node n1's total is {total} bits/s, below HTB's smallest rate 8000",)
