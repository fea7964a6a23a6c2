"""The rebalancer's cycle (engine/rebalancing): hand-derived moves for an AppGroup and for bandwidth, every safety
rule, and properties over random clusters — a cycle never raises the objective (recomputed here from the pods'
places, not by the engine), never breaks a filter, never exceeds a budget, never picks a protected pod, and a
second cycle on an unchanged cluster proposes nothing."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.api.config.descheduler import RebalanceArgs, parse_policy
from operators.api.errors import FieldError
from operators.api.networktopology import NetworkTopology
from operators.engine.cluster.fit import insufficient, placement_reasons, requested_on_nodes
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import Snapshot, build_snapshot
from operators.engine.descheduling.limits import EvictionLimits
from operators.engine.descheduling.lownodeload import EvictionPlanner, carried_out
from operators.engine.planning.layout import Rebalancing, layout_at
from operators.engine.planning.plan import plan_appgroup
from operators.engine.planning.release import VACATE_SECONDS, plan_view, release_by_plan
from operators.engine.planning.search import Search
from operators.engine.rebalancing.appgroups import _afresh as afresh
from operators.engine.rebalancing.appgroups import _toward_best as toward_best
from operators.engine.rebalancing.model import Balance, Cycle
from operators.engine.rebalancing.rebalance import Move, Rebalance, rebalance
from operators.engine.rebalancing.safety import History, MoveRecord, workload_of
from operators.engine.scheduling.index import ClusterIndex
from tests.support import rebalancing as support

CONFIG = support.CONFIG
NOW = 10_000.0
NS, ZONE_COST = support.NS, support.ZONE_COST
node, pod, topology, appgroup = support.node, support.pod, support.topology, support.appgroup


def cycle(
    snapshot: Snapshot, history: History | None = None, now: float = NOW, ceilings: Any = None, **args: Any
) -> Rebalance:
    settings_ = RebalanceArgs.model_validate({"weights": {"networkCost": 1, "bandwidthBalance": 1}, **args})
    return rebalance(snapshot, settings_, CONFIG, history or History(), now, ceilings or {}, lambda p: {"cpu": 100})


def moved(result: Rebalance) -> list[tuple[str, str, str]]:
    return [(move.pod.name, move.source, move.target) for move in result.moves]


# ---- hand-derived ------------------------------------------------------------------------------------------


PAIR = [node("a1", "za"), node("a2", "za"), node("b1", "zb"), topology(["za", "zb"])]


def test_an_appgroup_split_across_zones_is_brought_onto_one_node() -> None:
    # front -> back, one pod each, in two zones: the pair costs 10 (ZONE_COST). The planner's layout puts both on
    # one node (cost 0); one move does it: the cost goes 10 -> 0, a gain of 10 in network cost. Neither pod asks
    # for bandwidth, so the imbalance does not change.
    snapshot = build_snapshot([*PAIR, appgroup("app", {"front": ["back"], "back": []}),
                               pod("front-0", "a1", "front", "app"), pod("back-0", "b1", "back", "app")])  # fmt: skip
    result = cycle(snapshot)
    assert len(result.moves) == 1
    move = result.moves[0]
    assert move.cost == (10, 0) and move.gain == 10 and move.appgroup == f"{NS}/app"
    assert {(move.pod.name, move.target)} <= {("front-0", "b1"), ("back-0", "a1")}
    cost = result.groups[f"{NS}/app"]
    assert (cost.before, cost.after, cost.planned) == (10, 0, 0)
    # the layout written on the AppGroup: both workloads on the move's target
    assert result.layouts[f"{NS}/app"] == {"front": {move.target: 1}, "back": {move.target: 1}}


def test_the_layout_written_is_where_the_cycles_moves_put_the_pods_not_the_goal() -> None:
    # front-0 on a1 (zone za), back-0 on b1 and back-1 on b2 (zone zb, full): two pairs at 10. The goal puts both
    # backs on a1 (cost 0), but a cycle moves one pod per workload: one back moves (20 -> 10). The layout the
    # release follows says where that move puts the pods (a1, and the other back where it is), not the goal's two
    # on a1: with the goal, the replacement could go to either deficit, and the move would miss.
    snapshot = build_snapshot([node("a1", "za"), node("b1", "zb", cpu="100m"), node("b2", "zb", cpu="100m"),
                               topology(["za", "zb"]), appgroup("app", {"front": ["back"], "back": []}),
                               pod("front-0", "a1", "front", "app"),
                               pod("back-0", "b1", "back", "app"), pod("back-1", "b2", "back", "app")])  # fmt: skip
    result = cycle(snapshot)
    [move] = result.moves
    assert move.pod.name.startswith("back-") and move.target == "a1" and move.cost == (20, 10)
    stays = "b2" if move.source == "b1" else "b1"
    assert result.layouts[f"{NS}/app"] == {"front": {"a1": 1}, "back": {"a1": 1, stays: 1}}


def test_moves_into_one_node_share_its_room_below_the_high_threshold() -> None:
    # hub on a1 depends on s1 and s2 in the other zone (b1, b2: full, 100m each); a1 has room for two 100m pods
    # below its high threshold (the ceiling 200): both move to a1, 20 -> 0 — each move's gain counted against the
    # cycle's state before either is made (not after the first took half the room).
    objects = [node("a1", "za"), node("b1", "zb", cpu="100m"), node("b2", "zb", cpu="100m"), topology(["za", "zb"]),
               appgroup("app", {"hub": ["s1", "s2"], "s1": [], "s2": []}), pod("hub-0", "a1", "hub", "app"),
               pod("s1-0", "b1", "s1", "app"), pod("s2-0", "b2", "s2", "app")]  # fmt: skip
    result = cycle(build_snapshot(objects), ceilings={"a1": {"cpu": 200}})
    assert sorted(moved(result)) == [("s1-0", "b1", "a1"), ("s2-0", "b2", "a1")]
    assert [move.gain for move in result.moves] == [10, 10]
    assert cycle(build_snapshot(objects), ceilings={"a1": {"cpu": 100}}).moves[0].target == "a1"  # room for one


def test_a_replacement_is_placed_as_its_template_not_as_the_pod_a_plan_released() -> None:
    # back-0 was released by a plan to b1 (a required affinity for b1 and the annotation): its replacement will
    # not carry them, so the rebalancer may still move it. b1 has room for back-0 alone: the only move there is.
    released = pod("back-0", "b1", "back", "app")
    released["metadata"]["annotations"] = {keys.PLANNED_NODE: "b1"}
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b1"]}]}
    released["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}  # fmt: skip
    group = appgroup("app", {"front": ["back"], "back": []})
    objects = [node("a1", "za"), node("b1", "zb", cpu="100m"), topology(["za", "zb"]), group,
               pod("front-0", "a1", "front", "app"), released]  # fmt: skip
    assert moved(cycle(build_snapshot(objects))) == [("back-0", "b1", "a1")]


def test_an_appgroup_not_released_by_plan_is_left_alone() -> None:
    snapshot = build_snapshot([*PAIR, appgroup("app", {"front": ["back"], "back": []}, plan=False),
                               pod("front-0", "a1", "front", "app"), pod("back-0", "b1", "back", "app")])  # fmt: skip
    assert cycle(snapshot).moves == []


def test_a_pod_asking_for_bandwidth_moves_where_the_scheduler_puts_it_when_free_bandwidth_evens_out() -> None:
    # Two 1G nodes; n1 holds two pods asking 300M egress each. Free, in 100M units (duplex: ingress and egress):
    # n1 (10, 4), n2 (10, 10): Σ free² = 100 + 16 + 100 + 100 = 316. One pod to n2: (10, 7), (10, 7): 298, a gain
    # of 18 (weight 1). The second move would give (10, 10), (10, 4): 316 again, no gain: one move only.
    objects = [node("n1", "z"), node("n2", "z"), pod("web-0", "n1", "web", egress="300M"),
               pod("web-1", "n1", "web2", egress="300M")]  # fmt: skip
    result = cycle(build_snapshot(objects))
    assert [(source, target) for _, source, target in moved(result)] == [("n1", "n2")]
    assert result.moves[0].gain == pytest.approx(18)
    assert result.imbalance == pytest.approx((316, 298))


def test_protected_pods_are_never_moved() -> None:
    # as above, but the pods cannot be evicted: a DaemonSet's, a bare pod, one with local storage
    daemon = pod("web-0", "n1", "web", egress="300M", owner="DaemonSet")
    bare = pod("web-1", "n1", "bare", egress="300M", owner="")
    local = pod("web-2", "n1", "web3", egress="300M")
    local["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    result = cycle(build_snapshot([node("n1", "z"), node("n2", "z"), daemon, bare, local]))
    assert result.moves == []


def test_a_workload_in_a_rollout_is_not_moved() -> None:
    # the same two pods of one Deployment, of two revisions (a rollout under way)
    objects = [node("n1", "z"), node("n2", "z"), pod("web-0", "n1", "web", egress="300M"),
               pod("web-1", "n1", "web", egress="300M", revision="h2")]  # fmt: skip
    assert cycle(build_snapshot(objects)).moves == []
    objects[-1] = pod("web-1", "n1", "web", egress="300M")
    assert len(cycle(build_snapshot(objects)).moves) == 1


def test_an_appgroup_whose_replacement_is_not_running_yet_is_waited_for_not_called_settled() -> None:
    # the split pair of the first test (a move gains 10), but back-0 is a replacement still Pending: the AppGroup is
    # skipped this cycle, and the note says so (a note of "no move gains" read as converged with a move left to make)
    objects = [*PAIR, appgroup("app", {"front": ["back"], "back": []}), pod("front-0", "a1", "front", "app"),
               pod("back-0", "b1", "back", "app")]  # fmt: skip
    objects[-1]["status"]["phase"] = "Pending"
    waiting = cycle(build_snapshot(objects))
    assert waiting.moves == [] and waiting.skipped == {f"{NS}/app": f"{NS}/Deployment/back: {NS}/back-0 is Pending"}
    assert waiting.note == f"skipped {NS}/app: {NS}/Deployment/back: {NS}/back-0 is Pending"
    objects[-1]["status"]["phase"] = "Running"
    assert len(cycle(build_snapshot(objects)).moves) == 1


def test_the_cycle_heads_for_the_target_its_moves_bring_lowest_not_the_cheapest_far_one() -> None:
    # front-0 + back-0 on a1, front-1 + back-1 on a2 (zone za): the pairs across a1/a2 cost 1 each, 2 in all. Two
    # targets of cost 0: every pod on b1 (zone zb, far: each pod's first move there puts it 10 from its partners)
    # and every pod on a1 (near: front-1 then back-1 to a1, 2 -> 2 -> 0). Toward b1 no prefix gains (the first move
    # alone: 2 - 1 - 0 + 10 + 10 = 21), so heading there the rebalancer would stop at 2; toward a1 the cycle ends at 0.
    group = appgroup("app", {"front": ["back"], "back": []})
    snapshot = build_snapshot([node("a1", "za"), node("a2", "za"), node("b1", "zb"), topology(["za", "zb"]), group,
                               pod("front-0", "a1", "front", "app"), pod("back-0", "a1", "back", "app"),
                               pod("front-1", "a2", "front", "app"), pod("back-1", "a2", "back", "app")])  # fmt: skip
    args = RebalanceArgs.model_validate({"weights": {"networkCost": 1, "bandwidthBalance": 0}})
    index = ClusterIndex.build(snapshot)
    state = Cycle(snapshot, args, CONFIG, History(), NOW, EvictionLimits(), {}, lambda p: {"cpu": 100},
                  Balance(index, CONFIG), 10)  # fmt: skip
    members = [p for p in snapshot.pods if p.labels.get(keys.APPGROUP_LABEL) == "app"]
    problem, current = afresh(snapshot, AppGroup.model_validate(group), members, CONFIG)
    engine = Search(problem, 0)
    on = {name: problem.nodes.index(name) for name in ("a1", "a2", "b1")}
    far, near = [on["b1"]] * len(current), [on["a1"]] * len(current)
    assert toward_best(state, problem, engine, current, [far]) == ([], [])
    chosen, gains = toward_best(state, problem, engine, current, [far, near])
    assert sorted((problem.pods[row].name, problem.nodes[n]) for row, n in chosen) == [
        ("back-1", "a1"),
        ("front-1", "a1"),
    ]
    assert gains == [2.0, 2.0]  # either move left out, the other alone ends at 2


def test_cooldown_budgets_and_moves_in_flight_hold() -> None:
    objects = [node("n1", "z"), node("n2", "z"), pod("web-0", "n1", "web", egress="300M"),
               pod("web-1", "n1", "web2", egress="300M")]  # fmt: skip
    snapshot = build_snapshot(objects)
    first = cycle(snapshot)
    assert len(first.moves) == 1
    history = History()
    move = first.moves[0]
    history.record(MoveRecord(move.pod.key, move.workload, NS, move.source, move.target, NOW, 0))
    # the same cluster again: the move has not landed (its pod is still there): nothing
    again = cycle(snapshot, history, NOW + 1)
    assert again.moves == [] and "in flight" in again.note
    # budgets: no move per cycle, or the hour's spent
    assert cycle(snapshot, maxMovesPerCycle=0).moves == []
    spent = History(recent=[NOW - 10])
    assert cycle(snapshot, spent, maxMovesPerHour=1).moves == []
    # a workload moved 5 minutes ago (cooldown 10 minutes) is not moved; the other one is
    cooled = History(moved={workload_of(Pod.parse(objects[2])): NOW - 300})
    assert [name for name, _, _ in moved(cycle(snapshot, cooled))] == ["web-1"]


def test_a_move_that_did_not_land_is_not_proposed_again() -> None:
    objects = [node("n1", "z"), node("n2", "z"), pod("web-0", "n1", "web", egress="300M"),
               pod("web-1", "n1", "web2", egress="300M")]  # fmt: skip
    first = cycle(build_snapshot(objects))
    move = first.moves[0]
    history = History()
    history.record(MoveRecord(move.pod.key, move.workload, NS, "n1", "n2", NOW, 0))
    # the replacement came back on n1 (the evicted pod is gone, the workload's new pod bound on n1): missed
    replaced = [o for o in objects if o["metadata"]["name"] != move.pod.name]
    replaced.append(pod(move.pod.name + "-new", "n1", move.workload.split("/")[2], egress="300M"))
    snapshot = build_snapshot(replaced)
    landed, missed = history.settle(snapshot, NOW + 60, 600)
    assert (landed, [m.target for m in missed]) == ([], ["n2"])
    later = cycle(snapshot, history, NOW + 3600)  # past the cooldown: still not to n2 for that workload
    assert all((m.workload, m.target) != (move.workload, "n2") for m in later.moves)


def test_a_move_never_takes_a_node_above_lownodeloads_high_threshold() -> None:
    objects = [node("n1", "z"), node("n2", "z"), pod("web-0", "n1", "web", egress="300M"),
               pod("web-1", "n1", "web2", egress="300M")]  # fmt: skip
    assert cycle(build_snapshot(objects), ceilings={"n2": {"cpu": 99}}).moves == []  # the pod uses 100
    assert len(cycle(build_snapshot(objects), ceilings={"n2": {"cpu": 100}}).moves) == 1


def test_the_release_follows_a_layout_until_it_expires() -> None:
    # a1 and a2 are alike for front-0's replacement (back-0 on b1 in the other zone: 10 either way); a layout
    # saying front on a2 sends it there until the layout's time, and the planner's own choice after.
    layout = Rebalancing({"front": {"a2": 1}}, until=NOW + 60).to_annotation()
    group = appgroup("app", {"front": ["back"], "back": []}, annotations={keys.REBALANCE: layout})
    pending = pod("front-1", "", "front", "app")
    objects = [node("a1", "za"), node("a2", "za"), node("b1", "zb", cpu="0"), topology(["za", "zb"]), group,
               pod("back-0", "b1", "back", "app"), pending]  # fmt: skip
    snapshot = build_snapshot(objects)
    parsed = snapshot.app_groups[0]
    assert layout_at(parsed, NOW) == {"front": {"a2": 1}} and layout_at(parsed, NOW + 60) is None
    index = ClusterIndex.build(snapshot)
    followed = plan_appgroup(index, parsed, CONFIG, layout=layout_at(parsed, NOW))
    assert [p.node for p in followed.pods] == ["a2"]
    free = plan_appgroup(index, parsed, CONFIG, layout=None)
    assert [p.node for p in free.pods] in (["a1"], ["a2"])
    # once a2 holds front's one pod of the layout, there is no deficit: a further pod is placed freely
    full = [*objects[:-1], pod("front-0", "a2", "front", "app"), pending]
    assert plan_appgroup(ClusterIndex.build(build_snapshot(full)), parsed, CONFIG,
                         layout=layout_at(parsed, NOW)).pods[0].node in ("a1", "a2")  # fmt: skip


def test_a_replacement_waits_for_the_terminating_pod_that_holds_its_layout_node() -> None:
    # The layout sends front's replacement to a2 (100m): a swap moved back-1 away from there, and back-1 is still
    # terminating, so a2 has no room now (100m of 100m requested) and will have once it is gone. Planned now,
    # front-1 would land elsewhere and the move miss: it waits (looked at again in VACATE_SECONDS, 0.5 s), then is
    # planned on a2 once back-1 is gone. A pod that is not leaving (back-1 Running) is no reason to wait, nor is
    # any pod after the layout's time.
    until = NOW + 60
    layout = Rebalancing({"front": {"a2": 1}}, until=until).to_annotation()
    group = appgroup("app", {"front": ["back"], "back": []}, annotations={keys.REBALANCE: layout})
    pending = pod("front-1", "", "front", "app")
    pending["spec"]["schedulingGates"] = [{"name": keys.TOPOLOGY_ORDER_GATE}]
    leaving = pod("back-1", "a2", "back", "app")
    leaving["metadata"]["deletionTimestamp"] = "2026-11-29T20:00:00Z"
    base = [node("a1", "za"), node("a2", "za", cpu="100m"), node("b1", "zb"), topology(["za", "zb"]), group,
            pod("back-0", "b1", "back", "app"), pending]  # fmt: skip
    arrived = {(NS, "front-1"): NOW - 10}

    def decide(objects: list[dict[str, Any]], now: float) -> Any:
        snapshot = build_snapshot(objects)
        members = [p for p in snapshot.pods if p.labels.get(keys.APPGROUP_LABEL) == "app"]
        return release_by_plan(snapshot.app_groups[0], members, plan_view(snapshot), CONFIG, arrived, now, 600)

    held = decide([*base, leaving], NOW)
    assert (held.release, held.plan, held.next_deadline) == ((), None, NOW + VACATE_SECONDS)
    assert decide([*base, leaving], until - 0.1).next_deadline == until  # never past the layout's time
    gone = decide(base, NOW)
    assert [(item.pod.name, item.node) for item in gone.release] == [("front-1", "a2")]
    staying = {**leaving, "metadata": {k: v for k, v in leaving["metadata"].items() if k != "deletionTimestamp"}}
    assert decide([*base, staying], NOW).plan is not None  # a2 stays full: planned now (as before), not held
    late = decide([*base, leaving], until)
    assert late.plan is not None and [item.node for item in late.release] != ["a2"]


# ---- hostile policies ----------------------------------------------------------------------------------------


def policy(rebalance_args: Any, enabled: tuple[str, ...] = ("LowNodeLoad", "NetworkRebalance")) -> dict[str, Any]:
    return {
        "kind": "DeschedulerConfiguration",
        "profiles": [{
            "name": "p",
            "plugins": {"balance": {"enabled": [{"name": name} for name in enabled]}},
            "pluginConfig": [
                {"name": "LowNodeLoad", "args": {"lowThresholds": {"cpu": 20}, "highThresholds": {"cpu": 80}}},
                {"name": "NetworkRebalance", "args": rebalance_args},
            ],
        }],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("args", "path", "enabled"),
    [
        ({"cooldown": "soon"}, "profiles[0].pluginConfig[1].args.cooldown", None),
        ({"cooldown": -5}, "profiles[0].pluginConfig[1].args.cooldown", None),
        ({"minGainPerMove": 0}, "profiles[0].pluginConfig[1].args.minGainPerMove", None),
        ({"weights": {"networkCost": -1}}, "profiles[0].pluginConfig[1].args.weights.networkCost", None),
        ({"maxMovesPerCycle": "ten"}, "profiles[0].pluginConfig[1].args.maxMovesPerCycle", None),
        ({"planBudget": "1h"}, "profiles[0].pluginConfig[1].args.planBudgetSeconds", None),
        ({"cooldownSeconds": 5}, "profiles[0].pluginConfig[1].args.cooldownSeconds", None),
        ({"surprise": 1}, "profiles[0].pluginConfig[1].args.surprise", None),
        ("all", "profiles[0].pluginConfig[1].args", None),
        ({}, "profiles[0].plugins.balance.enabled", ("LowNodeLoad",)),
    ],
)
def test_hostile_rebalancer_arguments_get_one_error_naming_the_field(
    args: Any, path: str, enabled: tuple[str, ...] | None
) -> None:
    with pytest.raises(FieldError) as caught:
        parse_policy(policy(args, enabled) if enabled else policy(args))
    assert caught.value.path == path


def test_the_rebalancer_arguments_and_their_defaults() -> None:
    parsed = parse_policy(policy({"cooldown": "1m30s", "layoutTTL": "5m", "maxMovesPerHour": 7}))
    assert parsed.rebalance is not None
    assert (parsed.rebalance.cooldown_seconds, parsed.rebalance.layout_seconds) == (90, 300)
    assert (parsed.rebalance.max_moves_per_hour, parsed.rebalance.max_moves_per_cycle) == (7, 10)
    without = policy({})
    without["profiles"][0]["pluginConfig"].pop()
    assert parse_policy(without).rebalance is None


# ---- properties over random clusters ---------------------------------------------------------------------------


def random_cluster(seed: int) -> tuple[Snapshot, dict[str, tuple[str, int]]]:
    """Nodes in 3 zones; an AppGroup (plan mode) of a random DAG with 1-3 pods per workload placed at random
    where they fit; Deployments asking bandwidth; a DaemonSet pod and a bare pod on every node. Returns the
    snapshot and, per AppGroup pod, its workload and its node's zone index."""
    rng = random.Random(seed)
    zones = ["z0", "z1", "z2"]
    nodes = [node(f"n{i}", zones[i % 3], cpu=str(rng.choice((1, 2, 4))), bandwidth=rng.choice(("1G", "2G")))
             for i in range(rng.randint(3, 7))]  # fmt: skip
    names = [n["metadata"]["name"] for n in nodes]
    cpu_left = {n["metadata"]["name"]: int(n["status"]["allocatable"]["cpu"]) * 1000 for n in nodes}
    bw_left = {n["metadata"]["name"]: (1 if n["metadata"]["annotations"][keys.NODE_BANDWIDTH_KOORDINATOR] == "1G"
                                       else 2) * 1000 for n in nodes}  # fmt: skip
    workloads = [f"w{i}" for i in range(rng.randint(2, 5))]
    graph = {w: [d for d in workloads[i + 1 :] if rng.random() < 0.5] for i, w in enumerate(workloads)}
    objects: list[dict[str, Any]] = [*nodes, topology(zones), appgroup("app", graph)]

    def somewhere(cpu: int, egress: int) -> str:
        fits = [n for n in names if cpu_left[n] >= cpu and bw_left[n] >= egress]
        chosen: str = rng.choice(fits)
        cpu_left[chosen] -= cpu
        bw_left[chosen] -= egress
        return chosen

    for w in workloads:
        for r in range(rng.randint(1, 3)):
            objects.append(pod(f"{w}-{r}", somewhere(100, 0), w, "app"))
    for d in range(rng.randint(0, 4)):
        for r in range(rng.randint(1, 2)):
            egress = rng.choice((100, 200, 300))
            objects.append(pod(f"bw{d}-{r}", somewhere(100, egress), f"bw{d}", egress=f"{egress}M"))
    for n in names:
        objects.append(pod(f"ds-{n}", n, "agent", owner="DaemonSet"))
        objects.append(pod(f"bare-{n}", n, "bare", owner=""))
    return build_snapshot(objects), {}


def objective(snapshot: Snapshot, balance_weight: float) -> float:
    """The objective recomputed from the pods' places: every dependency pair of the AppGroup at 0 (one node),
    1 (one zone) or ZONE_COST, plus Σ over nodes and directions of (free bandwidth / 100M)² (egress only here:
    ingress stays full, a constant)."""
    group = snapshot.app_groups[0]
    where = {p.key: p.node_name for p in snapshot.pods}
    zone = {n.name: n.zone for n in snapshot.nodes}
    by_workload: dict[str, list[str]] = {}
    for p in snapshot.pods:
        if p.labels.get(keys.APPGROUP_LABEL) == "app":
            by_workload.setdefault(p.labels[keys.APPGROUP_WORKLOAD_LABEL], []).append(where[p.key])
    cost = 0
    for entry in group.spec.workloads:
        for dependency in entry.dependencies or ():
            for a in by_workload.get(entry.workload.selector, []):
                for b in by_workload.get(dependency.workload.selector, []):
                    cost += 0 if a == b else 1 if zone[a] == zone[b] else ZONE_COST
    balance = 0.0
    for n in snapshot.nodes:
        capacity = 10 if n.annotations[keys.NODE_BANDWIDTH_KOORDINATOR] == "1G" else 20
        used = sum(int(p.annotations.get(keys.EGRESS_BANDWIDTH, "0M")[:-1]) / 100
                   for p in snapshot.pods if p.node_name == n.name)  # fmt: skip
        balance += capacity**2 + (capacity - used) ** 2
    return cost + balance_weight * balance


def applied(snapshot: Snapshot, moves: list[Move]) -> Snapshot:
    targets = {move.pod.key: move.target for move in moves}
    pods = []
    for p in snapshot.pods:
        if p.key in targets:
            spec = {**p.raw["spec"], "nodeName": targets[p.key]}
            p = Pod.parse({**p.raw, "spec": spec})  # noqa: PLW2901
        pods.append(p)
    return replace(snapshot, pods=tuple(pods))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), balance=st.sampled_from((0.0, 0.1, 1.0)), per_cycle=st.integers(0, 6),
       per_node=st.sampled_from((None, 1, 2)))  # fmt: skip
def test_a_cycle_never_raises_the_objective_breaks_a_filter_exceeds_a_budget_or_picks_a_protected_pod(
    seed: int, balance: float, per_cycle: int, per_node: int | None
) -> None:
    from operators.engine.descheduling.limits import EvictionLimits

    snapshot, _ = random_cluster(seed)
    args = RebalanceArgs.model_validate(
        {"weights": {"networkCost": 1, "bandwidthBalance": balance}, "maxMovesPerCycle": per_cycle}
    )
    limits = EvictionLimits(per_node=per_node)
    result = rebalance(snapshot, args, CONFIG, History(), NOW, {}, lambda p: {}, limits)
    after = applied(snapshot, result.moves)
    assert objective(after, balance) <= objective(snapshot, balance) + 1e-9
    if result.moves:
        assert objective(snapshot, balance) - objective(after, balance) >= args.min_gain_per_cycle - 1e-9
    assert len(result.moves) <= per_cycle
    if per_node is not None:
        sources = [move.source for move in result.moves]
        assert all(sources.count(s) <= per_node for s in sources)
    assert len({move.workload for move in result.moves}) == len(result.moves)  # one per workload
    for move in result.moves:
        assert move.pod.owner_kinds == ("ReplicaSet",)  # never the DaemonSet's or the bare pods
    # every filter on the cluster as moved: placement, resources, bandwidth capacity (egress, 1G = 10 units)
    held = requested_on_nodes(p for p in after.pods if p.node_name)
    for n in after.nodes:
        requested, count = held.get(n.name, ({}, 0))
        assert not insufficient({}, n, requested, count)
        capacity = 10 if n.annotations[keys.NODE_BANDWIDTH_KOORDINATOR] == "1G" else 20
        used = sum(int(p.annotations.get(keys.EGRESS_BANDWIDTH, "0M")[:-1]) / 100
                   for p in after.pods if p.node_name == n.name)  # fmt: skip
        assert used <= capacity
    for move in result.moves:
        assert not placement_reasons(move.pod, after.node_by_name[move.target])
    # a second cycle on the same (unchanged) cluster, the moves recorded: nothing
    history = History()
    for move in result.moves:
        history.record(MoveRecord(move.pod.key, move.workload, NS, move.source, move.target, NOW, 0))
    again = rebalance(snapshot, args, CONFIG, history, NOW + 1, {}, lambda p: {}, EvictionLimits(per_node=per_node))
    assert again.moves == []


def test_the_models_of_this_module_are_the_api_s() -> None:
    # the builders above make objects the API accepts (a typo in them would make every property vacuous)
    snapshot, _ = random_cluster(1)
    assert not snapshot.warnings
    assert isinstance(snapshot.app_groups[0], AppGroup)
    assert isinstance(build_snapshot([topology(["za"])]).network_topologies[0], NetworkTopology)
    assert len(snapshot.pods) > 4


def test_lownodeload_leaves_the_pods_the_rebalancer_moved_within_the_cooldown() -> None:
    # n1 is above LowNodeLoad's cpu threshold (3 of 4 cpus, high 50 %), n2 empty; one eviction brings it down.
    # LowNodeLoad by itself takes api-0; but api's pod on n1 arrived there by a rebalancer move 5 minutes ago
    # (cooldown 10): LowNodeLoad takes web's instead, and api's again once the cooldown is over
    import datetime

    from operators.engine.descheduling.lownodeload import plan as lownodeload_plan

    objects = [node("n1", "z"), node("n2", "z"), pod("web-0", "n1", "web", cpu="1500m"),
               pod("api-0", "n1", "api", cpu="1500m")]  # fmt: skip
    snapshot = build_snapshot(objects)
    document = policy({})
    document["profiles"][0]["pluginConfig"][0]["args"] = {"lowThresholds": {"cpu": 20}, "highThresholds": {"cpu": 50}}
    parsed = parse_policy(document)
    history = History()
    history.record(MoveRecord(f"{NS}/api-old", f"{NS}/Deployment/api", NS, "n2", "n1", NOW - 300, 0))
    now = datetime.datetime.fromtimestamp(NOW, datetime.UTC)
    assert [e.pod.name for e in lownodeload_plan(snapshot, parsed, now).evictions] == ["api-0"]  # by itself
    protected = EvictionPlanner(snapshot, parsed, now, protected=lambda p: history.protects(p, 600, NOW))
    assert [e.pod.name for e in carried_out(protected).evictions] == ["web-0"]
    later = EvictionPlanner(snapshot, parsed, now, protected=lambda p: history.protects(p, 600, NOW + 301))
    assert [e.pod.name for e in carried_out(later).evictions] == ["api-0"]
