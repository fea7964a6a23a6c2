"""Domain first at internet scale: the problem cut down to the smallest domain that holds the group
(``planning/narrow.py``), and the search that plans there first on a large cluster, on a hand-made cluster."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from operators.api import keys
from operators.engine.planning import search as search_module
from operators.engine.planning.narrow import narrow, narrowable
from operators.engine.planning.problem import Problem
from tests.support.planning import pod, two_regions


def cluster(*extra: dict[str, Any]) -> Problem:
    """Region r1: za (n1, n2), zb (n3); region r2: zc (n4, n5); nodes of 4 cpus, n1 and n2 with 3 used, the others
    with 2: no node and no zone of r1 holds the group (a -> b, two pods each, 1 cpu per pod), zc does (2 + 2 cpus);
    za-zb 5, r1-r2 40; two nodes of one zone 1 apart."""
    return two_regions({"n1": "3", "n2": "3", "n3": "2", "n4": "2", "n5": "2"}, *extra)


def test_narrow_keeps_the_domains_nodes_places_and_costs() -> None:
    problem = cluster()
    zc = np.array([problem.nodes.index("n4"), problem.nodes.index("n5")])
    assert narrowable(problem, zc)
    inner = narrow(problem, zc)
    assert inner.nodes == ["n4", "n5"] and inner.places == [("r2", "zc")]
    assert inner.place_of.tolist() == [0, 0] and inner.place_cost.tolist() == [[1]]
    assert inner.free.tolist() == [[2000], [2000]] and inner.pods_free.tolist() == problem.pods_free[zc].tolist()
    assert all(len(mask) == 2 for mask in inner.eligible) and inner.pods == problem.pods
    # a bound member outside the domain counts in every pair of its workload: not narrowed
    bound = cluster(pod("a-9", "a", on="n1", cpu="100m"))
    assert not narrowable(bound, zc)


def test_a_large_cluster_is_planned_inside_the_smallest_domain_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_module, "DOMAIN_FIRST_NODES", 1)  # this cluster counts as large
    narrowed: list[list[str]] = []

    def spy(problem: Problem, nodes: Any) -> Problem:
        narrowed.append([problem.nodes[int(row)] for row in nodes])
        return narrow(problem, nodes)

    monkeypatch.setattr(search_module, "narrow", spy)
    problem = cluster()
    found = search_module.search(problem, 0, budget_seconds=0.02)
    assert narrowed == [["n4", "n5"]]  # searched on zc's nodes only
    # zc is the smallest domain that holds the four pods (no node has 4 cpus free; za 2, zb 2, zc 4): an a and a b
    # on each of n4 and n5, two of the four pairs across the two nodes: cost 2 (the baseline packs a's on n4, b's
    # on n5: all four across, 4)
    assert {problem.nodes[int(at)] for at in found.assignment} == {"n4", "n5"} and found.cost.objective == 2
    assert found.baseline is not None and found.baseline.objective == 4 and found.baseline_level == "zone"
    assert len(found.assignment) == 4 and (found.assignment >= 0).all()


def test_a_pod_the_domain_cannot_take_sends_the_search_to_every_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_module, "DOMAIN_FIRST_NODES", 1)
    # b-2 must go to n1: zc still holds the group by its sums, but the plan inside zc leaves b-2 out
    pinned = pod("b-2", "b", cpu="1", spec={"nodeSelector": {keys.HOSTNAME_LABEL: "n1"}})
    problem = cluster(pinned)
    found = search_module.search(problem, 0, budget_seconds=0.02)
    placed = {problem.pods[row].name: problem.nodes[int(at)] for row, at in enumerate(found.assignment)}
    assert placed["b-2"] == "n1" and not found.unplaceable and found.cost.unplaced == 0
