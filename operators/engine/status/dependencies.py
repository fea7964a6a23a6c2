"""An AppGroup's dependency graph and the problems that make its spec invalid (pure; shared by the status and
the topology-order gates)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from operators.api.appgroup import AppGroupSpec
from operators.engine.status.toposort import ALGORITHMS, CycleError, topology_order


@dataclass(frozen=True)
class Problem:
    """Why a spec is not valid: a condition reason and a message naming the workloads."""

    reason: str
    message: str


def dependency_graph(spec: AppGroupSpec) -> dict[str, list[str]]:
    """selector -> the selectors it depends on, in spec order (duplicates and unknowns dropped)."""
    graph: dict[str, list[str]] = {}
    for entry in spec.workloads:
        graph.setdefault(entry.workload.selector, [])
    for entry in spec.workloads:
        children = graph[entry.workload.selector]
        for dependency in entry.dependencies or ():
            target = dependency.workload.selector
            if target in graph and target not in children:
                children.append(target)
    return graph


def validate(spec: AppGroupSpec) -> list[Problem]:
    """Every problem of the spec, most fundamental first."""
    problems: list[Problem] = []
    if spec.topology_sorting_algorithm not in ALGORITHMS:
        problems.append(
            Problem(
                "UnknownAlgorithm",
                f'spec.topologySortingAlgorithm "{spec.topology_sorting_algorithm}" '
                f"is not one of {', '.join(ALGORITHMS)}",
            )
        )
    counts = Counter(entry.workload.selector for entry in spec.workloads)
    for selector, count in counts.items():
        if count > 1:
            where = [
                f"spec.workloads[{index}] ({entry.workload.name})"
                for index, entry in enumerate(spec.workloads)
                if entry.workload.selector == selector
            ]
            problems.append(Problem("DuplicateSelector", f'{" and ".join(where)} share the selector "{selector}"'))
    for index, entry in enumerate(spec.workloads):
        for position, dependency in enumerate(entry.dependencies or ()):
            if dependency.workload.selector not in counts:
                problems.append(
                    Problem(
                        "UnknownDependency",
                        f'workload "{entry.workload.selector}" depends on "{dependency.workload.selector}" '
                        f"(spec.workloads[{index}].dependencies[{position}]), which is not in spec.workloads",
                    )
                )
    graph = dependency_graph(spec)
    try:
        topology_order(graph, "KahnSort")
    except CycleError as cycle:
        problems.append(Problem("DependencyCycle", f"dependency cycle: {' -> '.join(cycle.cycle)}"))
    if spec.num_members < len(spec.workloads):
        problems.append(
            Problem(
                "NumMembersTooSmall",
                f"spec.numMembers is {spec.num_members}, smaller than the {len(spec.workloads)} workloads",
            )
        )
    return problems
