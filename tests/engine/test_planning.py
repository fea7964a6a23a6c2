"""The placement planner (engine/planning): hand-derived plans, and properties over random clusters — every plan
passes kube-scheduler's filters on its nodes, bound pods stay, the search never ends worse than its greedy start,
the same seed gives the same plan, and small instances land within 1.10x of the exact optimum."""

from __future__ import annotations

import random
import subprocess
import sys
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from operators.api import keys
from operators.api.config.scheduler import FILTER_PLUGINS, NETWORK_OVERHEAD, RESOURCES_FIT
from operators.engine.cluster.fit import placement_reasons
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import Snapshot, build_snapshot
from operators.engine.planning.bound import lower_bound
from operators.engine.planning.packing import packing_bound
from operators.engine.planning.plan import plan_appgroup
from operators.engine.planning.problem import build_problem
from operators.engine.planning.search import search
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.schedule import schedule
from operators.engine.simulation import ordered
from tests.support.planning import CONFIG, NAMESPACE, group_problem, node, placed, plan_of, pod, topology


def test_a_dependent_joins_what_it_depends_on_where_it_can() -> None:
    # a-0 runs on n1; b-0 depends... the edge a -> b: b-0 beside a-0 costs 0 on n1, 1 on n2 (same zone), 5 on n3.
    cluster = [node("n1", "za"), node("n2", "za"), node("n3", "zb"), topology(5)]
    bound = [pod("a-0", "a", on="n1")]
    assert placed(plan_of([*cluster, *bound, pod("b-0", "b")], {"a": ["b"], "b": []})) == {"b-0": "n1"}
    full = [node("n1", "za", pods="1"), *cluster[1:]]  # n1 holds a-0 and nothing more: its zone, cost 1
    plan = plan_of([*full, *bound, pod("b-0", "b")], {"a": ["b"], "b": []})
    assert placed(plan) == {"b-0": "n2"} and plan.cost.cost == 1
    tainted = [full[0], node("n2", "za", taint=True), cluster[2], cluster[3]]  # only the other zone is left: 5
    plan = plan_of([*tainted, *bound, pod("b-0", "b")], {"a": ["b"], "b": []})
    assert placed(plan) == {"b-0": "n3"} and plan.cost.cost == 5
    assert [(e.source, e.target, e.pairs, e.cost) for e in plan.edges] == [("a", "b", 1, 5)]


def test_max_network_cost_is_met_where_it_can_be() -> None:
    # a -> b with maxNetworkCost 1: two a pods bound in different zones (n1 in za, n2 in zb, zone pairs 5), two
    # pending b pods of 3 cpu each (a node has 4: one b per node).
    cluster = [node("n1", "za"), node("n2", "zb"), topology(5)]
    bound = [pod("a-0", "a", on="n1"), pod("a-1", "a", on="n2")]
    pending = [pod("b-0", "b", cpu="3"), pod("b-1", "b", cpu="3")]
    plan = plan_of([*cluster, *bound, *pending], {"a": ["b"], "b": []}, max_cost=1)
    # whatever the split, 4 pairs: one b per node gives 0 + 5 + 5 + 0 = 10 with 2 pairs over the limit; both b on
    # one node cannot fit (3 + 3 > 4 cpu). So the optimum is 10, 2 over.
    assert sorted(placed(plan).values()) == ["n1", "n2"]
    assert (plan.cost.cost, plan.cost.over_limit) == (10, 2)


def test_a_pod_that_fits_nowhere_is_reported_with_why() -> None:
    cluster = [node("n1", "za"), node("n2", "zb", taint=True), topology(5)]
    plan = plan_of([*cluster, pod("a-0", "a"), pod("b-0", "b", cpu="64")], {"a": ["b"], "b": []})
    assert placed(plan) == {"a-0": "n1"}
    assert plan.unplaceable == {
        # kube-scheduler's FailedScheduling words: per reason its count, sorted as strings
        f"{NAMESPACE}/b-0": "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s)."
    }


def test_the_solver_free_bound_counts_the_pairs_no_plan_can_keep_together() -> None:
    """a -> b, two pods each: every a pod paired with every b pod (a square of 4 pairs). Two nodes of one zone
    taking 2 pods each: whatever the plan, a node holds at most 2 of the 4 pods, so at least 2 pairs are split,
    each at the zone's cost 1 — the square's algebraic connectivity is 2, and ½ x 2 x (4 - 2) = 2, which the
    plan reaches. With a bound pod instead: b-0's cheapest place next to a-0 (bound on a full n1) is n2 in its
    zone, cost 1."""
    square = [node("n1", "za", pods="2"), node("n2", "za", pods="2"), topology(5)]
    pending = [pod("a-0", "a"), pod("a-1", "a"), pod("b-0", "b"), pod("b-1", "b")]
    assert lower_bound(group_problem([*square, *pending], ordered.appgroup("pair", {"a": ["b"], "b": []}))) == 2.0
    plan = plan_of([*square, *pending], {"a": ["b"], "b": []}, bound=True)
    assert (plan.cost.cost, plan.reference and plan.reference.bound, plan.ratio) == (2, 2.0, 1.0)
    roomy = [node("n1", "za"), node("n2", "za"), topology(5)]  # 110 pods each: all four together, no bound
    assert plan_of([*roomy, *pending], {"a": ["b"], "b": []}, bound=True).reference.bound == 0.0  # type: ignore[union-attr]
    greedy = [pod("a-0", "a"), pod("b-0", "b")]  # 600M each into nodes of 1G: one per node, the pair split
    for raw in greedy:
        raw["metadata"]["annotations"] = {"kubernetes.io/ingress-bandwidth": "600M"}
    plan = plan_of([*roomy, *greedy], {"a": ["b"], "b": []}, bound=True)
    assert (plan.cost.cost, plan.reference and plan.reference.bound) == (1, 1.0)
    beside = [node("n1", "za", pods="1"), node("n2", "za"), node("n3", "zb"), topology(5), pod("a-0", "a", on="n1")]
    plan = plan_of([*beside, pod("b-0", "b")], {"a": ["b"], "b": []}, bound=True)
    assert (plan.cost.cost, plan.reference and plan.reference.bound) == (1, 1.0)


def test_the_plan_cli_prints_the_placement_and_refuses_an_unknown_appgroup(tmp_path: Any) -> None:
    import json

    import yaml
    from click.testing import CliRunner

    from operators.cli.main import cli

    group = ordered.appgroup("pair", {"a": ["b"], "b": []})
    objects = [node("n1", "za"), node("n2", "zb"), topology(5), pod("a-0", "a", on="n2"), pod("b-0", "b")]
    objects.append(group.model_dump(mode="json", by_alias=True, exclude_none=True))
    path = tmp_path / "snapshot.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    result = CliRunner().invoke(cli, ["plan", "-f", str(path), "--appgroup", f"{NAMESPACE}/pair", "-o", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert [(p["pod"], p["node"]) for p in document["placements"]] == [(f"{NAMESPACE}/b-0", "n2")]
    assert document["edges"] == [
        {"source": "a", "target": "b", "pairs": 1, "cost": 0, "meanCost": 0.0, "pairsOverMaxNetworkCost": 0}
    ]
    exact = subprocess.run(  # a process of its own: HiGHS writes to file descriptor 1, not to sys.stdout
        [sys.executable, "-m", "operators.cli", "plan", "-f", str(path), "--appgroup", f"{NAMESPACE}/pair",
         "--exact", "10", "-o", "json"], capture_output=True, text=True, check=True,
    )  # fmt: skip
    reference = json.loads(exact.stdout)["reference"]
    assert (reference["optimal"], reference["objective"], reference["ratio"]) == (True, 0, 1.0)
    result = CliRunner().invoke(cli, ["plan", "-f", str(path), "--appgroup", f"{NAMESPACE}/nope"])
    assert result.exit_code == 1
    assert f"--appgroup {NAMESPACE}/nope: not an AppGroup of the snapshot (it has: {NAMESPACE}/pair)" in result.output


# ---- properties over random clusters ---------------------------------------------------------------------------


def random_instance(seed: int, workloads: int, replicas: int, bound: float) -> tuple[Snapshot, Any]:
    """The zoned cluster (2 regions x 2 zones x 4 nodes) with random pod limits and taints, a random DAG, a share
    of its pods already bound on random nodes."""
    rng = random.Random(seed)
    cluster = []
    for original in ordered.zoned_cluster():
        raw = dict(original)
        if raw["kind"] == "Node":
            cpu, limit = rng.choice((1, 2, 16)), rng.choice((1, 2, 3, 110))
            raw["status"] = {"allocatable": {"cpu": str(cpu), "memory": "64Gi", "pods": str(limit)}}
            if rng.random() < 0.2:
                raw["spec"] = {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}
        cluster.append(raw)
    scenario = ordered.app_scenario("dag", ordered.random_dag(workloads, 0.4, rng), replicas, tuple(cluster))
    names = [raw["metadata"]["name"] for raw in cluster if raw["kind"] == "Node"]
    pods = []
    for member in scenario.pods:
        raw = {**member.raw, "spec": {**member.raw["spec"], "schedulingGates": []}}
        raw["spec"]["containers"] = [{"name": "c", "resources": {"requests": {"cpu": rng.choice(("100m", "500m"))}}}]
        if rng.random() < bound:
            raw["spec"]["nodeName"] = rng.choice(names)
            raw["status"] = {"phase": "Running"}
        pods.append(Pod.parse(raw))
    snapshot = replace(build_snapshot(cluster), app_groups=(scenario.group,), pods=tuple(pods))
    return snapshot, scenario.group


INSTANCES = st.tuples(st.integers(0, 10**6), st.integers(2, 6), st.integers(1, 4), st.sampled_from((0.0, 0.3)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(INSTANCES)
def test_every_plan_passes_the_filters_and_never_moves_a_bound_pod(instance: tuple[int, int, int, float]) -> None:
    snapshot, group = random_instance(*instance)
    plan = plan_appgroup(ClusterIndex.build(snapshot), group, CONFIG, seed=instance[0])
    bound = {pod.key: pod.node_name for pod in snapshot.pods if pod.node_name}
    assert not set(bound) & {p.pod for p in plan.pods}  # a bound pod is never in the plan
    pending = {pod.key for pod in snapshot.pods if not pod.node_name}
    assert {p.pod for p in plan.pods} | set(plan.unplaceable) == pending  # every pending pod: placed or why not
    # bind the plan's pods one by one; each passes kube-scheduler's filters on its node given those before it
    config = replace(CONFIG, filters=(*[f for f in FILTER_PLUGINS if f != NETWORK_OVERHEAD], RESOURCES_FIT))
    by_key = {pod.key: pod for pod in snapshot.pods}
    pods = [pod for pod in snapshot.pods if pod.node_name]
    nodes = snapshot.node_by_name
    for planned in plan.pods:
        member = by_key[planned.pod]
        assert placement_reasons(member, nodes[planned.node]) == [], planned
        index = ClusterIndex.build(replace(snapshot, pods=tuple(pods)))
        failed = schedule(member, index, config, stages=("filter",), detail=False).failed
        assert planned.node not in failed, (planned, failed.get(planned.node))
        pods.append(Pod.parse({**member.raw, "spec": {**member.raw["spec"], "nodeName": planned.node}}))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(INSTANCES)
def test_the_search_never_ends_worse_than_its_greedy_start_nor_the_baseline_and_a_seed_gives_one_plan(
    instance: tuple[int, int, int, float],
) -> None:
    snapshot, group = random_instance(*instance)
    problem = build_problem(ClusterIndex.build(snapshot), group, CONFIG)
    first = search(problem, seed=instance[0], budget_seconds=60.0)
    assert first.converged
    assert first.cost.objective <= first.greedy.objective
    # nor worse than the field's smallest-domain placement, one of its starts (absent when greedy is optimal)
    assert first.baseline is None or first.cost.objective <= first.baseline.objective
    again = search(problem, seed=instance[0], budget_seconds=60.0)
    assert again.assignment.tolist() == first.assignment.tolist()


def test_the_plan_beats_dependencies_first_release_on_the_example_scenarios() -> None:
    """On the simulated cluster, the plan's mean cost per dependency pair is no higher than releasing by the gates
    (dependencies first, each pod scheduled by the engine's kube-scheduler)."""
    for scenario in (ordered.boutique(3), ordered.app_scenario("dag", ordered.random_dag(10, 0.3, random.Random(3)),
                                                                 3, ordered.zoned_cluster())):  # fmt: skip
        report = ordered.compare(scenario, seeds=2)
        assert report["plan"]["unscheduled"] == 0
        assert report["plan"]["meanCost"] <= report["gates"]["meanCost"], report
        assert report["plan"]["p90Cost"] <= report["gates"]["p90Cost"], report


def test_half_a_second_reaches_the_proven_optimum_of_the_benchmarks_random_dag() -> None:
    # bench_plan's random-dag instance (12 workloads x 3 pods on the 16-node zoned cluster): HiGHS proves the
    # optimum 48 in 15 s (docs/figures/bench_plan.json, "reference objective"). With the work model calibrated
    # (moves.py: what each step costs, measured), 500 ms reach it on seeds 0-2 — what "100 ms" did before, when
    # the model charged for a fifth of the work (0.66-0.82 s of CPU); the default 100 ms stays within 1.25x of it.
    scenario = ordered.app_scenario("dag", ordered.random_dag(12, 0.3, random.Random(3)), 3, ordered.zoned_cluster())
    cluster = build_snapshot(list(scenario.cluster))
    snapshot = replace(cluster, app_groups=(scenario.group,), pods=(*cluster.pods, *scenario.pods))
    for seed in range(3):
        index = ClusterIndex.build(snapshot)
        assert plan_appgroup(index, scenario.group, CONFIG, seed, 0.5).cost.objective == 48, seed
        assert plan_appgroup(index, scenario.group, CONFIG, seed).cost.objective <= 60, seed


highspy = pytest.importorskip("highspy")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(st.tuples(st.integers(0, 10**6), st.integers(2, 4), st.integers(1, 2), st.sampled_from((0.0, 0.3))))
@example((84383, 4, 2, 0.3))  # the group must leave a region whose single nodes cannot hold it all: 4 pairs above
# maxNetworkCost where the optimum has 2 (found by CI; the group moves now spread over a region, not only a zone)
def test_small_instances_are_within_ten_percent_of_the_exact_optimum(instance: tuple[int, int, int, float]) -> None:
    snapshot, group = random_instance(*instance)
    plan = plan_appgroup(ClusterIndex.build(snapshot), group, CONFIG, seed=instance[0], exact_seconds=60)
    assert plan.reference is not None and plan.reference.optimal, plan.reference
    assert plan.reference.objective is not None and plan.cost.objective >= plan.reference.objective
    assert plan.cost.objective <= 1.10 * plan.reference.objective + 1e-9, (plan.cost, plan.reference)
    # the solver-free bound never exceeds the optimum, nor the packing bound a plan that places every pod
    problem = build_problem(ClusterIndex.build(snapshot), group, CONFIG)
    assert lower_bound(problem) <= plan.reference.objective + 1e-6
    packed = packing_bound(problem, 30)
    if packed is not None:
        assert packed.cost <= plan.reference.objective + 1e-6, packed
        assert plan.cost.unplaced or packed.cost <= plan.cost.cost, (packed, plan.cost)


def test_explain_appgroup_shows_planned_against_actual(tmp_path: Any) -> None:
    import json

    import yaml
    from click.testing import CliRunner

    from operators.cli.main import cli

    group = ordered.appgroup("pair", {"a": ["b"], "b": []})
    deviated = pod("b-0", "b", on="n1")  # planned beside a-0 on n2 (cost 0), bound on n1 in the other zone (5)
    deviated["metadata"]["annotations"] = {keys.PLANNED_NODE: "n2"}
    objects = [node("n1", "za"), node("n2", "zb"), topology(5), pod("a-0", "a", on="n2"), deviated]
    objects.append(group.model_dump(mode="json", by_alias=True, exclude_none=True))
    path = tmp_path / "snapshot.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    config = tmp_path / "config.yaml"
    overhead = {"namespaces": [NAMESPACE], "networkTopologyName": ordered.TOPOLOGY}
    kind = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
    profiles = [{"pluginConfig": [{"name": "NetworkOverhead", "args": overhead}]}]
    config.write_text(yaml.safe_dump({**kind, "profiles": profiles}))
    args = ["explain", "appgroup", f"{NAMESPACE}/pair", "-f", str(path), "--config", str(config), "-o", "json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert [(e["meanCost"], e["plannedMeanCost"]) for e in document["edges"]] == [(5.0, 0.0)]
    assert (document["plan"]["planned"], document["plan"]["onPlan"], document["plan"]["offPlan"]) == (1, 0, 1)


def test_a_release_narrows_every_required_term_or_adds_a_preferred_one() -> None:
    from operators.engine.planning.release import release_patch

    raw = pod("b-0", "b")
    raw["spec"]["schedulingGates"] = [{"name": keys.TOPOLOGY_ORDER_GATE}, {"name": "other"}]
    term = {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}
    other = {"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}
    required = {"nodeSelectorTerms": [term, {"matchFields": [other]}]}
    raw["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    member = Pod.parse(raw)
    name = {"key": "metadata.name", "operator": "In", "values": ["n2"]}
    patch = release_patch(member, "n2")
    assert patch[:2] == [
        {"op": "test", "path": "/spec/schedulingGates",
         "value": [{"name": keys.TOPOLOGY_ORDER_GATE}, {"name": "other"}]},
        {"op": "replace", "path": "/spec/schedulingGates", "value": [{"name": "other"}]},
    ]  # fmt: skip
    assert patch[2] == {"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {**term, "matchFields": [name]},
            {"matchFields": [other, name]}]}}}}  # fmt: skip
    assert patch[3] == {"op": "add", "path": "/metadata/annotations", "value": {keys.PLANNED_NODE: "n2"}}
    preferred = release_patch(member, "n2", "preferred")[2]["value"]["nodeAffinity"]
    assert preferred["preferredDuringSchedulingIgnoredDuringExecution"] == [
        {"weight": 100, "preference": {"matchFields": [name]}}
    ]
    assert preferred["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0] == term  # untouched
    assert release_patch(member, None) == patch[:2]  # released without a place: the gate only


def test_a_required_affinity_on_the_node_name_is_a_filter_as_kube_scheduler_reads_it() -> None:
    """matchFields on metadata.name (what a plan's release adds): the node named, and no other, passes NodeAffinity;
    with a matchExpressions term beside it in one term, both must hold."""
    raw = pod("b-0", "b")
    name = {"key": "metadata.name", "operator": "In", "values": ["n2"]}
    raw["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [name]}]}}}  # fmt: skip
    member = Pod.parse(raw)
    nodes = build_snapshot([node("n1", "za"), node("n2", "za")]).nodes
    assert [bool(placement_reasons(member, n)) for n in nodes] == [True, False]
    both = {"matchFields": [name], "matchExpressions": [{"key": keys.ZONE_LABEL, "operator": "In", "values": ["zb"]}]}
    raw["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] = [
        both
    ]
    assert all(placement_reasons(Pod.parse(raw), n) for n in nodes)


def test_the_first_plan_waits_for_its_window_and_later_pods_only_for_a_burst() -> None:
    """Gated pods of a group nothing of which is placed wait until none arrived for the window (100 ms here, a → b
    with b not arrived yet), at most GATHER_SECONDS; once a pod of the group is placed (bound, or released by a
    plan), a newcomer is planned FOLLOW_SECONDS (10 ms) after it arrived."""
    from operators.engine.planning.release import FOLLOW_SECONDS, IN_PLAN, plan_view, release_by_plan

    def gated(name: str, workload: str) -> Pod:
        raw = pod(name, workload)
        raw["spec"]["schedulingGates"] = [{"name": keys.TOPOLOGY_ORDER_GATE}]
        raw["metadata"]["creationTimestamp"] = "2026-11-25T12:00:00Z"
        return Pod.parse(raw)

    group = ordered.appgroup("pair", {"a": ["b"], "b": []})
    cluster = replace(build_snapshot([node("n1", "za"), topology(5)]), app_groups=(group,))
    first = gated("a-0", "a")
    created = first.created
    assert created is not None
    arrived = {(NAMESPACE, "a-0"): created + 1.0}

    def decide(members: list[Pod], now: float, seen: dict[tuple[str, str], float]) -> Any:
        index = plan_view(replace(cluster, pods=tuple(members)))
        return release_by_plan(group, members, index, CONFIG, seen, created + now, 300.0, window=0.1)

    waiting = decide([first], 1.05, arrived)
    assert (waiting.release, waiting.next_deadline) == ((), created + 1.1)  # b not here yet: the whole window
    assert [(r.pod.name, r.node, r.reason) for r in decide([first], 1.1, arrived).release] == [("a-0", "n1", IN_PLAN)]
    placed_a = Pod.parse({**pod("a-0", "a", on="n1"), "metadata": first.raw["metadata"]})
    newcomer = gated("b-0", "b")
    seen = {(NAMESPACE, "b-0"): created + 2.0}
    assert FOLLOW_SECONDS == 0.01
    assert decide([placed_a, newcomer], 2.005, seen).next_deadline == created + 2.01  # not the window's 2.1
    assert [(r.pod.name, r.node) for r in decide([placed_a, newcomer], 2.01, seen).release] == [("b-0", "n1")]
    # nothing placed yet and pods still arriving (a-1 80 ms after a-0): the window runs from the last arrival
    more = {**arrived, (NAMESPACE, "a-1"): created + 1.08}
    burst = [first, gated("a-1", "a")]
    assert decide(burst, 1.15, more).release == ()
    assert decide(burst, 1.15, more).next_deadline == pytest.approx(created + 1.18)
    assert sorted(r.pod.name for r in decide(burst, 1.18, more).release) == ["a-0", "a-1"]
    # ... at most GATHER_SECONDS (30 s) after the first: a pod every 50 ms for a minute does not hold them all
    from operators.engine.planning.release import GATHER_SECONDS

    stream = [gated(f"a-{i}", "a") for i in range(1200)]
    times = {(NAMESPACE, f"a-{i}"): created + 1.0 + 0.05 * i for i in range(1200)}
    assert GATHER_SECONDS == 30.0
    assert decide(stream[:600], 30.9, times).next_deadline == pytest.approx(created + 31.0)
    assert len(decide(stream[:601], 31.0, times).release) == 601


def test_by_default_a_group_missing_a_workload_waits_a_second_of_quiet_a_whole_one_50_ms() -> None:
    """The operator's default window (1 s): a-0 alone of a → b, the API server's creations paused for 0.65 s after
    it (as measured under a 300-pod burst), is not planned alone — its plan would fix the group's place; a-0 with
    b-0, every workload there, is planned 50 ms after the last of them arrived."""
    from operators.api.config.controllers import AppGroupOptions
    from operators.engine.planning.release import plan_view, release_by_plan

    def gated(name: str, workload: str) -> Pod:
        raw = pod(name, workload)
        raw["spec"]["schedulingGates"] = [{"name": keys.TOPOLOGY_ORDER_GATE}]
        raw["metadata"]["creationTimestamp"] = "2026-11-25T12:00:00Z"
        return Pod.parse(raw)

    window = AppGroupOptions().plan_window_seconds
    group = ordered.appgroup("pair", {"a": ["b"], "b": []})
    cluster = replace(build_snapshot([node("n1", "za"), topology(5)]), app_groups=(group,))
    alone, pair = [gated("a-0", "a")], [gated("a-0", "a"), gated("b-0", "b")]
    start = alone[0].created
    assert start is not None
    seen = {(NAMESPACE, "a-0"): start, (NAMESPACE, "b-0"): start + 0.2}

    def decide(members: list[Pod], after: float) -> Any:
        index = plan_view(replace(cluster, pods=tuple(members)))
        return release_by_plan(group, members, index, CONFIG, seen, start + after, 300.0, window=window)

    assert decide(alone, 0.65).release == () and decide(alone, 0.65).next_deadline == start + 1.0
    assert [r.pod.name for r in decide(alone, 1.0).release] == ["a-0"]
    assert decide(pair, 0.24).release == ()  # b-0 arrived 40 ms ago
    assert sorted(r.pod.name for r in decide(pair, 0.25).release) == ["a-0", "b-0"]


def test_a_new_leader_plans_around_the_releases_its_predecessor_wrote() -> None:
    """A plan survives a change of operator leader because it is written into the pods it releases: the old leader
    released a-0 to n1 (its release patch: the gate removed, n1's required affinity, netaware.io/planned-node) and
    died before kube-scheduler bound it; the new leader, knowing nothing but what the API holds, counts a-0 on n1.
    n1 takes one pod: b-0 goes to n2 in the same zone (cost 1), not onto n1, which a-0 holds, nor to n3 (5 away)."""
    import jsonpatch

    from operators.engine.planning.release import plan_view, release_by_plan, release_patch

    def gated(name: str, workload: str) -> dict[str, Any]:
        raw = pod(name, workload)
        raw["spec"]["schedulingGates"] = [{"name": keys.TOPOLOGY_ORDER_GATE}]
        raw["metadata"]["creationTimestamp"] = "2026-11-25T12:00:00Z"
        return raw

    group = ordered.appgroup("pair", {"a": ["b"], "b": []})
    cluster = replace(build_snapshot([node("n1", "za", pods="1"), node("n2", "za"), node("n3", "zb"), topology(5)]),
                      app_groups=(group,))  # fmt: skip
    released = jsonpatch.apply_patch(gated("a-0", "a"), release_patch(Pod.parse(gated("a-0", "a")), "n1"))
    assert released["metadata"]["annotations"][keys.PLANNED_NODE] == "n1" and "schedulingGates" in released["spec"]
    newcomer = Pod.parse(gated("b-0", "b"))
    created = newcomer.created
    assert created is not None
    members = [Pod.parse(released), newcomer]
    index = plan_view(replace(cluster, pods=tuple(members)))  # what the new leader's cache holds
    decision = release_by_plan(group, members, index, CONFIG, {(NAMESPACE, "b-0"): created}, created + 60, 300.0,
                               window=0.1)  # fmt: skip
    assert [(r.pod.name, r.node) for r in decision.release] == [("b-0", "n2")]


def test_a_pod_the_plan_cannot_place_is_released_with_the_reason() -> None:
    """Released without a place (kube-scheduler then decides), and the release says why the plan gave it none, for
    the log, in kube-scheduler's words (its counts sorted as text). Nodes of 4 cpus: n1 holds a-0 (2 cpus), n2 takes
    one pod and holds a-1, n3 is empty. A b of 5 cpus fits no node (every node short of cpu, n2 also full); two bs of
    3 cpus each fit n3 alone, not together: one goes there, the other is short of cpu on n1 (2 free) and on n3 beside
    it (1 free), and n2 is full."""
    from operators.engine.planning.release import IN_PLAN, UNPLACEABLE, plan_view, release_by_plan

    def gated(name: str, cpu: str) -> Pod:
        raw = pod(name, "b", cpu=cpu)
        raw["spec"]["schedulingGates"] = [{"name": keys.TOPOLOGY_ORDER_GATE}]
        raw["metadata"]["creationTimestamp"] = "2026-11-25T12:00:00Z"
        return Pod.parse(raw)

    group = ordered.appgroup("pair", {"a": ["b"], "b": []})
    bound = [Pod.parse(pod("a-0", "a", on="n1", cpu="2")), Pod.parse(pod("a-1", "a", on="n2"))]
    nodes = [node("n1", "za"), node("n2", "za", pods="1"), node("n3", "zb"), topology(5)]
    cluster = replace(build_snapshot(nodes), app_groups=(group,))

    def released(waiting: list[Pod]) -> list[tuple[str, str | None, str, str]]:
        members = [*bound, *waiting]
        created = waiting[0].created
        assert created is not None
        seen = {(NAMESPACE, pod.name): created for pod in waiting}
        index = plan_view(replace(cluster, pods=tuple(members)))
        decision = release_by_plan(group, members, index, CONFIG, seen, created + 60, 300.0, window=0.1)
        return sorted((r.pod.name, r.node, r.reason, r.unplaced) for r in decision.release)

    assert released([gated("b-0", "5")]) == [
        ("b-0", None, UNPLACEABLE, "0/3 nodes are available: 1 Too many pods, 3 Insufficient cpu.")
    ]
    [first, second] = released([gated("b-0", "3"), gated("b-1", "3")])
    assert {first[1], second[1]} == {"n3", None}
    placed, unplaced = (first, second) if first[1] else (second, first)
    assert placed[2:] == (IN_PLAN, "")
    assert unplaced[2:] == (UNPLACEABLE, "0/3 nodes are available: 1 Too many pods, 2 Insufficient cpu.")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(st.tuples(st.integers(0, 10**6), st.integers(2, 4), st.integers(1, 3), st.sampled_from((0.0, 0.3))))
def test_the_aggregated_program_has_the_per_pod_programs_optimum(instance: tuple[int, int, int, float]) -> None:
    """Counting pods per workload and node (aggregated.py) changes the program, never its optimum: both proven, equal
    (the per-pod program is the one the planner's objective was written for)."""
    from operators.engine.planning import aggregated, exact

    snapshot, group = random_instance(*instance)
    problem = build_problem(ClusterIndex.build(snapshot), group, CONFIG)
    if not aggregated.applies(problem):
        return
    counted = exact.solve(problem, 30)
    per_pod = exact.solve_per_pod(problem, 30)
    assert counted.optimal and per_pod.optimal, (counted, per_pod)
    assert counted.objective == per_pod.objective
