"""What keeps a plan of one pod cheap (the extender plans pod after pod for plan-ungated AppGroups) without
changing any answer: one pod is placed on its best node with no local search; the workloads with nothing to
place are left out of the greedy order; a node's placement filters are kept per node object (and its
``unschedulable``), its capacity per name and the values read; a pod is moved to a node without being parsed
again. Cluster: n1 and n2 in zone za, n3 in zb (5 between the zones), the dependency a -> b."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from operators.api import keys
from operators.api.quantity import Quantity
from operators.engine.cluster.bandwidth import capacity_or_problem
from operators.engine.cluster.kube import terms
from operators.engine.cluster.objects import Node, Pod
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.planning.search import Search
from operators.engine.planning.ungated import index_with_answers, plan_pending
from operators.engine.simulation import ordered
from tests.support.planning import CONFIG, group_problem, node, placed, plan_of, pod, topology


def test_one_pod_goes_to_its_cheapest_node_without_a_local_search() -> None:
    # a-0 is bound on n3 (zb), which holds no more pods: b-0 costs 5 anywhere else (n1 or n2, in za). The greedy
    # start is then the optimum; a search would have run at least one sweep (its objective is not 0).
    objects = [node("n1", "za"), node("n2", "za"), node("n3", "zb", pods="1"), topology(5)]
    plan = plan_of([*objects, pod("a-0", "a", on="n3"), pod("b-0", "b")], {"a": ["b"], "b": []})
    assert placed(plan)["b-0"] in {"n1", "n2"} and plan.cost.cost == 5
    assert plan.sweeps == 0 and plan.converged


def test_two_pods_still_get_the_local_search() -> None:
    # the shortcut is for one pod only: two pending pods with a non-zero greedy start are searched
    objects = [node("n1", "za", pods="1"), node("n2", "za", pods="1"), node("n3", "zb", pods="1"), topology(5)]
    objects += [pod("a-0", "a", on="n3"), pod("b-0", "b"), pod("b-1", "b")]
    plan = plan_of(objects, {"a": ["b"], "b": []})
    assert sorted(placed(plan).values()) == ["n1", "n2"] and plan.cost.cost == 10 and plan.sweeps >= 1


def test_the_greedy_order_holds_only_workloads_with_pods_to_place() -> None:
    group = ordered.appgroup("pair", {"a": ["b"], "b": ["c"], "c": []})
    objects = [node("n1", "za"), topology(5), pod("a-0", "a", on="n1"), pod("b-0", "b"), pod("c-0", "c")]
    engine = Search(group_problem(objects, group))
    order = engine.greedy_order(engine.empty())
    assert [engine.problem.workloads[w] for w in order] == ["b", "c"]  # b first: tied to the bound a-0


def test_a_node_changed_under_the_same_name_is_read_again() -> None:
    # n1 tainted after a first plan: the second plan must see the taint (a memo by name would not)
    group = ordered.appgroup("pair", {"a": ["b"], "b": []})
    before = [node("n1", "za"), node("n3", "zb"), topology(5), pod("a-0", "a", on="n1"), pod("b-0", "b")]
    after = [node("n1", "za", taint=True), *before[1:]]
    plans = [
        plan_pending(
            index_with_answers(replace(build_snapshot(objects), app_groups=(group,)), {}, asking), group, CONFIG, 0.0
        )
        for objects in (before, after)
        for asking in [Pod.parse(pod("b-0", "b"))]
    ]
    assert [placed(plan) for plan in plans] == [{"b-0": "n1"}, {"b-0": "n3"}]


def test_a_node_left_out_of_the_candidates_is_not_placed_on_after_it_was() -> None:
    # the same node objects, first all candidates (b-0 joins a-0 on n1), then n1 no candidate (marked
    # unschedulable for this plan: b-0 goes to n2, in a-0's zone)
    group = ordered.appgroup("pair", {"a": ["b"], "b": []})
    objects = [node("n1", "za"), node("n2", "za"), node("n3", "zb"), topology(5)]
    snapshot = replace(build_snapshot([*objects, pod("a-0", "a", on="n1"), pod("b-0", "b")]), app_groups=(group,))
    asking = Pod.parse(pod("b-0", "b"))
    first = plan_pending(index_with_answers(snapshot, {}, asking), group, CONFIG, 0.0, nodes=["n1", "n2", "n3"])
    second = plan_pending(index_with_answers(snapshot, {}, asking), group, CONFIG, 0.0, nodes=["n2", "n3"])
    assert (placed(first), placed(second)) == ({"b-0": "n1"}, {"b-0": "n2"})


def bandwidth_node(value: str) -> Node:
    raw: dict[str, Any] = node("n9", "za")
    raw["metadata"]["annotations"] = {keys.NODE_BANDWIDTH_KOORDINATOR: value}
    return Node.parse(raw)


def test_a_node_capacity_follows_its_annotation() -> None:
    assert capacity_or_problem(bandwidth_node("1G"), None, None) == (10**9, "")
    assert capacity_or_problem(bandwidth_node("2G"), None, None) == (2 * 10**9, "")
    assert capacity_or_problem(bandwidth_node("2G"), None, Quantity.parse("5G")) == (2 * 10**9, "")
    bits, problem = capacity_or_problem(bandwidth_node("fast"), None, None)
    assert bits is None and "n9" in problem and "fast" in problem


def test_a_pod_moved_to_a_node_is_the_pod_parsed_with_that_node() -> None:
    raw = pod("b-0", "b")
    moved = Pod.parse(raw).on_node("n2")
    assert moved == Pod.parse({**raw, "spec": {**raw["spec"], "nodeName": "n2"}})
    assert moved.raw["spec"]["nodeName"] == "n2" and moved.raw["metadata"] == raw["metadata"]
    back = moved.on_node("")
    assert back == Pod.parse(raw) and "nodeName" not in back.raw["spec"] and back.node_name == ""


def test_a_pod_placed_again_on_the_same_node_is_the_same_copy_and_its_terms_are_parsed_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pass of plans places each held pod again (``on_node``): the same copy each time, so that what is parsed of
    a pod object (its scheduling terms) is parsed once, not once a pass."""
    parsed: list[str] = []
    parse = terms._parse

    def counted(pod: Pod) -> terms.SchedulingSpec:
        parsed.append(pod.node_name)
        return parse(pod)

    monkeypatch.setattr(terms, "_parse", counted)
    held = Pod.parse(pod("b-0", "b"))
    for _ in range(3):  # three passes
        assert terms.scheduling_spec(held.on_node("n2")) == terms.scheduling_spec(held.on_node("n2"))
    assert held.on_node("n2") is held.on_node("n2") and held.on_node("n1") is not held.on_node("n2")
    assert parsed == ["n2"]  # once, for the one copy on n2
    # another object of the same pod (the cache's next version) is copied anew: its fields, not the memo's
    bound = replace(held, phase="Running")
    assert bound.on_node("n2") is not held.on_node("n2") and bound.on_node("n2").phase == "Running"
