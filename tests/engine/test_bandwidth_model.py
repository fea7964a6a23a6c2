"""The bandwidth model, rule by rule, with values derived by hand (docs/design/contracts.md)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from operators.api.errors import FieldError
from operators.api.quantity import Quantity
from operators.engine.cluster.bandwidth import Accounting, headroom_score, node_capacity, pod_demand, slo_network_totals
from operators.engine.cluster.objects import Node
from operators.engine.cluster.snapshot import build_snapshot

QOS = "koordinator.sh/networkQOS"


@pytest.mark.parametrize(
    ("annotations", "demand"),
    [
        ({}, (0, 0)),
        ({"kubernetes.io/ingress-request": "10M", "kubernetes.io/ingress-bandwidth": "50M"}, (10_000_000, 0)),
        ({"kubernetes.io/egress-bandwidth": "50M"}, (0, 50_000_000)),  # no request: the limit
        (
            {QOS: json.dumps({"ingressRequest": "1M", "ingressLimit": "9M", "egressLimit": "2M"})},
            (1_000_000, 2_000_000),
        ),
        # the pod's own annotation wins over networkQOS, per direction
        ({"kubernetes.io/ingress-bandwidth": "5M", QOS: json.dumps({"ingressRequest": "1M"})}, (5_000_000, 0)),
        ({"kubernetes.io/ingress-request": "1Ki"}, (1024, 0)),
    ],
)
def test_pod_demand_precedence(annotations: dict[str, str], demand: tuple[int, int]) -> None:
    assert pod_demand(annotations) == demand


@pytest.mark.parametrize(
    ("annotations", "path"),
    [
        ({"kubernetes.io/ingress-request": "lots"}, "metadata.annotations[kubernetes.io/ingress-request]"),
        ({"kubernetes.io/egress-bandwidth": "-1M"}, "metadata.annotations[kubernetes.io/egress-bandwidth]"),
        ({QOS: "{"}, f"metadata.annotations[{QOS}]"),
        ({QOS: json.dumps({"egressLimit": "2P"})}, f"metadata.annotations[{QOS}].egressLimit"),
    ],
)
def test_an_unreadable_demand_is_an_error_never_zero(annotations: dict[str, str], path: str) -> None:
    with pytest.raises(FieldError) as raised:
        pod_demand(annotations)
    assert raised.value.path == path


def node(**annotations: str) -> Node:
    return Node.parse({"metadata": {"name": "n", "annotations": annotations}})


def test_node_capacity_sources_in_order() -> None:
    both = node(**{"node.koordinator.sh/network-bandwidth": "2G", "node.kubernetes.io/network-limit": "1G"})
    found = node_capacity(both, Quantity.parse("5G"), Quantity.parse("9G"))
    assert found is not None and (found.bits, found.source) == (2 * 10**9, "node.koordinator.sh/network-bandwidth")
    thesis = node_capacity(node(**{"node.kubernetes.io/network-limit": "1Gi"}), None, None)
    assert thesis is not None and (thesis.bits, thesis.source) == (2**30, "node.kubernetes.io/network-limit")
    from_slo = node_capacity(node(), Quantity.parse("5G"), Quantity.parse("9G"))
    assert from_slo is not None and (from_slo.bits, from_slo.source) == (5 * 10**9, "system-config")
    zero_slo = node_capacity(node(), Quantity.parse("0"), Quantity.parse("9G"))  # a zero total is not a total
    assert zero_slo is not None and (zero_slo.bits, zero_slo.source) == (9 * 10**9, "default")
    assert node_capacity(node(), None, None) is None
    with pytest.raises(FieldError, match=r"network-bandwidth\]: out of range"):
        node_capacity(node(**{"node.koordinator.sh/network-bandwidth": "1e30"}), None, Quantity.parse("9G"))


def test_accounting_by_hand() -> None:
    # 1G capacity, 300M in and 600M out used; asking 400M in and 300M out
    capacity, used_in, used_out = 1000, 300, 600
    assert Accounting.DUPLEX.total(capacity) == 2000 and Accounting.COMBINED.total(capacity) == 1000
    assert Accounting.DUPLEX.fits(capacity, used_in, used_out, 700, 400)  # exactly what is free each way
    assert not Accounting.DUPLEX.fits(capacity, used_in, used_out, 701, 0)  # in: 701 > 700
    assert not Accounting.DUPLEX.fits(capacity, used_in, used_out, 400, 401)  # out: 401 > 400 (not 700 free in)
    assert Accounting.DUPLEX.fits(capacity, used_in, 1200, 100, 0)  # out asks nothing: out overcommit ignored
    assert Accounting.DUPLEX.fits(capacity, 1200, used_out, 0, 100)  # and the mirror: in asks nothing
    assert not Accounting.DUPLEX.fits(capacity, 1200, used_out, 1, 100)  # in asks 1 bit/s of an overcommitted NIC
    assert not Accounting.COMBINED.fits(capacity, used_in, used_out, 50, 51)  # 101 > 100 left
    assert Accounting.COMBINED.fits(capacity, used_in, used_out, 50, 50)  # 100 <= 100
    assert not Accounting.COMBINED.fits(capacity, used_in, used_out, 101, 0)  # ingress alone too
    assert Accounting.COMBINED.fits(capacity, 900, 900, 0, 0)  # nothing asked fits anywhere
    assert Accounting.COMBINED.overcommit(capacity, 700, 400) == 100
    assert Accounting.DUPLEX.overcommit(capacity, 700, 1100) == 100
    arrays = Accounting.COMBINED.fits(np.array([1000, 1000]), np.array([0, 900]), np.array([0, 0]), 60, 50)
    assert arrays.tolist() == [True, False]


def test_headroom_score_by_hand() -> None:
    # (total - after) * 100 // total, floored at 0, 0 for an unknown capacity
    assert headroom_score(np.array([1000, 1000, 2000, -1]), np.array([250, 1200, 500, 0])).tolist() == [75, 0, 75, 0]
    assert headroom_score(np.array([3]), np.array([1])).tolist() == [66]  # truncates
    # the smallest capacity still scores; an overcommitted small node is floored at 0, not at 1 x 100 // 50 = 2
    assert headroom_score(np.array([1, 1, 50]), np.array([0, 1, 80])).tolist() == [100, 0, 0]


def test_headroom_score_never_divides_by_a_zero_capacity() -> None:
    # A node with capacity 0 scores 0, and computing it divides nothing by zero (numpy would warn, then mask it).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert headroom_score(np.array([0, 100]), np.array([0, 50])).tolist() == [0, 50]


def test_slo_network_totals_skip_nodeslos_without_a_system_strategy() -> None:
    def slo(name: str, spec: dict[str, object]) -> dict[str, object]:
        return {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeSLO",
            "metadata": {"name": name},
            "spec": spec,
        }

    snapshot = build_snapshot(
        [
            slo("no-strategy", {}),
            slo("no-total", {"systemStrategy": {"memoryEvictThresholdPercent": 70}}),
            slo("with-total", {"systemStrategy": {"totalNetworkBandwidth": "10G"}}),
        ]
    )
    assert {name: total.value() for name, total in slo_network_totals(snapshot).items()} == {
        "with-total": 10_000_000_000
    }
