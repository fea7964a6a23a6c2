#!/usr/bin/env python3
"""Whole-AppGroup placement plans: planning time and cost against the exact optimum or the best bound (slow: not a
test; no timed assertions anywhere).

    python -m benchmarks.bench_plan [--budget-ms 100] [--exact-seconds 60] [--runs 3] [--record FILE.json]

Instances (every pod pending, the NetworkTopology's costs, as ``netaware plan`` computes them):

* ``boutique``: Online Boutique x 3 (33 pods) on the 16-node cluster of ``netaware simulate`` (2 regions x 2
  zones, zone pairs 5, region pairs 20, 1G per node, every dependency 50M and maxNetworkCost 10);
* ``random-dag``: 12 workloads x 3 on the same cluster (seed 3);
* ``tight``: the boutique instance on nodes of 2 cpus and 4 pods each, every pod asking 500m — capacity binds;
* ``large``: 300 pods (20 workloads x 15, a random DAG) on 5,000 nodes in 50 zones / 5 regions;
* ``large-constrained``: ``large`` with kube-scheduler's rules between pods by workload (:func:`constrained`:
  required anti-affinity per hostname, DoNotSchedule zone spread, ScheduleAnyway hostname spread, host ports),
  and per plan the pods kube-scheduler's filters would refuse where planned (0: the plan holds).

Per instance: the problem's build time, the greedy start's time (the first feasible plan) and cost, the plan's
cost at the budget (mean per dependency pair, pairs above maxNetworkCost), whether the search converged, and
with an exact reference (HiGHS, the ``exact`` extra; skipped for ``large``, whose program has 1.5 million
binaries) the optimum or the best bound — the solver-free bound (``engine/planning/bound.py``) where it is higher,
and for ``large`` — and the plan's ratio to it. min / median / max over ``--runs`` seeds.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from benchmarks import records
from benchmarks.figures import spread
from operators.api import keys
from operators.engine.cluster.kube import filters as kube_filters
from operators.engine.cluster.snapshot import Snapshot, build_snapshot
from operators.engine.planning.baseline import smallest_domain
from operators.engine.planning.packing import packing_bound
from operators.engine.planning.plan import EdgeCost, edge_costs, plan_appgroup
from operators.engine.planning.problem import build_problem
from operators.engine.planning.search import Search, budget_scale
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.simulation import ordered


def scenario_snapshot(scenario: ordered.AppScenario) -> Snapshot:
    """The scenario's cluster (its pods included) with its AppGroup and pods."""
    cluster = build_snapshot(list(scenario.cluster))
    return replace(cluster, app_groups=(scenario.group,), pods=(*cluster.pods, *scenario.pods))


def tight() -> ordered.AppScenario:
    cluster = []
    for raw in ordered.zoned_cluster():
        if raw["kind"] == "Node":
            raw = {**raw, "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "4"}}}  # noqa: PLW2901
        cluster.append(raw)
    scenario = ordered.boutique(3, tuple(cluster))
    pods = []
    for pod in scenario.pods:
        raw = {**pod.raw, "spec": {**pod.raw["spec"], "containers": [
            {"name": "app", "resources": {"requests": {"cpu": "500m"}}}]}}  # fmt: skip
        pods.append(type(pod).parse(raw))
    return replace(scenario, pods=tuple(pods))


def zoned_node(index: int, zone: int, regions: int, cpu: str) -> dict[str, Any]:
    """Node ``node-<index>`` in zone ``z<zone>`` of region ``r<zone % regions>``, 10G, 64Gi, 110 pods."""
    name = f"node-{index:05d}"
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {keys.HOSTNAME_LABEL: name, keys.ZONE_LABEL: f"z{zone}",
                                              keys.REGION_LABEL: f"r{zone % regions}"},
                     "annotations": {keys.NODE_BANDWIDTH_KOORDINATOR: "10G"}},
        "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}},
    }  # fmt: skip


def user_defined_topology(zones: int, regions: int, zone_cost: Callable[[int, int], int],
                          region_cost: Callable[[int, int], int]) -> dict[str, Any]:  # fmt: skip
    """The NetworkTopology of ``zones`` zones in ``regions`` regions (zone ``a``'s region: ``a % regions``): each
    zone pair of a region and each region pair costs what the functions give, asked zone pairs first, in order."""
    origins = [{"origin": f"z{a}", "costList": [{"destination": f"z{b}", "networkCost": zone_cost(a, b)}
                                                for b in range(zones) if b != a and b % regions == a % regions]}
               for a in range(zones)]  # fmt: skip
    across = [{"origin": f"r{a}", "costList": [{"destination": f"r{b}", "networkCost": region_cost(a, b)}
                                               for b in range(regions) if b != a]} for a in range(regions)]  # fmt: skip
    return {
        "apiVersion": f"{keys.NETWORKTOPOLOGY_GROUP}/{keys.V1ALPHA1}", "kind": "NetworkTopology",
        "metadata": {"name": ordered.TOPOLOGY, "namespace": ordered.NAMESPACE},
        "spec": {"configmapName": "netperf", "weights": [{"name": keys.USER_DEFINED_WEIGHT, "topologyList": [
            {"topologyKey": keys.REGION_LABEL, "originList": across},
            {"topologyKey": keys.ZONE_LABEL, "originList": origins}]}]},
    }  # fmt: skip


def large(rng: random.Random) -> ordered.AppScenario:
    zones, regions, nodes = 50, 5, 5000
    objects = [zoned_node(index, index % zones, regions, "16") for index in range(nodes)]
    objects.append(user_defined_topology(zones, regions, lambda a, b: 2 + (a * 7 + b * 3) % 8, lambda a, b: 20 + a + b))
    return ordered.app_scenario("large", ordered.random_dag(20, 0.15, rng), 15, tuple(objects))


def constrained(scenario: ordered.AppScenario) -> ordered.AppScenario:
    """``scenario`` with kube-scheduler's rules between pods, as production charts set them, by workload: every
    third one's replicas anti-affine per hostname, the next one's spread over zones (maxSkew 1, DoNotSchedule),
    the next one's ScheduleAnyway per hostname; one in ten with a host port."""
    pods = []
    for pod in scenario.pods:
        workload = pod.labels[keys.APPGROUP_WORKLOAD_LABEL]
        number = int("".join(ch for ch in workload if ch.isdigit()) or 0)
        mine = {"matchLabels": {keys.APPGROUP_WORKLOAD_LABEL: workload}}
        extra: dict[str, Any] = {}
        if number % 3 == 0:
            term = {"labelSelector": mine, "topologyKey": keys.HOSTNAME_LABEL}
            extra["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        else:
            key, action = (keys.ZONE_LABEL, "DoNotSchedule") if number % 3 == 1 else (keys.HOSTNAME_LABEL,
                                                                                      "ScheduleAnyway")  # fmt: skip
            extra["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": action,
                                                   "labelSelector": mine}]  # fmt: skip
        spec = {**pod.raw["spec"], **extra}
        if number % 10 == 9:
            port = {"containerPort": 9000 + number, "hostPort": 9000 + number}
            spec["containers"] = [{**spec["containers"][0], "ports": [port]}]
        pods.append(type(pod).parse({**pod.raw, "spec": spec}))
    return replace(scenario, name=f"{scenario.name}-constrained", pods=tuple(pods))


def violations(snapshot: Snapshot, placed: Mapping[str, str]) -> int:
    """Planned pods kube-scheduler's filters refuse on their planned node, every other pod bound (the plan as a
    whole, checked by the engine's per-pod pipeline)."""
    pods = tuple(pod.on_node(placed[pod.key]) if pod.key in placed else pod for pod in snapshot.pods)
    index = ClusterIndex.build(replace(snapshot, pods=pods))
    refused = 0
    for pod in index.snapshot.pods:
        if pod.key in placed:
            node = index.node_by_name[pod.node_name]
            cycle = kube_filters.prefilter(pod, index.placed, index.requested)
            kube_filters.add_pod(cycle, pod, node, sign=-1)
            refused += bool(kube_filters.failure(cycle, node)[1])
    return refused


FAMILIES = {"small": (100, 400, 8, 2), "medium": (300, 2400, 24, 3), "large": (1000, 5000, 40, 4),
            "xl": (5000, 50_000, 500, 10)}  # fmt: skip  # pods, nodes, zones, regions (xl: only when asked)
SCALING_NODES = (600, 1200, 2400, 4800, 9600)  # --scaling: medium's group and zones on these many nodes
FAMILIES.update({f"{nodes}-nodes": (300, nodes, 24, 3) for nodes in SCALING_NODES})


def family(size: str, kind: str, seed: int) -> ordered.AppScenario:
    """One generated instance (the issue's families): nodes of 8 cpus in regions x zones, zone costs 3-10 inside a
    region and 20-60 across; ``kind`` "mixed": zones 55-85 % used, one per region at 25 % (a zone holds the group),
    or "full": all 80-92 %, or "spread": as full in regions of two zones, none of which holds the group (the search
    on every node, not inside one domain); one AppGroup, a random DAG of pods of 250m-1 cpu, maxNetworkCost 30."""
    pods, nodes, zones, regions = FAMILIES[size]
    if kind == "spread":
        regions = zones // 2
    rng = random.Random(seed)
    objects: list[dict[str, Any]] = []
    quiet = {rng.randrange(zones) // regions * regions + r for r in range(regions)} if kind == "mixed" else set()
    for zone in range(zones):
        share = 0.25 if zone in quiet else rng.uniform(0.55, 0.85) if kind == "mixed" else rng.uniform(0.80, 0.92)
        for index in range(zone, nodes, zones):
            name = f"node-{index:05d}"
            objects.append(zoned_node(index, zone, regions, "8"))
            used = round(8000 * share * rng.uniform(0.8, 1.2))
            objects.append({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"busy-{index}", "namespace": "load"},
                "spec": {"nodeName": name, "containers": [{"name": "c", "resources": {"requests": {
                    "cpu": f"{min(used, 8000)}m"}}}]}, "status": {"phase": "Running"},
            })  # fmt: skip
    objects.append(user_defined_topology(zones, regions, lambda a, b: rng.randint(3, 10),
                                         lambda a, b: rng.randint(20, 60)))  # fmt: skip
    workloads = max(4, pods // 25)
    graph = ordered.random_dag(workloads, min(0.5, 3 / workloads), rng)
    scenario = ordered.app_scenario(f"{size}-{kind}", graph, pods // workloads, tuple(objects))
    asks = []
    for member in scenario.pods:
        spec = {**member.raw["spec"], "containers": [{"name": "app", "resources": {"requests": {
            "cpu": rng.choice(("250m", "500m", "1"))}}}]}  # fmt: skip
        asks.append(type(member).parse({**member.raw, "spec": spec}))
    return replace(scenario, group=ordered.appgroup(scenario.name, graph, max_cost=30), pods=tuple(asks))


def baseline_edges(scenario: ordered.AppScenario, index: ClusterIndex | None = None, seed: int = 0) -> list[EdgeCost]:
    """Per dependency edge, the smallest-domain baseline's pairs and cost on the scenario."""
    problem = build_problem(index or ClusterIndex.build(scenario_snapshot(scenario)), scenario.group, ordered.config())
    state, _, _ = smallest_domain(Search(problem, seed))
    return edge_costs(problem, state.node)


def compare(size: str, kind: str, seed: int, budget: float, long: float = 0.0, busy: bool = False,
            bound: float = 0.0) -> dict[str, float]:  # fmt: skip
    """The plan at ``budget`` against the smallest-domain baseline on one generated instance (with ``long``, also
    against the same planner's plan at that budget; with ``busy``, also planned again while every core spins; with
    ``bound``, against the packing bound computed within that many seconds per program, where it applies)."""
    scenario = family(size, kind, seed)
    snapshot = scenario_snapshot(scenario)
    started = time.perf_counter()
    index = ClusterIndex.build(snapshot)
    problem = build_problem(index, scenario.group, ordered.config())
    cold = time.perf_counter() - started  # the cluster's index, with the tables every plan on this snapshot reads
    base = [edge for edge in baseline_edges(scenario, index, seed) if edge.pairs]
    started = time.perf_counter()
    plan = plan_appgroup(index, scenario.group, ordered.config(), seed, budget)
    whole = time.perf_counter() - started  # the problem built from the index, the search, the report
    base_mean = sum(edge.mean for edge in base) / len(base) if base else 0.0
    extra = {}
    if long:  # ``long`` in all: the planner scales a budget with the group, so it is given its share per 100 pods
        share = long / budget_scale(len(scenario.pods))
        longer = plan_appgroup(index, scenario.group, ordered.config(), seed, share).mean_edge_cost()
        extra = {"ratio to the long budget": plan.mean_edge_cost() / longer if longer else 1.0}
    if busy:
        with spinning(os.cpu_count() or 1):
            loaded = plan_appgroup(index, scenario.group, ordered.config(), seed, budget)
        extra["busy: plan s"] = loaded.seconds
        extra["busy: the same plan"] = float(loaded.pods == plan.pods)
    floor = packing_bound(problem, bound) if bound else None
    if floor is not None and len({edge.pairs for edge in base}) == 1:  # equal pairs per edge: the mean is cost / P
        least = floor.cost / floor.pairs
        extra["packing bound mean per edge"] = least
        extra["packing bound ratio to baseline"] = least / base_mean
        if least:  # a bound of 0 (HiGHS stopped before its first bound) says nothing of the plan
            extra["plan over the packing bound"] = plan.mean_edge_cost() / least
        extra["packing bound proven"] = float(floor.proven)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        **extra,
        "peak RSS MiB": peak,
        "plan s": plan.seconds,
        "plan s over its budget": plan.seconds / (budget * budget_scale(len(scenario.pods))),
        "plan with its build s": whole,
        "index and a first build s": cold,
        "plan mean per edge": plan.mean_edge_cost(),
        "baseline mean per edge": base_mean,
        "ratio to baseline": plan.mean_edge_cost() / base_mean if base_mean else 1.0,
        "plan pairs above max": plan.cost.over_limit,
        "baseline pairs above max": sum(edge.over_limit for edge in base),
        "unplaced": len(plan.unplaceable),
    }


def scaling(seeds: int, budget: float) -> dict[str, Any]:
    """Planning time against the number of nodes at a fixed number of domains: ``medium-mixed``'s 300 pods and
    24 zones in 3 regions on 600 to 9,600 nodes, ``seeds`` instances each; each doubling's time ratio."""
    figures: dict[str, Any] = {}
    previous = 0.0
    for nodes in SCALING_NODES:
        runs = [compare(f"{nodes}-nodes", "mixed", seed, budget) for seed in range(seeds)]
        seconds = [run["plan s"] for run in runs]
        median = sorted(seconds)[len(seconds) // 2]
        print(f"{nodes:6d} nodes: plan s {spread(seconds, '.4g')}, ratio to baseline "
              f"{spread([run['ratio to baseline'] for run in runs], '.4g')}"
              + (f", x{median / previous:.2f} the time for x2 the nodes" if previous else ""))  # fmt: skip
        figures[f"{nodes} nodes/plan s"] = records.figure(seconds, "s")
        figures[f"{nodes} nodes/ratio to baseline"] = records.figure([run["ratio to baseline"] for run in runs], "")
        previous = median
    return figures


@contextlib.contextmanager
def spinning(processes: int) -> Iterator[None]:
    """``processes`` busy loops beside the benchmark (a build running on the operator's machine)."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        time.sleep(0.2)  # running before the plan starts
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def families(seeds: int, budget: float, sizes: tuple[str, ...] = ("small", "medium", "large"),
             long: float = 0.0, busy: bool = False, kinds: tuple[str, ...] = ("mixed", "full"), bound: float = 0.0
             ) -> dict[str, Any]:  # fmt: skip
    """Every family at ``budget``, ``seeds`` instances each: figures, and the instances where the plan breaks
    maxNetworkCost while the baseline does not, or costs more than 0.95x the baseline."""
    figures: dict[str, Any] = {}
    for size in sizes:
        pods, nodes, zones, _ = FAMILIES[size]
        for kind in kinds:
            runs = [compare(size, kind, seed, budget, long, busy, bound) for seed in range(seeds)]
            name = f"{size}-{kind}"
            needless = sum(1 for run in runs if run["plan pairs above max"] and not run["baseline pairs above max"])
            above = sum(1 for run in runs if run["ratio to baseline"] > 0.95)
            reachable = sum(1 for run in runs if run["ratio to baseline"] > 0.95
                            and run.get("packing bound ratio to baseline", 0.0) <= 0.95)  # fmt: skip
            print(f"{name}: {pods} pods, {nodes} nodes, {zones} zones, {seeds} seeds; needless breaches on {needless},"
                  f" above 0.95x the baseline on {above}" + (f" ({reachable} where the bound allows 0.95)" if bound
                                                            else ""))  # fmt: skip
            for key in dict.fromkeys(key for run in runs for key in run):
                numbers = [float(run[key]) for run in runs if key in run]
                figures[f"{name}/{key}"] = records.figure(numbers, UNITS.get(key, ""))
                print(f"  {key:28} {spread(numbers, '.4g')}")
            figures[f"{name}/needless breaches"] = records.figure([float(needless)], "")
            figures[f"{name}/above 0.95x the baseline"] = records.figure([float(above)], "")
    return figures


# the others: counts, costs, ratios
UNITS = {
    "build s": "s",
    "greedy s": "s",
    "plan s": "s",
    "plan with its build s": "s",
    "index and a first build s": "s",
    "busy: plan s": "s",
    "reference s": "s",
}

INSTANCES: dict[str, Callable[[], ordered.AppScenario]] = {
    "boutique": lambda: ordered.boutique(3),
    "random-dag": lambda: ordered.app_scenario(
        "dag", ordered.random_dag(12, 0.3, random.Random(3)), 3, ordered.zoned_cluster()
    ),
    "tight": tight,
    "large": lambda: large(random.Random(7)),
    "large-constrained": lambda: constrained(large(random.Random(7))),
}


def measure(name: str, budget: float, exact_seconds: float | None, seed: int) -> dict[str, Any]:
    scenario = INSTANCES[name]()
    snapshot = scenario_snapshot(scenario)
    started = time.perf_counter()
    index = ClusterIndex.build(snapshot)
    problem = build_problem(index, scenario.group, ordered.config())
    built = time.perf_counter() - started
    started = time.perf_counter()
    engine = Search(problem, seed)
    state, _ = engine.greedy()
    greedy_seconds = time.perf_counter() - started
    greedy = engine.objective(state)
    plan = plan_appgroup(index, scenario.group, ordered.config(), seed, budget,
                         exact_seconds=None if name.startswith("large") else exact_seconds, bound=True)  # fmt: skip
    pairs = sum(edge.pairs for edge in plan.edges)
    figures: dict[str, Any] = {
        "pods": len(problem.pods),
        "nodes": len(problem.nodes),
        "build s": built,
        "greedy s": greedy_seconds,
        "greedy cost": greedy.cost,
        "plan s": plan.seconds,
        "plan cost": plan.cost.cost,
        "plan mean per pair": plan.cost.cost / pairs if pairs else 0.0,
        "pairs above maxNetworkCost": plan.cost.over_limit,
        "converged": plan.converged,
        "unplaced": len(plan.unplaceable),
        "spread penalty": plan.cost.spread_penalty,
    }
    if name.endswith("constrained"):
        figures["pods refused where planned"] = violations(snapshot, {p.pod: p.node for p in plan.pods})
    if plan.reference is not None:
        figures["reference"] = "optimum" if plan.reference.optimal else f"bound ({plan.reference.solver})"
        figures["reference objective"] = plan.reference.bound
        figures["reference best plan"] = plan.reference.objective
        figures["reference s"] = plan.reference.seconds
        figures["ratio"] = plan.ratio
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget-ms", type=int, default=100)
    parser.add_argument("--exact-seconds", type=float, default=60.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default=",".join(INSTANCES))
    parser.add_argument("--record", default=None, help="also write the figures as JSON to this file")
    parser.add_argument("--families", type=int, default=0, metavar="SEEDS",
                        help="instead: the generated families against the smallest-domain baseline")  # fmt: skip
    parser.add_argument("--sizes", default="small,medium,large", help="of --families: small, medium, large, xl")
    parser.add_argument("--kinds", default="mixed,full", help="of --families: mixed, full, spread")
    parser.add_argument("--long-budget-ms", type=int, default=0,
                        help="of --families: also plan with this budget in all (not scaled by the group)")  # fmt: skip
    parser.add_argument("--bound-seconds", type=float, default=0.0,
                        help="of --families: also the packing bound, each program within these seconds")  # fmt: skip
    parser.add_argument("--busy", action="store_true",
                        help="of --families: also plan each instance again, every core in a busy loop")  # fmt: skip
    parser.add_argument("--scaling", type=int, default=0, metavar="SEEDS",
                        help="instead: planning time against the number of nodes, zones fixed")  # fmt: skip
    args = parser.parse_args()
    if args.scaling:
        scaled = scaling(args.scaling, args.budget_ms / 1000)
        if args.record:
            records.write(args.record, "bench_plan", {"budget_ms": args.budget_ms, "scaling": args.scaling}, scaled)
        return
    if args.families:
        compared = families(args.families, args.budget_ms / 1000, tuple(args.sizes.split(",")),
                            args.long_budget_ms / 1000, args.busy, tuple(args.kinds.split(",")),
                            args.bound_seconds)  # fmt: skip
        if args.record:
            parameters = {"budget_ms": args.budget_ms, "families": args.families, "sizes": args.sizes,
                          "kinds": args.kinds, "long_budget_ms": args.long_budget_ms, "busy": args.busy,
                          "bound_seconds": args.bound_seconds}  # fmt: skip
            records.write(args.record, "bench_plan", parameters, compared)
        return
    figures: dict[str, Any] = {}
    for name in args.only.split(","):
        runs = [measure(name, args.budget_ms / 1000, args.exact_seconds, seed) for seed in range(args.runs)]
        print(f"{name}: {runs[0]['pods']} pods, {runs[0]['nodes']} nodes, budget {args.budget_ms} ms")
        for key in runs[0]:
            values = [run.get(key) for run in runs]
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                numbers = [float(v) for v in values]  # type: ignore[arg-type]
                figures[f"{name}/{key}"] = records.figure(numbers, UNITS.get(key, ""))
                print(f"  {key:28} {spread(numbers, '.4g')}")
            else:
                print(f"  {key:28} {values}")
    if args.record:
        records.write(args.record, "bench_plan", vars(args), figures)


if __name__ == "__main__":
    main()
