"""The extender's answers for the pods of a plan-ungated AppGroup: narrowed to the node planned for each pod, the
pods pending together planned once, replicas with equal inputs given their own nodes (never another's cached
answer), and the answer of any pod when the planned node no longer passes. Cluster: n1 and n2 in zone za, n3 in
zb (5 between the zones), the dependency a -> b, a-0 bound on n1."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.scheduling.index import ClusterIndex
from operators.extender import answers
from operators.extender.ahead import PlansAhead, queued
from operators.extender.answers import ExtenderState
from operators.extender.plans import PlanMetrics
from operators.sources.kinds import PODS
from operators.sources.store import Change
from operators.supervision import Supervisor
from operators.waiting import until
from tests.support.planning import CONFIG, node, pod, topology
from tests.support.ungated import NAMES, counted, filter_of, group_with, plans_made, state_of


def test_the_answer_is_the_planned_node_and_replicas_get_their_own() -> None:
    # n1 holds a-0 and one more pod: one b replica joins a-0 there (cost 0), the other goes to n2 in the same zone
    # (cost 1), never to n3 (5). Both replicas have the same inputs: a shared answer would send both to n1.
    state = state_of(pod("b-0", "b"), pod("b-1", "b"))
    first = filter_of(state, pod("b-0", "b"))
    second = filter_of(state, pod("b-1", "b"))
    assert {first["NodeNames"][0], second["NodeNames"][0]} == {"n1", "n2"}
    assert len(first["NodeNames"]) == len(second["NodeNames"]) == 1
    # the others are not named failed: kube-scheduler reads FailedNodes only to explain a pod that fits nowhere
    assert first["FailedNodes"] == second["FailedNodes"] == {}
    assert plans_made(state) == 1  # b-1's node came from the plan made when b-0 was asked about
    assert counted(state, "on-plan") == 2


def test_a_planned_node_that_no_longer_passes_gives_the_answer_of_any_pod() -> None:
    # b-1's node comes from the plan made for b-0; by the time kube-scheduler asks about b-1 its own filters have
    # left that node out (say it filled meanwhile): b-1 is answered as any pod, and not counted as placed
    state = state_of(pod("b-0", "b"), pod("b-1", "b"))
    filter_of(state, pod("b-0", "b"))
    planned = state.follower.planned["default/b-1"][0]
    offered = [name for name in NAMES if name != planned]
    answer = filter_of(state, pod("b-1", "b"), offered)
    assert answer["NodeNames"] == offered and answer["FailedNodes"] == {}
    assert counted(state, "off-plan") == 1 and "default/b-1" not in state.follower.answered


def test_the_pods_of_other_modes_are_not_narrowed() -> None:
    for mode in ("plan", "true", ""):
        state = state_of(pod("b-0", "b"), mode=mode, n1_pods="110")
        assert filter_of(state, pod("b-0", "b"))["NodeNames"] == NAMES
        assert plans_made(state) == 0


def test_the_planned_node_is_given_when_only_maxnetworkcost_would_refuse_it() -> None:
    # n1 (za) holds b-0 and nothing more; zb is 20 away, above a -> b's maxNetworkCost 10. The plan puts a-0 on n3
    # (the only node with room: one pair above the limit, weighed by the plan); NetworkOverhead's filter alone
    # would refuse n3 (a-0's dependency: Satisfied 0, Violated 1) and leave a-0 Pending for good, which a gated
    # plan's pod is not
    objects = [node("n1", "za", pods="1"), node("n3", "zb"), topology(20), pod("b-0", "b", on="n1"), pod("a-0", "a")]
    snapshot = replace(build_snapshot(objects), app_groups=(group_with("plan-ungated"),))
    state = ExtenderState(lambda: snapshot, CONFIG)
    state.follower.metrics = PlanMetrics.create(CollectorRegistry())
    answer = filter_of(state, pod("a-0", "a"), ["n3"])
    assert answer["NodeNames"] == ["n3"] and answer["FailedNodes"] == {}
    assert counted(state, "on-plan") == 1


def test_another_extender_continues_the_plan_from_what_the_api_holds() -> None:
    # Extender A plans b-0 and b-1 when asked about b-0: one joins a-0 on n1 (its last pod slot, cost 0), the other
    # goes to n2 in the same zone (cost 1), never n3 (5). A answers b-0 and dies before kube-scheduler asks about
    # b-1; what survives is what the API holds: b-0 bound where A put it. Extender B (the new scheduler leader's, in
    # its pod: nothing in memory) plans b-1 from that alone and puts it where A's plan had it: with b-0 on n1, n1 is
    # full and n2 is one away; with b-0 on n2, n1's slot beside a-0 costs 0.
    first = state_of(pod("b-0", "b"), pod("b-1", "b"))
    placed = filter_of(first, pod("b-0", "b"))["NodeNames"][0]
    planned_for_b1 = first.follower.planned["default/b-1"][0]
    assert {placed, planned_for_b1} == {"n1", "n2"}
    objects = [node("n1", "za", pods="2"), node("n2", "za"), node("n3", "zb"), topology(5), pod("a-0", "a", on="n1")]
    snapshot = replace(build_snapshot([*objects, pod("b-0", "b", on=placed), pod("b-1", "b")]),
                       app_groups=(group_with("plan-ungated"),))  # fmt: skip
    second = ExtenderState(lambda: snapshot, CONFIG)
    assert filter_of(second, pod("b-1", "b"))["NodeNames"] == [planned_for_b1]


def test_a_live_extender_plans_on_its_kept_index_and_leaves_it_as_the_cache_has_it() -> None:
    # The same cluster as the first test, followed by a live index (no snapshot of every pod built per plan): the
    # replicas get n1 and n2 as there; the plan's view counted b-0 on its node only while planning, so the kept
    # usage is the cache's after (n1: a-0 alone).
    from operators.sources.cache import ClusterCache
    from operators.sources.kinds import APPGROUP_SPECS, NETWORKTOPOLOGIES, NODES, PODS
    from operators.sources.live_index import LiveIndex

    cache = ClusterCache((NODES, PODS, APPGROUP_SPECS, NETWORKTOPOLOGIES))
    for raw in (node("n1", "za", pods="2"), node("n2", "za"), node("n3", "zb")):
        cache.apply(NODES, "ADDED", raw)
    cache.apply(NETWORKTOPOLOGIES, "ADDED", topology(5))
    cache.apply(APPGROUP_SPECS, "ADDED", group_with("plan-ungated").model_dump(mode="json", by_alias=True))
    for raw in (pod("a-0", "a", on="n1"), pod("b-0", "b"), pod("b-1", "b")):
        cache.apply(PODS, "ADDED", raw)
    live = LiveIndex(cache, CONFIG.bandwidth.default_node_bandwidth)
    state = ExtenderState(cache.snapshot, CONFIG, indexes=live.current, live=live)
    state.follower.metrics = PlanMetrics.create(CollectorRegistry())
    before = live.current().requested("n1")
    first = filter_of(state, pod("b-0", "b"))["NodeNames"]
    second = filter_of(state, pod("b-1", "b"))["NodeNames"]
    assert sorted(first + second) == ["n1", "n2"]
    assert plans_made(state) == 1
    assert live.current().requested("n1") == before == ({"cpu": 100}, 1)
    assert live.usage.members["pair"]["default/b-0"].node_name == ""


def nominations_of(state: ExtenderState, from_nodes: int) -> list[tuple[str, str]]:
    """What the follower of ``state`` nominates from now on (pod key, node), on clusters of ``from_nodes`` or more."""
    written: list[tuple[str, str]] = []
    state.follower.nominate = lambda planned: written.extend((pod.key, node) for pod, node in planned)
    state.follower.nominate_from_nodes = from_nodes
    return written


def test_the_pods_planned_and_not_asked_about_are_nominated_to_their_planned_node() -> None:
    # As the first test: b-0 and b-1 planned together when b-0 is asked about, one on n1, one on n2. b-1, not asked
    # about yet, is nominated to its node (so that kube-scheduler tries that node alone first); b-0 is answered.
    state = state_of(pod("b-0", "b"), pod("b-1", "b"))
    written = nominations_of(state, from_nodes=3)  # the cluster has 3 nodes
    answered = filter_of(state, pod("b-0", "b"))["NodeNames"][0]
    assert written == [("default/b-1", state.follower.planned["default/b-1"][0])]
    assert {answered, written[0][1]} == {"n1", "n2"}
    # asked about next, b-1 comes from the plan: no plan made, nothing nominated again
    assert filter_of(state, pod("b-1", "b"), [written[0][1]])["NodeNames"] == [written[0][1]]
    assert written == [("default/b-1", written[0][1])] and plans_made(state) == 1


def test_nothing_is_nominated_below_the_node_count_or_where_the_pod_is_nominated_already() -> None:
    state = state_of(pod("b-0", "b"), pod("b-1", "b"))
    written = nominations_of(state, from_nodes=4)  # 3 nodes: kube-scheduler's scan of them costs less
    filter_of(state, pod("b-0", "b"))
    assert written == [] and "default/b-1" in state.follower.planned
    for already in ("n1", "n2"):  # b-1 carries a nomination from before: only a different node is written
        nominated = pod("b-1", "b")
        nominated["status"]["nominatedNodeName"] = already
        state = state_of(pod("b-0", "b"), nominated)
        written = nominations_of(state, from_nodes=3)
        filter_of(state, pod("b-0", "b"))
        planned = state.follower.planned["default/b-1"][0]
        assert written == ([] if planned == already else [("default/b-1", planned)])


def test_a_pod_another_appgroup_s_plan_placed_holds_its_room_before_it_is_asked_about() -> None:
    # n1 (a-0 and one slot) and n2 (one slot): b-0 and b-1, planned together when b-0 is asked about, fill both.
    # AppGroup solo's c-0 is then asked about with the node planned for b-1 as its only candidate: that node is
    # full once b-1 counts there, so the plan places c-0 nowhere (answered as any pod). Counting only the answered
    # pods, it would see b-1's slot free and give it away, and b-1 would find its node taken.
    solo = group_with("plan-ungated", "solo", {"c": []})
    objects = [node("n1", "za", pods="2"), node("n2", "za", pods="1"), node("n3", "zb"), topology(5)]
    pending = [pod("b-0", "b"), pod("b-1", "b"), pod("c-0", "c", group="solo")]
    snapshot = replace(build_snapshot([*objects, pod("a-0", "a", on="n1"), *pending]),
                       app_groups=(group_with("plan-ungated"), solo))  # fmt: skip
    state = ExtenderState(lambda: snapshot, CONFIG)
    state.follower.metrics = PlanMetrics.create(CollectorRegistry())
    filter_of(state, pod("b-0", "b"))
    held = state.follower.planned["default/b-1"][0]
    assert held in ("n1", "n2")
    answer = filter_of(state, pod("c-0", "c", group="solo"), [held])
    assert answer["NodeNames"] == [held] and counted(state, "unplaceable") == 1 and counted(state, "on-plan") == 1


def test_an_appgroup_planned_ahead_is_nominated_whole_and_answered_from_that_plan() -> None:
    # planned before kube-scheduler asks: b-0 and b-1 both nominated (one n1, one n2, as when b-0 is asked); then
    # kube-scheduler asks about each on its nominated node alone, and both answers come from that one plan
    state = state_of(pod("b-0", "b"), pod("b-1", "b"))
    written = nominations_of(state, from_nodes=3)
    ahead = PlansAhead(state)
    assert ahead.plan_pass([Pod.parse(pod("b-0", "b"))])[0] == 2
    nominated = dict(written)
    assert sorted(nominated) == ["default/b-0", "default/b-1"] and sorted(nominated.values()) == ["n1", "n2"]
    for name in ("b-0", "b-1"):
        node = nominated[f"default/{name}"]
        assert filter_of(state, pod(name, "b"), [node])["NodeNames"] == [node]
    assert plans_made(state) == 1 and counted(state, "on-plan") == 2
    assert ahead.plan_pass([Pod.parse(pod("b-0", "b"))])[0] == 0  # every pending pod is in a plan already


def test_each_ask_about_a_planned_pod_is_counted_by_the_nomination_it_carried_and_its_candidates() -> None:
    """Planned ahead (b-0 and b-1 nominated): b-0 asked about carrying its nomination, on that node alone (planned,
    one); b-1 asked about without it, with every node (none, several: its patch had not reached kube-scheduler); an
    AppGroup with no plan-ungated mode is not counted."""
    gated = pod("g-0", "b", group="gated")
    state = state_of(pod("b-0", "b"), pod("b-1", "b"), gated, groups=(group_with("plan", name="gated"),))
    written = nominations_of(state, from_nodes=3)
    assert PlansAhead(state).plan_pass([Pod.parse(pod("b-0", "b"))])[0] == 2
    nominated = dict(written)
    filter_of(state, gated)
    carried = pod("b-0", "b")
    carried["status"]["nominatedNodeName"] = nominated["default/b-0"]
    filter_of(state, carried, [nominated["default/b-0"]])
    filter_of(state, pod("b-1", "b"))
    assert state.follower.metrics is not None
    asks = {tuple(s.labels.values()): s.value for s in state.follower.metrics.asks.collect()[0].samples
            if s.name.endswith("_total")}  # fmt: skip
    assert asks == {("planned", "one"): 1.0, ("none", "several"): 1.0}


def test_nothing_is_planned_ahead_where_nothing_is_nominated() -> None:
    state = state_of(pod("b-0", "b"), pod("b-1", "b"))
    written = nominations_of(state, from_nodes=4)  # 3 nodes: kube-scheduler asks, and the plan is made then
    assert PlansAhead(state).plan_pass([Pod.parse(pod("b-0", "b"))])[0] == 0
    assert written == [] and state.follower.planned == {} and plans_made(state) == 0
    other = state_of(pod("c-0", "c", group="solo"))  # an AppGroup nobody declared: nothing to plan
    nominations_of(other, from_nodes=3)
    assert PlansAhead(other).plan_pass([Pod.parse(pod("c-0", "c", group="solo"))])[0] == 0


def test_an_appgroup_is_due_once_its_pods_stop_arriving() -> None:
    # as the gated passes: 0.1 s after its last pod, or 30 s after its first while they keep coming
    now = [0.0]
    ahead = PlansAhead(state_of(), clock=lambda: now[0])

    def arrive(name: str, group: str) -> None:
        raw = pod(name, "b", group=group)
        ahead.on_changes([Change(PODS.name, None, Pod.parse(raw))])

    arrive("x-0", "x")
    now[0] = 0.05
    arrive("x-1", "x")
    arrive("y-0", "y")
    assert ahead.due() == ([], pytest.approx(0.15))
    now[0] = 0.16  # x's last pod 0.1 s ago and more, y's too: both due, x first (its first pod came first)
    pods, later = ahead.due()
    assert [p.name for p in pods] == ["x-1", "y-0"] and later is None and ahead.waiting == {}
    bound = Pod.parse(pod("z-0", "b", on="n1", group="z"))  # a bound pod, or a change of a known pod: nothing
    ahead.on_changes([Change(PODS.name, None, bound), Change(PODS.name, bound, bound)])
    assert ahead.waiting == {}
    for step in range(400):  # pods every 0.09 s: due 30 s after the first all the same
        now[0] = 1.0 + step * 0.09
        arrive(f"w-{step}", "w")
        if ahead.due()[0]:
            break
    assert now[0] >= 31.0 and round(now[0] - 1.0, 2) <= 30.09


def test_an_appgroup_due_again_while_it_waits_for_its_pass_is_queued_once() -> None:
    # pair's b-0 due and queued behind a long pass; b-1 comes, and pair is due again: queued once, planned once with
    # both pods. twin, due for the first time, joins the queue; the same AppGroup name in another namespace is another
    first, again = Pod.parse(pod("b-0", "b")), Pod.parse(pod("b-1", "b"))
    twin = Pod.parse(pod("d-0", "d", group="twin"))
    elsewhere = Pod.parse({**pod("b-0", "b"), "metadata": {**pod("b-0", "b")["metadata"], "namespace": "other"}})
    assert queued([first], [again, twin, elsewhere]) == [first, twin, elsewhere]
    state = state_of(pod("b-0", "b"), pod("b-1", "b"))
    nominations_of(state, from_nodes=3)
    assert PlansAhead(state).plan_pass(queued([first], [again])) == (2, 1) and plans_made(state) == 1


def test_nominated_a_plan_s_pods_keep_their_node_when_more_of_their_appgroup_arrive() -> None:
    # b-0 and b-1 planned ahead and nominated (n1, n2); b-2 arrives and its AppGroup is planned again: b-0 and b-1
    # keep their nodes (moved, each would hold its old node's room in kube-scheduler's view until the new
    # nomination lands), only b-2 is planned and nominated: n1 is full (a-0 and a b), so n2 beside it (cost 1)
    state = state_of(pod("b-0", "b"), pod("b-1", "b"))
    written = nominations_of(state, from_nodes=3)
    assert PlansAhead(state).plan_pass([Pod.parse(pod("b-0", "b"))])[0] == 2
    first = dict(written)
    objects = [node("n1", "za", pods="2"), node("n2", "za"), node("n3", "zb"), topology(5), pod("a-0", "a", on="n1")]
    snapshot = replace(build_snapshot([*objects, pod("b-0", "b"), pod("b-1", "b"), pod("b-2", "b")]),
                       app_groups=(group_with("plan-ungated"),))  # fmt: skip
    state.source = lambda: snapshot
    written.clear()
    assert PlansAhead(state).plan_pass([Pod.parse(pod("b-2", "b"))])[0] == 1
    assert written == [("default/b-2", "n2")]
    assert {key: held[0] for key, held in state.follower.planned.items()} == {**first, "default/b-2": "n2"}


def test_nominated_a_pod_whose_node_kube_scheduler_refused_is_planned_again_on_its_candidates() -> None:
    # b-0 and b-1 nominated to n1 and n2; kube-scheduler asks about the one on n2 with n3 alone passing (its own
    # filters refused n1 and n2 meanwhile): planned again there (the only candidate, 5 from a-0), not answered as
    # any pod
    state = state_of(pod("b-0", "b"), pod("b-1", "b"))
    written = nominations_of(state, from_nodes=3)
    PlansAhead(state).plan_pass([Pod.parse(pod("b-0", "b"))])[0]
    on_n2 = next(key for key, node in written if node == "n2").split("/")[1]
    answer = filter_of(state, pod(on_n2, "b"), ["n3"])
    assert answer["NodeNames"] == ["n3"] and answer["FailedNodes"] == {}
    assert counted(state, "off-plan") == 0 and counted(state, "on-plan") == 1 and plans_made(state) == 2


def twin_state(n1_pods: str) -> ExtenderState:
    """Two plan-ungated AppGroups on the module's cluster: pair (a -> b, a-0 bound on n1, b-0 pending) and twin
    (c -> d, c-0 bound on n1, d-0 pending); n1 takes ``n1_pods`` pods."""
    twin = group_with("plan-ungated", "twin", {"c": ["d"], "d": []})
    placed = (pod("c-0", "c", on="n1", group="twin"),)
    return state_of(pod("b-0", "b"), pod("d-0", "d", group="twin"), n1_pods=n1_pods, placed=placed, groups=(twin,))


def counted_passes(state: ExtenderState) -> tuple[list[int], list[int]]:
    """From now on, the views ``state``'s plans open (one entry per view) and the pods placed on them per call."""
    views: list[int] = []
    placed: list[int] = []
    opened = state.provisional

    class Counted:
        def __init__(self) -> None:
            self.view = opened()
            self.index = self.view.index
            views.append(1)

        def place(self, pods: Iterable[Pod]) -> ClusterIndex:
            pods = list(pods)
            placed.append(len(pods))
            self.index = self.view.place(pods)
            return self.index

        def close(self) -> None:
            self.view.close()

    state.provisional = Counted  # type: ignore[method-assign,assignment]
    return views, placed


def test_appgroups_planned_in_one_pass_see_each_others_plans_and_count_the_backlog_once() -> None:
    # n1 holds a-0 and c-0 and takes one pod more. pair's b-0 and twin's d-0 each cost 0 on n1 (beside a-0, c-0) and
    # 1 on n2 (same zone). Planned in one pass, pair first: b-0 takes n1, and twin's plan, counting it there, sends
    # d-0 to n2 (given n1 back, it would send d-0 there too, over n1's pod count). One view for the pass: the pods
    # held from before (none here) placed on it once, then each plan's pods (one view per AppGroup before).
    state = twin_state(n1_pods="3")
    written = nominations_of(state, from_nodes=3)
    views, placed = counted_passes(state)
    ahead = PlansAhead(state)
    assert ahead.plan_pass([Pod.parse(pod("b-0", "b")), Pod.parse(pod("d-0", "d", group="twin"))]) == (2, 2)
    assert dict(written) == {"default/b-0": "n1", "default/d-0": "n2"}
    assert views == [1] and placed == [0, 1, 1] and plans_made(state) == 2
    # with room for both on n1, both go there: the order alone does not push twin away
    roomy = twin_state(n1_pods="4")
    nominations = nominations_of(roomy, from_nodes=3)
    PlansAhead(roomy).plan_pass([Pod.parse(pod("b-0", "b")), Pod.parse(pod("d-0", "d", group="twin"))])
    assert dict(nominations) == {"default/b-0": "n1", "default/d-0": "n1"}


def test_a_pass_past_its_time_starts_no_more_plans_and_the_rest_wait_their_turn() -> None:
    # a pass whose time is up plans the first AppGroup all the same, and leaves the second for the next pass, which
    # plans it against the first's pods: b-0 on n1, then d-0 on n2. A pod of no plan-ungated AppGroup is dropped.
    state = twin_state(n1_pods="3")
    written = nominations_of(state, from_nodes=3)
    ahead = PlansAhead(state)
    stray = Pod.parse(pod("e-0", "e", group="nobody"))
    queue = [stray, Pod.parse(pod("b-0", "b")), stray, Pod.parse(pod("d-0", "d", group="twin"))]
    assert ahead.plan_pass(queue, until=0.0) == (1, 3)  # stray, pair, stray taken; twin waits
    assert written == [("default/b-0", "n1")]
    assert ahead.plan_pass(queue[3:], until=0.0) == (1, 1)
    assert written == [("default/b-0", "n1"), ("default/d-0", "n2")]


async def test_a_pass_that_raises_is_restarted_and_later_appgroups_are_planned_ahead_again() -> None:
    """The plans-ahead loop under its supervisor, with a failure injected: a pass that raises is logged, counted in
    ``netaware_task_restarts_total{task="extender-plans-ahead"}`` and the loop restarted; the AppGroup of that pass
    is planned when kube-scheduler asks about its pods (as without plans ahead), and an AppGroup due later is
    planned ahead again. Cluster of :func:`twin_state`, n1 with room for one pod more."""
    state = twin_state(n1_pods="3")
    written = nominations_of(state, from_nodes=3)
    now = [0.0]
    ahead = PlansAhead(state, clock=lambda: now[0])
    passes: list[list[str]] = []
    real = ahead.plan_pass

    def failing_first(pods: list[Pod], until: float = math.inf) -> tuple[int, int]:
        passes.append([pod.name for pod in pods])
        if len(passes) == 1:
            raise RuntimeError("injected")
        return real(pods, until)

    ahead.plan_pass = failing_first  # type: ignore[method-assign]
    registry = CollectorRegistry()
    tasks = Supervisor(registry, first_backoff=0.01)
    stop = asyncio.Event()
    loop = tasks.start("extender-plans-ahead", lambda: ahead.run(stop), stop.is_set)
    try:
        ahead.on_changes([Change(PODS.name, None, Pod.parse(pod("b-0", "b")))])
        now[0] = 1.0  # due: 0.1 s after its last pod
        ahead.wake.set()
        await until("the first pass, which raises", lambda: passes == [["b-0"]], 5)
        restarted = {"task": "extender-plans-ahead"}
        await until("a restart", lambda: registry.get_sample_value("netaware_task_restarts_total", restarted) == 1, 5)
        assert written == [] and state.follower.planned == {}  # pair's pass lost: nothing nominated
        # kube-scheduler asks about b-0: planned then, beside a-0 on n1 (cost 0), as without plans ahead
        assert filter_of(state, pod("b-0", "b"))["NodeNames"] == ["n1"]
        # twin, due after the restart, is planned ahead and nominated: d-0 to n2, n1 being full with b-0 answered
        ahead.on_changes([Change(PODS.name, None, Pod.parse(pod("d-0", "d", group="twin")))])
        now[0] = 2.0
        ahead.wake.set()
        await until("twin planned ahead after the restart", lambda: written == [("default/d-0", "n2")], 5)
        assert passes == [["b-0"], ["d-0"]]
    finally:
        stop.set()
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)


def test_a_planned_pods_answer_does_not_resolve_the_whole_name_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pod not nominated yet comes with every node kube-scheduler's filters passed: its planned node is looked up
    alone; the list is resolved (a table of every name) only for the answer of any pod."""
    resolved: list[list[str]] = []
    of = answers.Resolved.of

    def counting(index: ClusterIndex, names: list[str]) -> answers.Resolved:
        resolved.append(names)
        return of(index, names)

    monkeypatch.setattr(answers.Resolved, "of", counting)
    state = state_of(pod("b-0", "b"), pod("b-1", "b"))
    first = filter_of(state, pod("b-0", "b"), [*NAMES, "ghost"])  # a node the extender does not know: no matter
    assert len(first["NodeNames"]) == 1 and first["FailedNodes"] == {} and resolved == []
    planned = state.follower.planned["default/b-1"][0]
    offered = [name for name in NAMES if name != planned]
    assert filter_of(state, pod("b-1", "b"), offered)["NodeNames"] == offered  # off plan: as any pod
    assert resolved == [offered]


def test_the_answers_of_bound_pods_are_dropped_once_a_second_not_once_per_pod_asked_about() -> None:
    state = state_of(*(pod(f"b-{n}", "b") for n in range(4)), n1_pods="110")
    now = [1000.0]
    state.follower.clock = lambda: now[0]
    sweeps: list[float] = []
    forget = state.follower._forget

    def counting(*args: Any) -> list[set[str]]:
        sweeps.append(now[0])
        return forget(*args)

    state.follower._forget = counting  # type: ignore[method-assign]
    for n, at in enumerate((1000.0, 1000.4, 1000.9, 1001.0)):
        now[0] = at
        filter_of(state, pod(f"b-{n}", "b"))
    assert sweeps == [1000.0, 1001.0]  # the first, then a second later (SWEEP_SECONDS)
