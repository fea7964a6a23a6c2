"""Scheduling plugins: the seeds' NetworkOverhead example by hand, the thesis' bandwidth arithmetic."""

from __future__ import annotations

import copy
import pathlib
import random
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.api.config.scheduler import NetworkOverheadArgs, SchedulerConfig, parse_config
from operators.api.errors import FieldError
from operators.engine.cluster.objects import Node, Pod
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.network_overhead import normalize as normalize_overhead
from operators.engine.scheduling.network_overhead import overhead_reason
from operators.engine.scheduling.network_overhead import prefilter as network_overhead
from operators.engine.scheduling.schedule import schedule
from tests.support.clusters import random_cluster

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "hack" / "examples"
NODES = [f"n-{i}" for i in range(1, 9)]
ARGS = NetworkOverheadArgs(network_topology_name="net-topology-test")


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def seeds_index(appgroup: dict[str, Any] | None = None, with_topology: bool = True) -> ClusterIndex:
    objects = [*docs("cluster.yaml"), *docs("pods.yaml"), appgroup or docs("appgroup-a1.yaml")[0]]
    if with_topology:
        objects.append(docs("networktopology.yaml")[0])
    return ClusterIndex.build(build_snapshot(objects))


def pending(selector: str, annotations: dict[str, str] | None = None) -> Pod:
    return Pod.parse(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{selector}-new",
                "namespace": "default",
                "annotations": annotations or {},
                "labels": {"appgroup.diktyo.x-k8s.io": "a1", "appgroup.diktyo.x-k8s.io.workload": selector},
            },
        }
    )


# P2 runs on N1 (Z1, us-west-1), P3 on N4 (Z2, us-west-1). Costs: region 20, Z1-Z2 5, Z3-Z4 10.
# P1 depends on P2 (maxNetworkCost 30): N1 same node 0, N2 same zone 1, N3/N4 zone Z2->Z1 5,
# N5-N8 region us-east-1 -> us-west-1 20; all within 30, so every node passes.
# P2 depends on P3 (maxNetworkCost 20): N4 same node 0, N3 same zone 1, N1/N2 zone 5, N5-N8 region 20 (<= 20).
SEEDS = {
    "p1": ([0, 1, 5, 5, 20, 20, 20, 20], [100, 95, 75, 75, 0, 0, 0, 0]),
    "p2": ([5, 5, 1, 0, 20, 20, 20, 20], [75, 75, 95, 100, 0, 0, 0, 0]),
}


@pytest.mark.parametrize("selector", sorted(SEEDS))
def test_seeds_network_overhead_by_hand(selector: str) -> None:
    raw, normalized = SEEDS[selector]
    index = seeds_index()
    result = network_overhead(pending(selector).labels, index, ARGS)
    satisfied, violated, costs = result.totals(index.table(None))
    assert costs.tolist() == raw
    assert satisfied.tolist() == [1] * 8 and violated.tolist() == [0] * 8
    assert normalize_overhead(np.array(raw)).tolist() == normalized
    report = schedule(pending(selector), seeds_index(), SchedulerConfig(weights={"NetworkOverhead": 1}, overhead=ARGS))
    assert all(report.filters[node]["NetworkOverhead"] == "passed" for node in NODES)
    assert [report.normalized[node]["NetworkOverhead"] for node in NODES] == normalized
    assert report.selected == ("n-1" if selector == "p1" else "n-4")


def test_max_network_cost_zero_rejects_with_upstreams_message() -> None:
    appgroup = docs("appgroup-a1.yaml")[0]
    appgroup["spec"]["workloads"][0]["dependencies"][0]["maxNetworkCost"] = 0
    report = schedule(pending("p1"), seeds_index(appgroup), SchedulerConfig(overhead=ARGS))
    filters = {node: report.filters[node]["NetworkOverhead"] for node in NODES}
    assert filters["n-1"] == filters["n-2"] == "passed"
    assert filters["n-3"] == (
        "Node n-3 does not meet several network requirements from Workload dependencies: Satisfied: 0 Violated: 1"
    )
    assert all(filters[node] != "passed" for node in NODES[2:])
    assert set(report.total) == {"n-1", "n-2"}


def test_pods_without_appgroup_or_placed_dependencies_score_equally() -> None:
    plain = Pod.parse({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "default"}})
    assert network_overhead(plain.labels, seeds_index(), ARGS).score_equally
    assert network_overhead(pending("p3").labels, seeds_index(), ARGS).score_equally  # p3 has no dependencies


def test_missing_appgroup_or_topology_is_a_reason_not_a_crash() -> None:
    report = schedule(pending("p1"), seeds_index(with_topology=False), SchedulerConfig(overhead=ARGS))
    assert (
        report.filters["n-1"]["NetworkOverhead"] == "NetworkTopology net-topology-test not found in namespaces default"
    )
    assert report.selected is None
    other = Pod.parse(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "x",
                "namespace": "default",
                "labels": {"appgroup.diktyo.x-k8s.io": "nope", "appgroup.diktyo.x-k8s.io.workload": "p1"},
            },
        }
    )
    report = schedule(other, seeds_index(), SchedulerConfig(overhead=ARGS))
    assert report.filters["n-1"]["NetworkOverhead"] == "AppGroup nope not found in namespaces default"


def test_normalize_overhead_edge_cases() -> None:
    assert normalize_overhead(np.array([0, 0])).tolist() == [0, 0]  # all zero stays 0
    assert normalize_overhead(np.array([7, 7])).tolist() == [100, 100]  # all equal non-zero: 100
    assert normalize_overhead(np.array([0, 3, 6])).tolist() == [100, 50, 0]


def bandwidth_node(capacity: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "big", "annotations": {"node.kubernetes.io/network-limit": capacity}},
        "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"}},
    }


@pytest.mark.parametrize(("mode", "fits"), [("combined", 5), ("duplex", 10)])
def test_thesis_bandwidth_arithmetic(mode: str, fits: int) -> None:
    config = parse_config(
        {**KSC, "profiles": [{"pluginConfig": [{"name": "NetworkBandwidth", "args": {"accountingMode": mode}}]}]}
    )
    placed: list[dict[str, Any]] = []
    while True:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"p{len(placed)}",
                "namespace": "default",
                "annotations": {"kubernetes.io/ingress-bandwidth": "100M", "kubernetes.io/egress-bandwidth": "100M"},
            },
        }
        index = ClusterIndex.build(build_snapshot([bandwidth_node("1Gi"), *placed]))
        report = schedule(Pod.parse(copy.deepcopy(pod)), index, config)
        if report.selected is None:
            assert "insufficient" in report.filters["big"]["NetworkBandwidth"]
            break
        pod["spec"] = {"nodeName": report.selected}
        placed.append(pod)
    assert len(placed) == fits


def test_allocatable_least_prefers_the_smaller_node() -> None:
    small = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "small"},
        "status": {"allocatable": {"cpu": "10", "memory": "10Gi"}},
    }
    large = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "large"},
        "status": {"allocatable": {"cpu": "200", "memory": "200Gi"}},
    }
    pod = Pod.parse({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "default"}})
    index = ClusterIndex.build(build_snapshot([small, large]))
    least = schedule(
        pod,
        index,
        parse_config(
            {**KSC, "profiles": [{"pluginConfig": [{"name": "NodeResourcesAllocatable", "args": {"mode": "Least"}}]}]}
        ),
    )
    most = schedule(
        pod,
        index,
        parse_config(
            {**KSC, "profiles": [{"pluginConfig": [{"name": "NodeResourcesAllocatable", "args": {"mode": "Most"}}]}]}
        ),
    )
    assert least.selected == "small" and most.selected == "large"
    assert least.normalized["small"]["NodeResourcesAllocatable"] == 100


KSC = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy"}, "apiVersion: Input should be"),
        ({**KSC, "kind": "Pod"}, "kind: Input should be 'KubeSchedulerConfiguration'"),
        ({**KSC, "profile": []}, "profile: Extra inputs are not permitted"),
        ({**KSC, "profiles": {"plugins": {}}}, "profiles: Input should be a valid list"),
        (
            {**KSC, "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "NetworkOverhead", "weight": 0}]}}}]},
            "profiles[0].plugins.multiPoint.enabled[0].weight: Input should be greater than or equal to 1",
        ),
        (
            {**KSC, "profiles": [{"plugins": {"score": {"enabled": [{"name": "NetworkBandwidth", "weight": -3}]}}}]},
            "profiles[0].plugins.score.enabled[0].weight",
        ),
        (
            {**KSC, "profiles": [{"pluginConfig": [{"name": "NetworkOverhead", "args": {"weightName": "x"}}]}]},
            "profiles[0].pluginConfig[0].args.weightName: Extra inputs are not permitted",
        ),
        (
            {
                **KSC,
                "profiles": [{"pluginConfig": [{"name": "NetworkBandwidth", "args": {"defaultNodeBandwidth": "-1G"}}]}],
            },
            "profiles[0].pluginConfig[0].args.defaultNodeBandwidth: negative bandwidth",
        ),
        (
            {
                **KSC,
                "profiles": [
                    {
                        "pluginConfig": [
                            {"name": "NodeResourcesAllocatable", "args": {"resources": [{"name": "cpu", "weight": 0}]}}
                        ]
                    }
                ],
            },
            "profiles[0].pluginConfig[0].args.resources[0].weight: Input should be greater than or equal to 1",
        ),
        (
            {**KSC, "profiles": [{"pluginConfig": {"name": "NetworkOverhead"}}]},
            "profiles[0].pluginConfig: Input should be a valid list",
        ),
    ],
)
def test_config_is_validated_whole_at_load(document: dict[str, Any], message: str) -> None:
    with pytest.raises(FieldError) as raised:
        parse_config(document)
    assert message in str(raised.value)


def test_kube_schedulers_own_settings_are_accepted() -> None:
    config = parse_config({**KSC, "extenders": [{"urlPrefix": "https://x"}], "parallelism": 16, "profiles": []})
    assert config.weights == {"NetworkOverhead": 1, "NetworkBandwidth": 1, "NodeResourcesAllocatable": 1}


def test_config_file_weights_and_errors() -> None:
    config = parse_config(yaml.safe_load((ROOT / "hack" / "configs" / "scheduler-config.yaml").read_text()))
    assert config.weights == {"NetworkOverhead": 5, "NetworkBandwidth": 2, "NodeResourcesAllocatable": 1}
    assert config.overhead.network_topology_name == "net-topology-test"
    with pytest.raises(ValueError, match="accountingMode"):
        parse_config(
            {**KSC, "profiles": [{"pluginConfig": [{"name": "NetworkBandwidth", "args": {"accountingMode": "x"}}]}]}
        )


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_array_path_agrees_with_the_per_node_path(seed: int) -> None:
    """The numpy path (the snapshot's own nodes) and the per-node path (nodes sent as objects) give the same
    reasons and totals, including the per-(satisfied, violated) message tables reused across pods."""
    rng = random.Random(seed)
    objects = random_cluster(rng)
    index = ClusterIndex.build(build_snapshot(objects))
    sent = tuple(Node.parse(copy.deepcopy(o)) for o in objects if o["kind"] == "Node")
    config = SchedulerConfig(weights={"NetworkOverhead": 1}, overhead=ARGS)
    for group in range(3):
        pod = Pod.parse(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"new-{group}",
                    "namespace": "default",
                    "labels": {"appgroup.diktyo.x-k8s.io": f"g{group}", "appgroup.diktyo.x-k8s.io.workload": "w0"},
                },
            }
        )
        arrays = schedule(pod, index, config, detail=False)
        per_node = schedule(pod, index, config, index.table_of(sent, None), detail=False)
        assert arrays.failed == per_node.failed
        assert arrays.total == per_node.total
        for node, reason in arrays.failed.items():
            result = network_overhead(pod.labels, index, ARGS)
            good, bad, _ = result.totals(index.table(None).rows(index.rows_of([node])))
            assert reason == overhead_reason(node, int(good[0]), int(bad[0]))


def placed(name: str, node: str, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"nodeName": node},
        "status": {"phase": "Running"},
    }


@pytest.mark.parametrize("fast", [True, False], ids=["snapshot table", "table of sent objects"])
def test_an_unusable_value_is_a_reason_on_its_own_object(fast: bool) -> None:
    """A node with 1e308, a placed pod with 1e30 (legal quantities, not bandwidths) and a healthy node: the
    first two fail with the annotation named, the healthy node passes and is selected; nothing raises."""
    huge = bandwidth_node("1e308")
    huge["metadata"]["name"] = "huge"
    dirty = bandwidth_node("1G")
    dirty["metadata"]["name"] = "dirty"
    clean = bandwidth_node("1G")
    clean["metadata"]["name"] = "clean"
    snapshot = build_snapshot(
        [huge, dirty, clean, placed("bad", "dirty", **{"kubernetes.io/ingress-bandwidth": "1e30"})]
    )
    index = ClusterIndex.build(snapshot)
    sent = tuple(Node.parse(copy.deepcopy(dict(node.raw))) for node in index.nodes)
    nodes = index.table(None) if fast else index.table_of(sent, None)
    pod = Pod.parse(placed("new", "", **{"kubernetes.io/ingress-bandwidth": "10M"}))
    config = parse_config(
        {**KSC, "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "NetworkBandwidth"}]}}}]}
    )
    report = schedule(pod, index, config, nodes)
    reasons = {name: verdict["NetworkBandwidth"] for name, verdict in report.filters.items()}
    assert reasons["clean"] == "passed"
    assert "metadata.annotations[node.kubernetes.io/network-limit]: out of range" in reasons["huge"]
    assert "pod default/bad on node dirty" in reasons["dirty"] and "out of range" in reasons["dirty"]
    assert report.selected == "clean"
    bad_pod = Pod.parse(placed("worse", "", **{"kubernetes.io/egress-request": "-5G"}))
    worse = schedule(bad_pod, index, config, nodes)
    assert worse.selected is None
    assert all(
        "metadata.annotations[kubernetes.io/egress-request]: negative" in v["NetworkBandwidth"]
        for v in worse.filters.values()
    )


def test_plugin_weights_are_any_positive_int32_as_kube_scheduler_takes_them() -> None:
    """Upstream's integration configuration weighs NodeResourcesAllocatable 50000; an int32 is the API's type."""
    enabled = [{"name": "NodeResourcesAllocatable", "weight": 50000}, {"name": "NetworkBandwidth", "weight": 2**31 - 1}]
    config = parse_config({**KSC, "profiles": [{"plugins": {"score": {"enabled": enabled}}}]})
    assert config.weights == {"NodeResourcesAllocatable": 50000, "NetworkBandwidth": 2**31 - 1}
    too_big = [{"name": "NetworkBandwidth", "weight": 2**31}]
    with pytest.raises(FieldError, match="weight: Input should be less than or equal to 2147483647"):
        parse_config({**KSC, "profiles": [{"plugins": {"score": {"enabled": too_big}}}]})
