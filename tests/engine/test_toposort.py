"""The six topology sorting algorithms: upstream examples, edge cases, properties."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.engine.status.toposort import ALGORITHMS, CycleError, find_cycle, topology_order

ONLINE_BOUTIQUE = {
    "p1": ["p2", "p3", "p4", "p6", "p8", "p9", "p10"],
    "p2": ["p11"],
    "p3": [],
    "p4": [],
    "p5": [],
    "p6": [],
    "p7": [],
    "p8": ["p2", "p3", "p4", "p5", "p6", "p7"],
    "p9": ["p3"],
    "p10": [],
    "p11": [],
}
CHAIN = {"p1": ["p2"], "p2": ["p3"], "p3": []}
DIAMOND = {"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []}
ISOLATED = {"a": ["b"], "b": [], "x": [], "c": []}

TABLE = [
    # (name, graph, algorithm, expected order)
    ("chain kahn", CHAIN, "KahnSort", ["p1", "p2", "p3"]),
    ("chain alternate kahn", CHAIN, "AlternateKahn", ["p1", "p3", "p2"]),
    ("chain reverse kahn", CHAIN, "ReverseKahn", ["p3", "p2", "p1"]),
    ("chain tarjan", CHAIN, "TarjanSort", ["p1", "p2", "p3"]),
    ("chain alternate tarjan", CHAIN, "AlternateTarjan", ["p1", "p3", "p2"]),
    ("chain reverse tarjan", CHAIN, "ReverseTarjan", ["p3", "p2", "p1"]),
    ("diamond kahn", DIAMOND, "KahnSort", ["a", "c", "b", "d"]),
    ("diamond alternate kahn", DIAMOND, "AlternateKahn", ["a", "d", "c", "b"]),
    ("diamond reverse kahn", DIAMOND, "ReverseKahn", ["d", "b", "c", "a"]),
    ("diamond tarjan", DIAMOND, "TarjanSort", ["a", "b", "c", "d"]),
    ("diamond alternate tarjan", DIAMOND, "AlternateTarjan", ["a", "d", "b", "c"]),
    ("diamond reverse tarjan", DIAMOND, "ReverseTarjan", ["d", "c", "b", "a"]),
    # upstream appgroup_test.go asserts these two exactly
    (
        "online boutique kahn",
        ONLINE_BOUTIQUE,
        "KahnSort",
        ["p1", "p10", "p9", "p8", "p7", "p6", "p5", "p4", "p3", "p2", "p11"],
    ),
    (
        "online boutique alternate kahn",
        ONLINE_BOUTIQUE,
        "AlternateKahn",
        ["p1", "p11", "p10", "p2", "p9", "p3", "p8", "p4", "p7", "p5", "p6"],
    ),
    (
        "online boutique reverse kahn",
        ONLINE_BOUTIQUE,
        "ReverseKahn",
        ["p11", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9", "p10", "p1"],
    ),
    # Tarjan is one valid realisation upstream (Go map order); ours starts from the largest selector.
    (
        "online boutique tarjan",
        ONLINE_BOUTIQUE,
        "TarjanSort",
        ["p1", "p10", "p8", "p7", "p6", "p5", "p4", "p2", "p11", "p9", "p3"],
    ),
    (
        "online boutique alternate tarjan",
        ONLINE_BOUTIQUE,
        "AlternateTarjan",
        ["p1", "p3", "p10", "p9", "p8", "p11", "p7", "p2", "p6", "p4", "p5"],
    ),
    (
        "online boutique reverse tarjan",
        ONLINE_BOUTIQUE,
        "ReverseTarjan",
        ["p3", "p9", "p11", "p2", "p4", "p5", "p6", "p7", "p8", "p10", "p1"],
    ),
    ("isolated workloads are kept (kahn)", ISOLATED, "KahnSort", ["a", "b", "c", "x"]),
    ("isolated alternate kahn", ISOLATED, "AlternateKahn", ["a", "x", "b", "c"]),
    ("isolated reverse kahn", ISOLATED, "ReverseKahn", ["x", "c", "b", "a"]),
    ("isolated workloads are kept (tarjan)", ISOLATED, "TarjanSort", ["a", "b", "c", "x"]),
    ("isolated alternate tarjan", ISOLATED, "AlternateTarjan", ["a", "x", "b", "c"]),
    ("isolated reverse tarjan", ISOLATED, "ReverseTarjan", ["x", "c", "b", "a"]),
    *[
        (f"empty {name}", {}, name, [])
        for name in ("KahnSort", "AlternateKahn", "ReverseKahn", "TarjanSort", "AlternateTarjan", "ReverseTarjan")
    ],
    ("single", {"only": []}, "AlternateTarjan", ["only"]),
]


@pytest.mark.parametrize(("graph", "algorithm", "expected"), [row[1:] for row in TABLE], ids=[row[0] for row in TABLE])
def test_orders(graph: dict[str, list[str]], algorithm: str, expected: list[str]) -> None:
    assert topology_order(graph, algorithm) == expected


CYCLES = [
    ("self loop", {"a": ["a"], "b": []}, ["a", "a"]),
    ("two node cycle", {"a": ["b"], "b": ["a"]}, ["a", "b", "a"]),
    ("longer cycle behind a root", {"r": ["x"], "x": ["y"], "y": ["z"], "z": ["x"]}, ["r"]),
]


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
@pytest.mark.parametrize(("graph", "cycle"), [row[1:] for row in CYCLES], ids=[row[0] for row in CYCLES])
def test_cycles_are_errors_naming_the_cycle_in_order(
    graph: dict[str, list[str]], cycle: list[str], algorithm: str
) -> None:
    with pytest.raises(CycleError) as raised:
        topology_order(graph, algorithm)
    if cycle == ["r"]:
        assert raised.value.cycle == ("x", "y", "z", "x")
    else:
        assert list(raised.value.cycle) == cycle


def test_no_cycle_found_in_a_dag() -> None:
    assert find_cycle(ONLINE_BOUTIQUE) == []


def test_unknown_algorithm_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        topology_order(CHAIN, "BubbleSort")


def test_online_boutique_kahn_starts_with_the_frontend_and_respects_every_edge() -> None:
    order = topology_order(ONLINE_BOUTIQUE, "KahnSort")
    assert order[0] == "p1"
    position = {node: index for index, node in enumerate(order)}
    for node, children in ONLINE_BOUTIQUE.items():
        for child in children:
            assert position[node] < position[child]


@st.composite
def dags(draw: st.DrawFn) -> dict[str, list[str]]:
    size = draw(st.integers(min_value=0, max_value=200))
    names = [f"w{index}" for index in range(size)]
    draw(st.randoms()).shuffle(names)  # the names do not follow the topological order
    graph: dict[str, list[str]] = {name: [] for name in names}
    for index, name in enumerate(names):
        later = names[index + 1 :]
        if later:
            targets = draw(st.lists(st.sampled_from(later), max_size=min(5, len(later)), unique=True))
            graph[name] = targets
    return graph


@settings(max_examples=60, deadline=None)
@given(dags())
def test_properties_of_every_algorithm(graph: dict[str, list[str]]) -> None:
    orders = {name: topology_order(graph, name) for name in ALGORITHMS}
    for order in orders.values():
        assert sorted(order) == sorted(graph)  # each workload exactly once
    for base in ("KahnSort", "TarjanSort"):
        position = {node: index for index, node in enumerate(orders[base])}
        for node, children in graph.items():
            assert all(position[node] < position[child] for child in children)
        assert orders["Reverse" + base.removesuffix("Sort")] == orders[base][::-1]
    assert orders == {name: topology_order(graph, name) for name in ALGORITHMS}  # identical across runs


@settings(max_examples=40, deadline=None)
@given(dags(), st.randoms())
def test_workload_order_in_the_spec_does_not_matter(graph: dict[str, list[str]], rng: random.Random) -> None:
    keys = list(graph)
    rng.shuffle(keys)
    shuffled = {key: graph[key] for key in keys}
    for name in ALGORITHMS:
        assert topology_order(shuffled, name) == topology_order(graph, name)
