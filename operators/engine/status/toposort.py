"""The six topology sorting algorithms of the AppGroup (diktyo-io appgroup-controller semantics).

The graph has one node per workload selector and an edge ``w -> d`` for every dependency
``d`` of ``w``: a workload comes before the workloads it depends on.

* **KahnSort**: in-degrees; the roots go onto a stack; pop the top, append it, decrement its
  children in dependency order and push those that reach zero.
* **TarjanSort**: depth-first search with temporary/permanent marks; each node is written at
  the end of what is still free when it finishes (reverse post-order).
* **Alternate\\***: ``s0, s(n-1), s1, s(n-2), ...`` of the base order.
* **Reverse\\***: the base order reversed.

Upstream iterates a Go map where several choices exist, so its output changes from run to
run. Here the tie-break is fixed and independent of the order of ``spec.workloads``:
Kahn pushes its roots so that they pop in ascending selector order, and Tarjan starts its
searches from the selectors in descending order, so that unrelated workloads read in
ascending order in both. Children are always visited in the order the dependencies are
listed, as upstream.

Unlike upstream, workloads without any edge are part of the order (they are roots).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final

Graph = Mapping[str, Sequence[str]]  # selector -> the selectors it depends on, in spec order


class CycleError(ValueError):
    """The dependencies form a cycle; ``cycle`` lists its workloads in order (first == last)."""

    def __init__(self, cycle: Sequence[str]) -> None:
        super().__init__(" -> ".join(cycle))
        self.cycle = tuple(cycle)


def kahn_sort(graph: Graph) -> list[str]:
    in_degree = dict.fromkeys(graph, 0)
    for children in graph.values():
        for child in children:
            in_degree[child] += 1
    stack = sorted((node for node, degree in in_degree.items() if degree == 0), reverse=True)
    order: list[str] = []
    while stack:
        node = stack.pop()
        order.append(node)
        for child in graph[node]:
            in_degree[child] -= 1
            if in_degree[child] == 0:
                stack.append(child)
    if len(order) != len(graph):
        raise CycleError(find_cycle(graph))
    return order


def tarjan_sort(graph: Graph) -> list[str]:
    permanent: set[str] = set()
    temporary: set[str] = set()
    finished: list[str] = []
    for start in sorted(graph, reverse=True):
        if start in permanent:
            continue
        # Iterative depth-first search (graphs of 10,000 workloads exceed Python's recursion limit).
        temporary.add(start)
        path: list[tuple[str, int]] = [(start, 0)]
        while path:
            node, next_child = path[-1]
            children = graph[node]
            if next_child < len(children):
                path[-1] = (node, next_child + 1)
                child = children[next_child]
                if child in permanent:
                    continue
                if child in temporary:
                    raise CycleError(find_cycle(graph))
                temporary.add(child)
                path.append((child, 0))
            else:
                path.pop()
                temporary.discard(node)
                permanent.add(node)
                finished.append(node)
    finished.reverse()
    return finished


def alternate(order: Sequence[str]) -> list[str]:
    """``s0, s(n-1), s1, s(n-2), ...`` (upstream's AlternateKahn / AlternateTarjan)."""
    result: list[str] = []
    low, high = 0, len(order) - 1
    for index in range(len(order)):
        if index % 2 == 0:
            result.append(order[low])
            low += 1
        else:
            result.append(order[high])
            high -= 1
    return result


def find_cycle(graph: Graph) -> list[str]:
    """One cycle of ``graph`` in dependency order, closed (``[a, b, a]``); ``[]`` if there is none.

    The search starts from the smallest selector, so the same graph names the same cycle.
    """
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for start in sorted(graph):
        if start in state:
            continue
        path: list[tuple[str, int]] = [(start, 0)]
        state[start] = 1
        while path:
            node, next_child = path[-1]
            children = graph[node]
            if next_child < len(children):
                path[-1] = (node, next_child + 1)
                child = children[next_child]
                if state.get(child) == 1:
                    on_path = [entry[0] for entry in path]
                    return [*on_path[on_path.index(child) :], child]
                if child not in state:
                    state[child] = 1
                    path.append((child, 0))
            else:
                path.pop()
                state[node] = 2
    return []


ALGORITHMS: Final[dict[str, Callable[[Graph], list[str]]]] = {
    "KahnSort": kahn_sort,
    "AlternateKahn": lambda graph: alternate(kahn_sort(graph)),
    "ReverseKahn": lambda graph: kahn_sort(graph)[::-1],
    "TarjanSort": tarjan_sort,
    "AlternateTarjan": lambda graph: alternate(tarjan_sort(graph)),
    "ReverseTarjan": lambda graph: tarjan_sort(graph)[::-1],
}


def topology_order(graph: Graph, algorithm: str) -> list[str]:
    """The order of ``graph`` under ``algorithm``; raises ``CycleError`` or ``KeyError`` (unknown algorithm)."""
    return ALGORITHMS[algorithm](graph)
