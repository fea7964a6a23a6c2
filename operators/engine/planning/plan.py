"""A placement plan for one AppGroup (pure): what ``netaware plan`` prints and the AppGroup controller releases by.

``plan_appgroup(index, group, config)`` builds the problem (:mod:`.problem`), searches (:mod:`.search`) and
reports: each unbound pod's node (with its zone and region), the pods that fit nowhere with why, the cost per
dependency edge (pairs, total, mean, pairs above ``maxNetworkCost``), the plan's and the greedy start's totals,
and — when an exact reference was computed (:mod:`.exact`) — the optimum or the best bound it is compared with.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from operators.api.appgroup import AppGroup
from operators.api.config.scheduler import SchedulerConfig
from operators.engine.planning.bound import lower_bound
from operators.engine.planning.layout import Layout
from operators.engine.planning.problem import Problem, build_problem
from operators.engine.planning.reference import Reference
from operators.engine.planning.search import Assignment, PlacedCost, Search, search
from operators.engine.planning.work import BUILD_WORK
from operators.engine.scheduling.index import ClusterIndex

DEFAULT_BUDGET_SECONDS = 0.1
BOUND_NAME = "spectral bound"  # the reference's solver when it is the solver-free bound


@dataclass(frozen=True)
class PlannedPod:
    pod: str  # namespace/name
    workload: str
    node: str
    zone: str
    region: str


@dataclass(frozen=True)
class EdgeCost:
    source: str
    target: str
    pairs: int
    cost: int
    over_limit: int

    @property
    def mean(self) -> float:
        return self.cost / self.pairs if self.pairs else 0.0


@dataclass(frozen=True)
class Plan:
    group: str
    pods: tuple[PlannedPod, ...]
    unplaceable: dict[str, str]
    cost: PlacedCost
    greedy: PlacedCost
    edges: tuple[EdgeCost, ...]
    converged: bool
    sweeps: int
    seconds: float
    seed: int
    notes: tuple[str, ...] = ()
    reference: Reference | None = None
    computed: str = ""  # RFC 3339
    baseline: PlacedCost | None = None  # the smallest-domain placement (:mod:`.baseline`), when it was computed
    baseline_level: str = ""

    @property
    def ratio(self) -> float | None:
        """The plan's objective over the optimum (or the best bound); None without a reference, 1.0 when both
        are 0."""
        if self.reference is None:
            return None
        bound = self.reference.bound
        if bound <= 0:
            return 1.0 if self.cost.objective == 0 else float("inf")
        return self.cost.objective / bound

    def mean_edge_cost(self) -> float:
        placed = [edge.mean for edge in self.edges if edge.pairs]
        return sum(placed) / len(placed) if placed else 0.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "appGroup": self.group,
            "computed": self.computed,
            "placements": [vars(pod) for pod in self.pods],
            "unplaceable": dict(sorted(self.unplaceable.items())),
            "cost": {
                "total": self.cost.cost,
                "spreadPenalty": self.cost.spread_penalty,
                "pairsOverMaxNetworkCost": self.cost.over_limit,
                "objective": self.cost.objective,
                "meanPerEdge": round(self.mean_edge_cost(), 3),
            },
            "greedy": {"total": self.greedy.cost, "objective": self.greedy.objective},
            **(
                {
                    "baseline": {
                        "level": self.baseline_level,
                        "total": self.baseline.cost,
                        "pairsOverMaxNetworkCost": self.baseline.over_limit,
                        "unplaced": self.baseline.unplaced,
                        "objective": self.baseline.objective,
                    }
                }
                if self.baseline is not None
                else {}
            ),
            "edges": [
                {
                    "source": edge.source,
                    "target": edge.target,
                    "pairs": edge.pairs,
                    "cost": edge.cost,
                    "meanCost": round(edge.mean, 3),
                    "pairsOverMaxNetworkCost": edge.over_limit,
                }
                for edge in self.edges
            ],
            "search": {
                "seed": self.seed,
                "converged": self.converged,
                "sweeps": self.sweeps,
                "seconds": round(self.seconds, 4),
            },
            "notes": list(self.notes),
        }
        if self.reference is not None:
            out["reference"] = {
                "solver": self.reference.solver,
                "optimal": self.reference.optimal,
                "objective": self.reference.objective,
                "bound": self.reference.bound,
                "seconds": round(self.reference.seconds, 3),
                "ratio": None if self.ratio is None or self.ratio == float("inf") else round(self.ratio, 4),
            }
        return out


def plan_appgroup(
    index: ClusterIndex,
    group: AppGroup,
    config: SchedulerConfig,
    seed: int = 0,
    budget_seconds: float = DEFAULT_BUDGET_SECONDS,
    now: datetime.datetime | None = None,
    exact_seconds: float | None = None,
    bound: bool = False,
    layout: Layout | None = None,
    with_edges: bool = True,
    only: Collection[str] | None = None,
    allowed: Collection[str] | None = None,
) -> Plan:
    """The plan for ``group``'s unbound pods on ``index``'s cluster (see the module docstring); with
    ``exact_seconds``, the exact reference computed within that time (needs the ``exact`` extra); with ``bound``,
    the solver-free lower bound (:mod:`.bound`) as the reference when there is no exact one, or when it is higher
    than the exact solver's unproven bound; without ``with_edges``, no cost per edge (a caller that reads only
    the places); ``only``: the keys of the unbound pods to plan, when not all; ``allowed``: the only nodes a pod
    may be placed on, when not all."""
    problem = build_problem(index, group, config, layout, only, allowed)
    result = search(problem, seed, budget_seconds, spent=BUILD_WORK * len(problem.nodes))  # the build counts
    reference = None
    if exact_seconds is not None:
        from operators.engine.planning.exact import solve

        reference = solve(problem, exact_seconds, result.cost.objective)
    if bound and (reference is None or not reference.optimal):
        started = time.perf_counter()
        lower = lower_bound(problem)
        if reference is None:
            reference = Reference(BOUND_NAME, False, None, lower, time.perf_counter() - started)
        elif lower > reference.bound:
            reference = dataclasses.replace(reference, bound=lower)
    return describe(problem, result.assignment, result.cost, result.greedy, result.unplaceable, seed,
                    converged=result.converged, sweeps=result.sweeps, seconds=result.seconds, reference=reference,
                    now=now, with_edges=with_edges, baseline=result.baseline,
                    baseline_level=result.baseline_level)  # fmt: skip


def describe(
    problem: Problem,
    assignment: Sequence[int] | np.ndarray[Any, Any],
    cost: PlacedCost,
    greedy: PlacedCost,
    unplaceable: dict[str, str],
    seed: int,
    converged: bool = True,
    sweeps: int = 0,
    seconds: float = 0.0,
    reference: Reference | None = None,
    now: datetime.datetime | None = None,
    with_edges: bool = True,
    baseline: PlacedCost | None = None,
    baseline_level: str = "",
) -> Plan:
    pods = tuple(
        PlannedPod(
            pod.key,
            problem.workloads[int(problem.pod_workload[row])],
            problem.nodes[int(assignment[row])],
            problem.places[int(problem.place_of[int(assignment[row])])][1],
            problem.places[int(problem.place_of[int(assignment[row])])][0],
        )
        for row, pod in enumerate(problem.pods)
        if int(assignment[row]) >= 0
    )
    return Plan(
        group=problem.group,
        pods=pods,
        unplaceable=unplaceable,
        cost=cost,
        greedy=greedy,
        edges=tuple(edge_costs(problem, assignment)) if with_edges else (),
        converged=converged,
        sweeps=sweeps,
        seconds=seconds,
        seed=seed,
        notes=tuple(problem.notes),
        reference=reference,
        computed=(now or datetime.datetime.now(datetime.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        baseline=baseline,
        baseline_level=baseline_level,
    )


def edge_costs(problem: Problem, assignment: Sequence[int] | np.ndarray[Any, Any]) -> list[EdgeCost]:
    """Per dependency edge of ``problem``, its pairs with ``assignment`` (bound members included)."""
    engine = Search(problem)
    state: Assignment = engine.empty()
    for pod, node in enumerate(assignment):
        if int(node) >= 0:
            engine.put(state, pod, int(node))
    out = []
    for edge in problem.edges:
        cost, over = engine.edge_cost(state, edge)
        pairs = int(state.count_node[edge.source].sum() * state.count_node[edge.target].sum())
        out.append(EdgeCost(problem.workloads[edge.source], problem.workloads[edge.target], pairs, cost, over))
    return out
