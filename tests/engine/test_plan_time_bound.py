"""The search held to its budget: past it, the greedy start places the rest of the group without evaluating network
costs (``Search.complete``), on a hand-made cluster."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from operators.api import keys
from operators.engine.planning import search as search_module
from operators.engine.planning.problem import Problem, build_problem
from operators.engine.planning.search import Search
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.simulation import ordered
from tests.support.planning import node, pair_problem, two_regions
from tests.support.planning import pod as pod_object


def cluster() -> Problem:
    """Region r1: za (n1, n2), zb (n3); region r2: zc (n4, n5); nodes of 4 cpus with 3, 3, 2, 1 and 2 used: free 1, 1,
    2, 3, 2. The group a -> b, two pods each of 1 cpu; za-zb 5, r1-r2 40, two nodes of one zone 1 apart."""
    return two_regions({"n1": "3", "n2": "3", "n3": "2", "n4": "1", "n5": "2"})


def test_past_its_budget_the_greedy_start_fills_the_roomiest_nodes_of_the_groups_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    problem = cluster()
    evaluated: list[int] = []
    costs = Search.node_costs

    def counted(self: Search, state: Any, pod: int) -> Any:
        evaluated.append(pod)
        return costs(self, state, pod)

    monkeypatch.setattr(Search, "node_costs", counted)
    engine = Search(problem, seed=0)
    state, left = engine.greedy(deadline=lambda: True)
    placed = {problem.pods[row].name: problem.nodes[int(at)] for row, at in enumerate(state.node)}
    # b first (a depends on b: dependencies first): the roomiest node is n4 (3 cpus), filled before the next: both
    # b's there (1 cpu left). a: zc holds the group now, so its nodes come first, the roomiest first: n5 (2 cpus)
    assert placed == {"b-0": "n4", "b-1": "n4", "a-0": "n5", "a-1": "n5"} and not left
    assert evaluated == []  # no network cost evaluated: two passes over the nodes per workload
    assert engine.objective(state).cost == 4  # four pairs across n4 and n5, one zone: 1 each


def test_a_search_out_of_budget_from_the_start_still_places_every_pod_that_fits() -> None:
    problem = cluster()
    found = search_module.search_nodes(problem, seed=0, budget_seconds=1e-9)
    assert (found.assignment >= 0).all() and not found.unplaceable and not found.converged
    # the better of the completed greedy start (4) and the smallest domain's placement: zc, packed in the spec's
    # order onto the roomiest node first (a-0, a-1, b-0 on n4, b-1 on n5): pairs a-b-1 across two nodes, 2
    assert found.cost.objective == 2 and found.baseline is not None and found.baseline.objective == 2
    free = problem.free[:, problem.resources.index("cpu")].copy()
    np.subtract.at(free, found.assignment, problem.requests[:, problem.resources.index("cpu")])
    assert (free >= 0).all()  # feasible


def test_the_partial_order_of_a_completion_is_the_full_orders_head() -> None:
    from operators.engine.planning.search import _largest_first

    items = np.arange(100, 110)
    key = np.array([5, 90, 12, 70, 33, 8, 61, 2, 44, 19])
    assert _largest_first(items, key, 3) == [101, 103, 106]  # keys 90, 70, 61
    assert _largest_first(items, key, 10) == [101, 103, 106, 108, 104, 109, 102, 105, 100, 107]


@pytest.mark.parametrize("kind", ["full", "spread"])
def test_the_smallest_domain_filled_by_scan_is_the_placement_filled_by_passes(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan (large domains) and the pass per pod (small ones) are two ways to the same placement: each pod on
    the first node by room that takes it."""
    from benchmarks.bench_plan import family, scenario_snapshot
    from operators.engine.planning import baseline

    scenario = family("small", kind, 3)
    problem = build_problem(ClusterIndex.build(scenario_snapshot(scenario)), scenario.group, ordered.config())
    by_passes, level, _ = baseline.smallest_domain(Search(problem, 0))
    monkeypatch.setattr(baseline, "SCAN_NODES", 0)
    by_scan, scanned_level, _ = baseline.smallest_domain(Search(problem, 0))
    assert (scanned_level, by_scan.node.tolist()) == (level, by_passes.node.tolist())
    assert (by_scan.node >= 0).all()


def test_the_baseline_placement_is_charged_before_the_greedy_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a problem above ``SMALL_PROBLEM`` pod-node pairs, the smallest domain's placement is made first and counted
    against the budget: when it spends the whole budget, the greedy start evaluates no network cost (made after the
    greedy start, it ran past the budget: 0.2-0.3 s of a 1 s budget for 5,000 pods on 50,000 nodes), and no
    improvement sweep runs. (The module's cluster, 4 pods on 5 nodes, counted as large here.)"""
    from operators.engine.planning import baseline

    monkeypatch.setattr(search_module, "SMALL_PROBLEM", 0)
    problem = cluster()
    evaluated: list[int] = []
    costs, placement = Search.node_costs, baseline.smallest_domain

    def counted(self: Search, state: Any, pod: int) -> Any:
        evaluated.append(pod)
        return costs(self, state, pod)

    def expensive(moves: Any) -> Any:
        moves.work[0] += 10**9  # a second of the reference machine: ten times the budget below
        return placement(moves)

    monkeypatch.setattr(Search, "node_costs", counted)
    monkeypatch.setattr(search_module, "smallest_domain", expensive)
    found = search_module.search_nodes(problem, seed=0, budget_seconds=0.1)
    assert evaluated == [] and found.sweeps == 0 and not found.converged
    assert found.cost.objective == 2  # the baseline's placement (the test above), better than the greedy start's 4
    monkeypatch.setattr(search_module, "smallest_domain", placement)
    assert search_module.search_nodes(problem, seed=0, budget_seconds=0.1).converged  # the budget is ample otherwise


def test_on_a_small_problem_the_baseline_placement_is_made_only_when_the_greedy_start_is_not_at_zero(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Up to ``SMALL_PROBLEM`` pod-node pairs the greedy start comes first: at cost 0 it is the plan, and the smallest
    domain's placement is not made (it was 40 % of the extender's answers for plan-ungated pods); above 0 it is made
    after the greedy start."""
    from operators.engine.planning import baseline

    calls: list[str] = []
    placement, greedy = baseline.smallest_domain, Search.greedy

    def recorded_placement(moves: Any) -> Any:
        calls.append("baseline")
        return placement(moves)

    def recorded_greedy(self: Search, *args: Any, **kwargs: Any) -> Any:
        calls.append("greedy")
        return greedy(self, *args, **kwargs)

    monkeypatch.setattr(search_module, "smallest_domain", recorded_placement)
    monkeypatch.setattr(Search, "greedy", recorded_greedy)
    # in the module's cluster no node has room for the group's 4 pods of 1 cpu; with n1's 4 cpus free, the greedy
    # start puts all four on one node: cost 0
    roomy = two_regions({"n1": "0", "n2": "3", "n3": "2", "n4": "1", "n5": "2"})
    found = search_module.search_nodes(roomy, seed=0, budget_seconds=0.1)
    assert found.cost.objective == 0 and found.baseline is None
    assert calls == ["greedy"]
    calls.clear()
    found = search_module.search_nodes(cluster(), seed=0, budget_seconds=0.1)
    # with its costs, the greedy start puts b-0, b-1 and a-0 on n4 (3 cpus free) and a-1 on n5 in the same zone: two
    # pairs across two nodes of zc, 2 (above 0); the baseline's placement is made after it, 2 (the second test); no
    # node holds the four pods and a split costs at least 2, so the plan is 2
    assert calls[:2] == ["greedy", "baseline"] and found.greedy.objective == 2
    assert found.baseline is not None and found.baseline.objective == 2 and found.cost.objective == 2
    # with a rule between pods (a's two pods on different nodes), the baseline is made first again, whatever the size
    calls.clear()
    apart = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {keys.APPGROUP_WORKLOAD_LABEL: "a"}}, "topologyKey": "kubernetes.io/hostname",
    }]}}  # fmt: skip
    specs = {"a": {"affinity": apart}, "b": None}
    objects = [node("n1", "za"), node("n2", "za")]
    objects += [pod_object(f"{w}-{i}", w, cpu="1", spec=specs[w]) for w in "ab" for i in range(2)]
    ruled = pair_problem(objects)
    assert ruled.constraints is not None
    search_module.search_nodes(ruled, seed=0, budget_seconds=0.1)
    assert calls[:2] == ["baseline", "greedy"]


def test_one_node_checked_alone_fits_as_every_node_checked_at_once() -> None:
    """``fits_on`` (one node, plain ints for the bandwidth) and ``fits`` (every node, arrays) on random loads with
    bandwidth asked and capacities unknown, full or tight, in both accountings."""
    from dataclasses import replace

    from operators.engine.cluster.bandwidth import Accounting

    problem = cluster()
    rng = np.random.default_rng(5)
    nodes = len(problem.nodes)
    for accounting in Accounting:
        for _ in range(200):
            shaped = replace(problem, accounting=accounting,
                             capacity=rng.choice([-1, 0, 100, 1000], size=nodes).astype(np.int64),
                             bandwidth_unknown=rng.random(nodes) < 0.2,
                             demand=rng.choice([0, 50, 400], size=(len(problem.pods), 2)).astype(np.int64))  # fmt: skip
            used = rng.integers(0, 1100, size=(nodes, 2))
            free = rng.integers(-1, 3, size=problem.free.shape) * 1000
            pods_free = rng.integers(0, 3, size=nodes)
            for pod in range(len(problem.pods)):
                at_once = shaped.fits(pod, used, free, pods_free).tolist()
                assert [shaped.fits_on(pod, node, used, free, pods_free) for node in range(nodes)] == at_once
