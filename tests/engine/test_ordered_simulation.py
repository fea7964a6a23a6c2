"""AppGroup scenarios of ``netaware simulate``: network cost per dependency edge, with and without ordering."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.engine.simulation import ordered

CLUSTER = ordered.zoned_cluster()  # 2 regions x 2 zones x 4 nodes; zone pairs 5, region pairs 20


def test_edge_costs_by_hand() -> None:
    scenario = ordered.app_scenario("pair", {"a": ["b"], "b": []}, 2, CLUSTER)
    placement: dict[str, str | None] = {
        "a-0": "region-1-z1-n1",
        "a-1": "region-2-z1-n1",
        "b-0": "region-1-z1-n1",  # a-0: same node 0; a-1: other region 20
        "b-1": "region-1-z2-n1",  # a-0: other zone of its region 5; a-1: other region 20
    }
    costs = ordered.edge_costs(scenario, placement)
    assert (costs.pairs, costs.mean, costs.p90, costs.within, costs.unscheduled) == (4, 11.25, 20.0, 0.5, 0)
    same_zone = {**placement, "a-1": "region-1-z1-n2", "b-1": None}  # a-0/b-0 same node 0, a-1/b-0 same zone 1
    costs = ordered.edge_costs(scenario, same_zone)
    assert (costs.pairs, costs.mean, costs.within, costs.unscheduled) == (2, 0.5, 1.0, 1)


def test_pods_carry_the_webhooks_bandwidth_requests() -> None:
    scenario = ordered.app_scenario("pair", {"a": ["b"], "b": []}, 1, CLUSTER)
    by_name = {pod.name: pod.annotations for pod in scenario.pods}
    assert by_name["a-0"]["kubernetes.io/egress-request"] == "50M"  # a -> b, minBandwidth 50M
    assert by_name["b-0"]["kubernetes.io/ingress-request"] == "50M"


def test_gates_place_every_dependent_near_what_it_depends_on() -> None:
    # A chain: each workload is placed once the one it depends on is; NetworkOverhead keeps every pair in the
    # dependency's zone (cost 0 or 1).
    scenario = ordered.app_scenario("chain", {"a": ["b"], "b": ["c"], "c": ["d"], "d": []}, 2, CLUSTER)
    results = ordered.compare(scenario, seeds=3)
    assert results["gates"]["withinMaxNetworkCost"] == 1.0
    assert results["gates"]["p90Cost"] <= 1.0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    workloads=st.integers(2, 7),
    probability=st.sampled_from([0.2, 0.4, 0.6]),
    replicas=st.integers(1, 3),
    seed=st.integers(0, 10_000),
)
def test_ordering_is_never_worse_than_random_arrival(
    workloads: int, probability: float, replicas: int, seed: int
) -> None:
    """Over random DAGs: released by the gates, no fewer dependency pairs are within their maxNetworkCost than
    in random arrival order, and the mean cost per pair is at most the same-zone cost (1) higher — a pod placed
    beside its dependency in its zone rather than on its node, where NetworkBandwidth's headroom score outweighs
    NetworkOverhead's 0-versus-1 (both within any maxNetworkCost)."""
    graph = ordered.random_dag(workloads, probability, random.Random(seed))
    scenario = ordered.app_scenario("dag", graph, replicas, CLUSTER)
    results = ordered.compare(scenario, seeds=3, seed=seed)
    assert results["gates"]["withinMaxNetworkCost"] >= results["arrival"]["withinMaxNetworkCost"], results
    assert results["gates"]["meanCost"] <= results["arrival"]["meanCost"] + 1, results
