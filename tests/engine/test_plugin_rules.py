"""The plugins' edge rules on a cluster small enough to compute by hand."""

from __future__ import annotations

from typing import Any

import numpy as np

from operators.api.config.scheduler import NetworkOverheadArgs, SchedulerConfig
from operators.api.quantity import Quantity
from operators.engine.cluster.bandwidth import Accounting
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.scheduling import network_bandwidth
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.network_overhead import normalize
from operators.engine.scheduling.schedule import PASSED, schedule
from operators.extender.server import extender_scores

ARGS = NetworkOverheadArgs(network_topology_name="nt")


def node(name: str, region: str, zone: str, **annotations: str) -> dict[str, Any]:
    labels = {"topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": zone}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
    }


def pod(name: str, selector: str, on: str | None, phase: str = "Running", **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"appgroup.diktyo.x-k8s.io": "g", "appgroup.diktyo.x-k8s.io.workload": selector},
            "annotations": annotations,
        },
        "spec": {"nodeName": on} if on else {},
        "status": {"phase": phase},
    }


def cluster(*extra: dict[str, Any]) -> ClusterIndex:
    """a (r1/z1), b (r1/z2), c (r2/z3). Costs: z1->z2 10, z2->z1 10; no r2->r1 cost. w0 depends on w1 and w2,
    both with maxNetworkCost 5; w1 runs on a, w2 on b."""
    group = {
        "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
        "kind": "AppGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {
            "numMembers": 3,
            "topologySortingAlgorithm": "KahnSort",
            "workloads": [
                {
                    "workload": {"kind": "D", "name": "w0", "selector": "w0"},
                    "dependencies": [
                        {"workload": {"kind": "D", "name": "w1", "selector": "w1"}, "maxNetworkCost": 5},
                        {"workload": {"kind": "D", "name": "w2", "selector": "w2"}, "maxNetworkCost": 5},
                    ],
                },
                {"workload": {"kind": "D", "name": "w1", "selector": "w1"}},
                {"workload": {"kind": "D", "name": "w2", "selector": "w2"}},
            ],
        },
    }
    costs = [
        {"origin": "z1", "costList": [{"destination": "z2", "networkCost": 10}]},
        {"origin": "z2", "costList": [{"destination": "z1", "networkCost": 10}]},
    ]
    topology = {
        "apiVersion": "networktopology.diktyo.x-k8s.io/v1alpha1",
        "kind": "NetworkTopology",
        "metadata": {"name": "nt", "namespace": "default"},
        "spec": {
            "configmapName": "x",
            "weights": [
                {
                    "name": "UserDefined",
                    "topologyList": [{"topologyKey": "topology.kubernetes.io/zone", "originList": costs}],
                }
            ],
        },
    }
    objects = [node("a", "r1", "z1"), node("b", "r1", "z2"), node("c", "r2", "z3"), group, topology]
    objects += [pod("w1-x", "w1", "a"), pod("w2-x", "w2", "b"), *extra]
    return ClusterIndex.build(build_snapshot(objects))


def test_a_missing_cost_adds_100_and_counts_neither_way() -> None:
    # on c (region r2): both pairs cross regions and r2 -> r1 has no cost: 100 each, neither satisfied nor
    # violated, so c passes; on a: w1 same node 0, w2 zone z1->z2 10 (> 5: violated); on b: the mirror image
    report = schedule(Pod.parse(pod("w0-new", "w0", None)), cluster(), SchedulerConfig(weights={}, overhead=ARGS))
    config = SchedulerConfig(weights={"NetworkOverhead": 1}, overhead=ARGS)
    scored = schedule(Pod.parse(pod("w0-new", "w0", None)), cluster(), config)
    assert scored.raw["c"]["NetworkOverhead"] == 200
    assert scored.raw["a"]["NetworkOverhead"] == 10 and scored.raw["b"]["NetworkOverhead"] == 10
    assert report.filters["c"]["NetworkOverhead"] == PASSED


def test_as_many_violated_as_satisfied_passes() -> None:
    # on a: satisfied 1 (w1, same node), violated 1 (w2, cost 10 > 5): upstream rejects only violated > satisfied
    report = schedule(Pod.parse(pod("w0-new", "w0", None)), cluster(), SchedulerConfig(weights={}, overhead=ARGS))
    assert report.filters["a"]["NetworkOverhead"] == PASSED and report.filters["b"]["NetworkOverhead"] == PASSED


def test_network_overhead_normalisation_truncates() -> None:
    # 100 - int(100 * (2 - 0) / 3) = 100 - 66 = 34 (rounding would give 33)
    assert normalize(np.array([0, 2, 3])).tolist() == [100, 34, 0]


def test_terminated_pods_use_no_bandwidth() -> None:
    done = pod("old", "w9", "a", phase="Succeeded", **{"kubernetes.io/ingress-bandwidth": "900M"})
    running = pod("new", "w9", "b", **{"kubernetes.io/ingress-bandwidth": "900M"})
    index = cluster(done, running)
    assert index.used.get("a", (0, 0)) == (0, 0)
    assert index.used["b"] == (900_000_000, 0)


def test_extender_scores_truncate() -> None:
    # a total of 170 over weights 1+1+1 on the extender's 0..10 scale: 170 * 10 // 300 = 5 (5.67 rounds to 6)
    config = SchedulerConfig(weights={"NetworkOverhead": 1, "NetworkBandwidth": 1, "NodeResourcesAllocatable": 1})
    assert extender_scores({"n": 170, "m": 300}, config) == {"n": 5, "m": 10}


def test_a_pod_asking_no_bandwidth_passes_a_node_whose_usage_is_unknown() -> None:
    # Node a carries a pod whose bandwidth is unreadable: its used bandwidth is unknown. That fails pods that
    # need bandwidth, with the reason, and no pod that asks for none.
    broken = pod("w1-broken", "w1", "a", **{"kubernetes.io/ingress-bandwidth": "lots"})
    index = cluster(broken)
    table = index.table(Quantity.parse("1G"))
    assert "a" in table.usage_problems
    assert network_bandwidth.filter_nodes((0, 0), "", table, Accounting.DUPLEX) == {}
    failed = network_bandwidth.filter_nodes((1_000, 0), "", table, Accounting.DUPLEX)
    assert list(failed) == ["a"] and failed["a"].startswith("used bandwidth unknown: ")


def test_network_bandwidth_messages_by_hand() -> None:
    # 1000 bits/s NIC, 300 in and 600 out used.
    shortfall = network_bandwidth.shortfall
    assert shortfall(Accounting.COMBINED, 1000, 300, 600, (50, 51)) == (
        "insufficient network bandwidth: requested 101 bits/s, free 100"
    )
    # ingress asks exactly what is free (it fits): the message names egress
    assert shortfall(Accounting.DUPLEX, 1000, 300, 600, (700, 401)) == (
        "insufficient egress bandwidth: requested 401 bits/s, free 400"
    )
    assert shortfall(Accounting.DUPLEX, 1000, 1200, 600, (1, 0)) == (
        "insufficient ingress bandwidth: requested 1 bits/s, free 0"
    )
    assert shortfall(Accounting.COMBINED, 1000, 700, 600, (1, 0)) == (
        "insufficient network bandwidth: requested 1 bits/s, free 0"
    )
    assert shortfall(Accounting.DUPLEX, 1000, 300, 600, (700, 400)) is None


def test_passing_over_columns_by_hand() -> None:
    # capacities: unknown (-1), 0, 10; nothing used. Asking nothing passes everywhere, even an unknown NIC;
    # asking 1 bit/s in passes only the 10 bits/s node (the simulator and the rebalancer filter with this).
    capacity, unused = np.array([-1, 0, 10]), np.zeros(3, dtype=np.int64)
    for accounting in Accounting:
        assert network_bandwidth.passing((0, 0), capacity, unused, unused, accounting).tolist() == [True] * 3
        assert network_bandwidth.passing((1, 0), capacity, unused, unused, accounting).tolist() == [False, False, True]
        assert network_bandwidth.passing((0, 1), capacity, unused, unused, accounting).tolist() == [False, False, True]


def test_a_zero_capacity_is_known_and_full() -> None:
    # A node annotated with 0 bits/s has a known capacity with nothing free: the shortfall message, not "unknown".
    zero = node("z", "r1", "z1", **{"node.koordinator.sh/network-bandwidth": "0"})
    table = ClusterIndex.build(build_snapshot([zero])).table(None)
    assert network_bandwidth.filter_nodes((5, 0), "", table, Accounting.DUPLEX) == {
        "z": "insufficient ingress bandwidth: requested 5 bits/s, free 0"
    }
