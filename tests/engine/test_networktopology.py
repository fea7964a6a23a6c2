"""NetworkTopology engine: netperf ingestion, median costs, weights, bandwidth, status."""

from __future__ import annotations

import datetime
import pathlib
import random
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.api.networktopology import NetworkTopology
from operators.api.quantity import Quantity
from operators.engine.cluster.objects import ConfigMap, Node
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.status.netperf import read_measurements
from operators.engine.status.networktopology import aggregate_costs, allocated_bandwidth, median, networktopology_result
from operators.sources.cache import ClusterCache
from operators.sources.kinds import PODS
from tests.support.netperf import KEY, seeds_matrix

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "hack" / "examples"
NOW = datetime.datetime(2026, 11, 22, 12, tzinfo=datetime.UTC)
REGION, ZONE = "topology.kubernetes.io/region", "topology.kubernetes.io/zone"


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def configmap(
    data: dict[str, str], name: str = "netperf-metrics", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "data": data,
    }


def result_for(*extra: dict[str, Any], topology: dict[str, Any] | None = None) -> NetworkTopology:
    snapshot = build_snapshot([*docs("cluster.yaml"), *extra, topology or docs("networktopology.yaml")[0]])
    return networktopology_result(snapshot.network_topologies[0], snapshot, NOW).topology


def netperf_costs(topology: NetworkTopology) -> dict[tuple[str, str, str], int]:
    weight = next(w for w in topology.spec.weights if w.name == "NetperfCosts")
    return {
        (t.topology_key, o.origin, c.destination): c.network_cost
        for t in weight.topology_list
        for o in t.origin_list
        for c in o.cost_list or ()
    }


def test_seeds_example_costs_derived_by_hand() -> None:
    topology = result_for(configmap(seeds_matrix()))
    assert netperf_costs(topology) == {
        (ZONE, "Z1", "Z2"): 6,  # samples 4, 6, 5, 7: median (5 + 6) / 2 rounded half up
        (ZONE, "Z2", "Z1"): 5,
        (ZONE, "Z3", "Z4"): 10,
        (ZONE, "Z4", "Z3"): 10,
        (REGION, "us-west-1", "us-east-1"): 20,  # fifteen 20s and one 100: the outlier does not move it
        (REGION, "us-east-1", "us-west-1"): 30,
    }
    user_defined = docs("networktopology.yaml")[0]["spec"]["weights"][0]
    assert topology.to_wire()["spec"]["weights"][0] == user_defined  # untouched
    status = topology.status
    assert status is not None and status.node_count == 8 and status.missing_costs is None
    assert status.netperf is not None and status.netperf.measurements == 56 and status.netperf.skipped == 0
    assert status.conditions is not None and status.conditions[0].reason == "CostsComputed"
    assert status.weight_calculation_time == NOW


def test_weights_layout_and_capacities() -> None:
    wire = result_for(configmap(seeds_matrix())).to_wire()["spec"]["weights"][1]
    assert wire["name"] == "NetperfCosts"
    assert [t["topologyKey"] for t in wire["topologyList"]] == [REGION, ZONE]
    zones = wire["topologyList"][1]["originList"]
    assert [o["origin"] for o in zones] == ["Z1", "Z2", "Z3", "Z4"]
    assert zones[0]["costList"][0] == {
        "destination": "Z2",
        "networkCost": 6,
        "bandwidthCapacity": "1Gi",
        "bandwidthAllocated": "0",
    }
    topology = docs("networktopology.yaml")[0]
    topology["spec"]["weights"][0]["topologyList"] = topology["spec"]["weights"][0]["topologyList"][:1]  # no zones
    wire = result_for(configmap(seeds_matrix()), topology=topology).to_wire()["spec"]["weights"][1]
    assert wire["topologyList"][1]["originList"][0]["costList"][0]["bandwidthCapacity"] == "1G"  # the default


def test_median() -> None:
    assert median([3]) == 3
    assert median([1, 2]) == 2  # 1.5 rounds half up
    assert median([5, 1, 3]) == 3
    assert median([4, 7, 5, 6]) == 6


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (KEY.format("n-1", "n-3"), "abc", "is not a whole number of milliseconds"),
        (KEY.format("n-1", "n-3"), "-5", "is not a whole number of milliseconds"),
        (KEY.format("n-1", "n-3"), "1.5", "is not a whole number of milliseconds"),
        (KEY.format("n-1", "n-3"), "", "is not a whole number of milliseconds"),
        (KEY.format("n-1", "n-99"), "5", "unknown node n-99"),
        (KEY.format("n-1", "n-1"), "5", "self-pair n-1"),
        ("netperf.p90.latency.milliseconds.origin.n-1", "5", "malformed key"),
        ("netperf.p90.latency.milliseconds.origin-zone.Z1.destination-zone.Z9", "5", "unknown zone Z9"),
        ("netperf_p90_latency_microseconds.origin.n-1.destination.n-3", "5000", "not a netperf key"),
    ],
)
def test_malformed_entries_are_skipped_and_reported_never_zero(key: str, value: str, reason: str) -> None:
    data = {KEY.format("n-1", "n-3"): "7", KEY.format("n-3", "n-1"): "7"}
    data[key] = value
    topology = result_for(configmap(data))
    status = topology.status
    assert status is not None and status.netperf is not None
    assert status.netperf.skipped == 1
    assert status.netperf.skipped_entries is not None and reason in status.netperf.skipped_entries[0]
    assert key in status.netperf.skipped_entries[0]
    costs = netperf_costs(topology)
    if key == KEY.format("n-1", "n-3"):
        assert (ZONE, "Z1", "Z2") not in costs  # the bad value is not read as 0
    else:
        assert costs[(ZONE, "Z1", "Z2")] == 7


def test_pairs_without_measurements_are_missing_not_zero() -> None:
    topology = result_for(configmap({KEY.format("n-1", "n-3"): "7"}))
    assert netperf_costs(topology) == {(ZONE, "Z1", "Z2"): 7}
    status = topology.status
    assert status is not None and status.missing_costs is not None
    missing = {(m.topology_key, m.origin, m.destination) for m in status.missing_costs}
    assert (ZONE, "Z2", "Z1") in missing and (REGION, "us-west-1", "us-east-1") in missing
    assert len(missing) == 5


def test_zone_level_keys_and_several_configmaps() -> None:
    zone_key = "netperf.p90.latency.milliseconds.origin-zone.{}.destination-zone.{}"
    main = configmap({zone_key.format("Z1", "Z2"): "3", zone_key.format("Z1", "Z3"): "40"})
    extra = configmap(
        {zone_key.format("Z2", "Z1"): "4", KEY.format("n-1", "n-3"): "9"},
        name="netperf-2",
        labels={"networktopology.diktyo.x-k8s.io/netperf": "net-topology-test"},
    )
    unrelated = configmap(
        {zone_key.format("Z3", "Z4"): "1"},
        name="other",
        labels={"networktopology.diktyo.x-k8s.io/netperf": "another-topology"},
    )
    topology = result_for(main, extra, unrelated)
    assert netperf_costs(topology) == {
        (ZONE, "Z1", "Z2"): 6,  # zone sample 3 and node sample 9
        (ZONE, "Z2", "Z1"): 4,
        (REGION, "us-west-1", "us-east-1"): 40,  # a zone-level key across regions is a region sample
    }
    assert topology.status is not None and topology.status.netperf is not None
    assert topology.status.netperf.config_maps == ["netperf-metrics", "netperf-2"]


def test_missing_configmap_keeps_the_weights() -> None:
    before = docs("networktopology.yaml")[0]
    computed = result_for(configmap(seeds_matrix())).to_wire()
    computed["metadata"]["generation"] = 3
    topology = result_for(topology=computed)  # no ConfigMap in this snapshot
    assert topology.to_wire()["spec"] == computed["spec"]
    status = topology.status
    assert status is not None and status.conditions is not None
    assert (status.conditions[0].status, status.conditions[0].reason) == ("False", "ConfigMapNotFound")
    assert "default/netperf-metrics" in status.conditions[0].message
    assert status.weight_calculation_time == NOW  # from the earlier computation, unchanged
    assert before["spec"]["weights"][0] == topology.to_wire()["spec"]["weights"][0]


def test_weight_calculation_time_moves_only_when_weights_change() -> None:
    first = result_for(configmap(seeds_matrix())).to_wire()
    later = NOW + datetime.timedelta(minutes=10)
    snapshot = build_snapshot([*docs("cluster.yaml"), configmap(seeds_matrix()), first])
    again = networktopology_result(snapshot.network_topologies[0], snapshot, later).topology
    assert again.status is not None and again.status.weight_calculation_time == NOW
    changed = seeds_matrix() | {KEY.format("n-2", "n-1"): "1", KEY.format("n-3", "n-1"): "50"}
    changed[KEY.format("n-3", "n-2")] = "50"
    snapshot = build_snapshot([*docs("cluster.yaml"), configmap(changed), first])
    moved = networktopology_result(snapshot.network_topologies[0], snapshot, later).topology
    assert moved.status is not None and moved.status.weight_calculation_time == later


def thirteen_nodes(rng: random.Random) -> tuple[list[Node], dict[tuple[str, str], int]]:
    layout = [
        ("r1", "a"),
        ("r1", "a"),
        ("r1", "b"),
        ("r1", "b"),
        ("r1", "c"),
        ("r2", "d"),
        ("r2", "d"),
        ("r2", "e"),
        ("r2", "e"),
        ("r3", "f"),
        ("r3", "f"),
        ("r3", "g"),
        ("r3", "g"),
    ]
    nodes = [
        Node.parse({"metadata": {"name": f"node-{i}", "labels": {REGION: region, ZONE: zone}}})
        for i, (region, zone) in enumerate(layout)
    ]
    matrix = {(a.name, b.name): rng.randrange(1, 60) for a in nodes for b in nodes if a is not b}
    return nodes, matrix


@settings(max_examples=25, deadline=None)
@given(st.randoms(use_true_random=False), st.randoms(use_true_random=False))
def test_costs_do_not_depend_on_node_order(values: random.Random, shuffler: random.Random) -> None:
    nodes, matrix = thirteen_nodes(values)
    reference = aggregate_costs(
        nodes,
        read_measurements(
            [ConfigMap.parse(configmap({KEY.format(a, b): str(v) for (a, b), v in matrix.items()}))],
            {n.name: (n.region, n.zone) for n in nodes},
            {n.zone for n in nodes},
        ),
    ).costs
    shuffled_nodes = nodes[:]
    shuffler.shuffle(shuffled_nodes)
    items = list(matrix.items())
    shuffler.shuffle(items)
    measurements = read_measurements(
        [ConfigMap.parse(configmap({KEY.format(a, b): str(v) for (a, b), v in items}))],
        {n.name: (n.region, n.zone) for n in shuffled_nodes},
        {n.zone for n in shuffled_nodes},
    )
    assert aggregate_costs(shuffled_nodes, measurements).costs == reference
    assert len(reference) == 6 + 6 + 2 + 2  # 3*2 region pairs; zone pairs: r1 a,b,c (6), r2 d,e (2), r3 f,g (2)


# --- bandwidthAllocated -------------------------------------------------------------------------


def a1_snapshot_objects() -> list[dict[str, Any]]:
    return [*docs("cluster.yaml"), *docs("appgroup-a1.yaml")]


def pod(uid: str, selector: str, node: str | None, phase: str = "Running") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"pod-{uid}",
            "namespace": "default",
            "uid": uid,
            "labels": {"appgroup.diktyo.x-k8s.io": "a1", "appgroup.diktyo.x-k8s.io.workload": selector},
        },
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase},
    }


def allocated_from_scratch(pods: list[dict[str, Any]]) -> dict[tuple[str, str, str], Quantity]:
    snapshot = build_snapshot([*a1_snapshot_objects(), *pods])
    return allocated_bandwidth(snapshot.app_groups, snapshot.pods, snapshot.nodes)


def test_allocation_rule_by_hand() -> None:
    pods = [
        pod("1", "p1", "n-1"),
        pod("2", "p2", "n-3"),
        pod("3", "p2", "n-4"),
        pod("4", "p3", "n-5"),
        pod("5", "p3", "n-3"),
    ]
    allocated = allocated_from_scratch(pods)
    assert allocated == {
        (ZONE, "Z1", "Z2"): Quantity.parse("100Mi"),  # p1 -> p2 (two replicas in Z2: one pair, counted once)
        (REGION, "us-west-1", "us-east-1"): Quantity.parse("500Mi"),  # each p2 pod -> p3 in us-east-1
    }  # p2 (n-3) -> p3 (n-3) is the same node; p2 (n-4) -> p3 (n-3) is the same zone: nothing


def test_repeated_updates_do_not_over_count() -> None:
    cache = ClusterCache((PODS,))
    for event in (pod("1", "p1", "n-1"), pod("2", "p2", "n-3")):
        cache.apply(PODS, "ADDED", event)
    for _ in range(5):
        cache.apply(PODS, "MODIFIED", pod("1", "p1", "n-1"))
    snapshot = build_snapshot(a1_snapshot_objects())
    assert allocated_bandwidth(snapshot.app_groups, cache.snapshot().pods, snapshot.nodes) == {
        (ZONE, "Z1", "Z2"): Quantity.parse("100Mi")
    }
    cache.apply(PODS, "DELETED", pod("2", "p2", "n-3"))
    assert allocated_bandwidth(snapshot.app_groups, cache.snapshot().pods, snapshot.nodes) == {}
