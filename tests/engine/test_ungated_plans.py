"""Plans made when kube-scheduler asks about a pod (``ordered-scheduling: plan-ungated``): the pods the extender
answered for are counted on their node, the pod asked about is planned again, the others pending are planned with
it. Cluster: n1 and n2 in zone za, n3 in zb (5 between the zones), the dependency a -> b."""

from __future__ import annotations

from dataclasses import replace

import pytest

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import Snapshot, build_snapshot
from operators.engine.planning.plan import Plan
from operators.engine.planning.release import PlanPace
from operators.engine.planning.ungated import (
    backlog_budget,
    index_with_answers,
    plan_pending,
    plans_ungated,
    ungated_names,
    waiting_groups,
)
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.simulation import ordered
from tests.support.planning import CONFIG, node, placed, pod, topology


def ungated(graph: dict[str, list[str]], mode: str = "plan-ungated", name: str = "pair") -> AppGroup:
    group = ordered.appgroup(name, graph)
    meta = group.metadata.model_copy(update={"annotations": {keys.ORDERED_SCHEDULING: mode}})
    return group.model_copy(update={"metadata": meta})


def cluster(*pods: dict[str, object], n1_pods: str = "110") -> tuple[Snapshot, AppGroup]:
    group = ungated({"a": ["b"], "b": []})
    objects = [node("n1", "za", pods=n1_pods), node("n2", "za"), node("n3", "zb"), topology(5), *pods]
    return replace(build_snapshot(objects), app_groups=(group,)), group


def planned_for(
    snapshot: Snapshot,
    group: AppGroup,
    answered: dict[str, tuple[str, str]],
    asking: Pod,
    nodes: list[str] | None = None,
) -> Plan:
    """The plan the extender makes when asked about ``asking`` (``answered``: pod key -> (node, AppGroup name))."""
    return plan_pending(index_with_answers(snapshot, answered, asking), group, CONFIG, 0.0, nodes)


def test_the_mode_is_the_annotation() -> None:
    assert plans_ungated(ungated({"a": []}))
    assert plans_ungated(ungated({"a": []}, " Plan-Ungated "))
    assert not plans_ungated(ungated({"a": []}, "plan"))
    assert not plans_ungated(None)


def test_pending_pods_are_planned_together() -> None:
    # nothing placed: a-0 and b-0 on one node costs 0 (any node holds both)
    snapshot, group = cluster(pod("a-0", "a"), pod("b-0", "b"))
    plan = planned_for(snapshot, group, {}, Pod.parse(pod("b-0", "b")))
    nodes = placed(plan)
    assert set(nodes) == {"a-0", "b-0"} and nodes["a-0"] == nodes["b-0"] and plan.cost.cost == 0


def test_an_answered_pod_holds_its_node_and_is_not_planned_again() -> None:
    # a-0 was answered n1, which then holds one pod: b-0 cannot join it and goes to n2 in the same zone (cost 1)
    # rather than n3 (5); a-0 is no part of the plan.
    snapshot, group = cluster(pod("a-0", "a"), pod("b-0", "b"), n1_pods="1")
    answered = {f"{ordered.NAMESPACE}/a-0": ("n1", "pair")}
    plan = planned_for(snapshot, group, answered, Pod.parse(pod("b-0", "b")))
    assert placed(plan) == {"b-0": "n2"} and plan.cost.cost == 1


def test_the_pod_asked_about_is_planned_again_even_if_answered_before() -> None:
    # kube-scheduler asks again only after an attempt that did not bind: b-0's answer n3 is not kept; it joins
    # the bound a-0 on n1
    snapshot, group = cluster(pod("a-0", "a", on="n1"), pod("b-0", "b"))
    asking = Pod.parse(pod("b-0", "b"))
    assert placed(planned_for(snapshot, group, {asking.key: ("n3", "pair")}, asking)) == {"b-0": "n1"}


def test_the_pod_asked_about_is_planned_when_the_cache_does_not_hold_it_yet() -> None:
    snapshot, group = cluster(pod("a-0", "a", on="n1"))
    assert placed(planned_for(snapshot, group, {}, Pod.parse(pod("b-0", "b")))) == {"b-0": "n1"}


def test_the_plan_is_made_on_the_candidates_and_the_placed_members_nodes() -> None:
    # kube-scheduler's candidates for b-0 are n2 and n3; n1 stays for a-0's pairs: b-0 goes to n2, in a-0's zone
    # (1), not n3 (5) — and never n1, which is no candidate
    snapshot, group = cluster(pod("a-0", "a", on="n1"), pod("b-0", "b"))
    plan = planned_for(snapshot, group, {}, Pod.parse(pod("b-0", "b")), nodes=["n2", "n3"])
    assert placed(plan) == {"b-0": "n2"} and plan.cost.cost == 1


def test_a_pod_of_another_appgroup_answered_and_not_bound_yet_holds_its_room() -> None:
    # n1 takes two pods and holds the bound a-0; x-0 (AppGroup other) was answered n1 and is not bound yet: b-0
    # cannot join a-0 there (0) and goes to n2 in the same zone (1). Counted only for its own AppGroup, x-0 would
    # leave n1's second place to b-0.
    other = pod("x-0", "x", group="other")
    snapshot, group = cluster(pod("a-0", "a", on="n1"), pod("b-0", "b"), other, n1_pods="2")
    asking = Pod.parse(pod("b-0", "b"))
    assert placed(planned_for(snapshot, group, {}, asking)) == {"b-0": "n1"}
    answered = {f"{ordered.NAMESPACE}/x-0": ("n1", "other")}
    plan = planned_for(snapshot, group, answered, asking)
    assert placed(plan) == {"b-0": "n2"} and plan.cost.cost == 1


def test_the_candidates_narrow_the_nodes_before_a_layout_does() -> None:
    # The rebalancer's layout wants b's pod on n1 (a deficit there); kube-scheduler offers n2 and n3 only: b-0 goes
    # to n2 (a-0's zone, cost 1), the layout's narrowing falling back to the candidates, never left unplaced.
    from operators.engine.planning.problem import build_problem
    from operators.engine.scheduling.index import ClusterIndex

    snapshot, group = cluster(pod("a-0", "a", on="n1"), pod("b-0", "b"))
    index = ClusterIndex.build(snapshot)
    problem = build_problem(index, group, CONFIG, layout={"b": {"n1": 1}}, allowed=["n2", "n3"])
    assert [problem.nodes[n] for n in problem.eligible[0].nonzero()[0]] == ["n2", "n3"]
    assert not problem.unplaceable


def test_appgroups_waiting_together_share_the_planning_time() -> None:
    """Plan-ungated g1 (a pending pod), g2 (its pending pod already planned), g3 (all bound), g4..g8 (a pending pod
    each), and gated p (plan mode, pending): g1 and g4..g8 wait, 6 of them: each plan 0.5 s / 6 = 83 ms, under the
    configured 100 ms; with g4..g8 planned too, g1 alone: its 100 ms."""
    names = ["g1", "g2", "g3", "g4", "g5", "g6", "g7", "g8"]
    groups = [ungated({"a": []}, name=name) for name in names] + [ungated({"a": []}, "plan", "p")]
    pods = [pod(f"{name}-0", "a", group=name, on="n1" if name == "g3" else "") for name in names]
    pods.append(pod("p-0", "a", group="p"))
    snapshot = replace(build_snapshot([node("n1", "za"), topology(5), *pods]), app_groups=tuple(groups))
    index = ClusterIndex.build(snapshot)
    held = {f"{ordered.NAMESPACE}/g2-0"}
    assert waiting_groups(index, held) == 6
    assert abs(backlog_budget(index, held) - 0.5 / 6) < 1e-12
    held |= {f"{ordered.NAMESPACE}/{name}-0" for name in ("g4", "g5", "g6", "g7", "g8")}
    assert waiting_groups(index, held) == 1 and backlog_budget(index, held) == 0.1
    # AppGroups that keep arriving: 11 plans in the last 2 s (one 2.5 s ago no longer counts) and g1 waiting share
    # 0.3 s/s x 2 s, 50 ms each (46 ms if the older one counted)
    pace = PlanPace()
    pace.made.extend([97.5, *[99.0] * 11])
    assert backlog_budget(index, held, pace=pace, now=100.0) == pytest.approx(0.05)


def test_the_plan_ungated_names_are_kept_per_appgroups_tuple_and_found_again_for_a_new_one() -> None:
    """g1 and g2 plan-ungated, p gated: {g1, g2}, the same set for the same tuple (a live cache's snapshots share
    it while no AppGroup changes). g2 annotated ``plan`` in a new tuple: {g1} (a kept set served for any tuple of
    the same length, or of an equal first AppGroup, would still say {g1, g2})."""
    groups = (ungated({"a": []}, name="g1"), ungated({"a": []}, name="g2"), ungated({"a": []}, "plan", "p"))
    first = ungated_names(groups)
    assert first == {"g1", "g2"}
    assert ungated_names(groups) is first
    changed = (groups[0], ungated({"a": []}, "plan", "g2"), groups[2])
    assert ungated_names(changed) == {"g1"}
    assert ungated_names(groups) == {"g1", "g2"}
