#!/usr/bin/env python3
"""Mutation check of the scheduling and bandwidth rules: one-line bugs put into the code, one at a time, and
the relevant tests run against each; a mutant the tests do not kill is a rule no test pins down.

    python hack/mutation.py [--list] [--only SUBSTRING]
    python hack/mutation.py --systematic [--list] [--only SUBSTRING]

``--systematic`` generates the mutants mechanically, as mutmut does, over the bandwidth model and the plugin
modules (``SCOPE``): every comparison flipped (``<`` ↔ ``<=``, ``>`` ↔ ``>=``, ``==`` ↔ ``!=``, ``is`` ↔
``is not``, ``in`` ↔ ``not in``), every arithmetic operator swapped (``+`` ↔ ``-``, ``*`` → ``//``, ``//`` →
``*``), every integer constant n → n + 1, ``True`` ↔ ``False``, ``and`` ↔ ``or``, ``not x`` → ``x``; each
mutant is the module re-written from its mutated syntax tree (docstrings kept out). A survivor is printed
with its line; the closing note says which are killed by a new test and which are equivalent.

The mutants include the six classes a review found surviving before (duplex ``<=`` → ``<`` in the
simulator, ``pod_demand`` reading the limit before the request, the score ignoring the pod's own demand,
``node_capacity`` skipping the NodeSLO total, the extender's score rounding, the combined filter checking only
ingress), and their neighbours. The working tree is restored after each mutant (also on Ctrl-C).
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parent.parent
TESTS = [
    "tests/engine/test_schedule.py",
    "tests/engine/test_differential.py",
    "tests/engine/test_bandwidth.py",
    "tests/engine/test_bandwidth_model.py",
    "tests/engine/test_plugin_rules.py",
    "tests/engine/test_simulate.py",
    "tests/engine/test_lownodeload.py",
    "tests/engine/test_nodeslo.py",
    "tests/extender/test_extender.py",
]


@dataclass(frozen=True)
class Mutant:
    file: str
    old: str
    new: str
    what: str


BANDWIDTH = "operators/engine/cluster/bandwidth.py"
NB = "operators/engine/scheduling/network_bandwidth.py"
NO = "operators/engine/scheduling/network_overhead.py"
MUTANTS = [
    # the six classes
    Mutant(
        BANDWIDTH,
        "(want_in <= capacity - used_in)",
        "(want_in < capacity - used_in)",
        "duplex fit: <= becomes < (the simulator's copy, before)",
    ),
    Mutant(
        BANDWIDTH,
        'for key in (f"kubernetes.io/{direction}-request", f"kubernetes.io/{direction}-bandwidth"):',
        'for key in (f"kubernetes.io/{direction}-bandwidth", f"kubernetes.io/{direction}-request"):',
        "pod_demand reads the limit before the request",
    ),
    Mutant(
        NB,
        "used_in + used_out + demand[0] + demand[1]",
        "used_in + used_out",
        "the score ignores the pod's own demand",
    ),
    Mutant(BANDWIDTH, "    if slo_total is not None:\n", "    if False:\n", "node_capacity skips the NodeSLO total"),
    Mutant(
        "operators/extender/server.py",
        "total * MAX_EXTENDER_PRIORITY // (100 * weights)",
        "round(total * MAX_EXTENDER_PRIORITY / (100 * weights))",
        "the extender's score rounds instead of truncating",
    ),
    Mutant(
        BANDWIDTH,
        "wanted = want_in + want_out\n",
        "wanted = want_in\n",
        "the combined filter checks only ingress",
    ),
    # neighbours
    Mutant(BANDWIDTH, "capacity * 2 if self is", "capacity * 1 if self is", "duplex is not doubled"),
    Mutant(
        BANDWIDTH,
        "(want_out <= capacity - used_out)",
        "(want_out <= capacity - used_in)",
        "duplex egress checked against ingress usage",
    ),
    Mutant(BANDWIDTH, "np.maximum(0, total - after) * 100 // safe", "(total - after) * 100 // safe", "no floor at 0"),
    Mutant(
        BANDWIDTH,
        "return Capacity(total, SYSTEM_CONFIG)",
        "return Capacity(total, DEFAULT)",
        "the NodeSLO total reported as the default",
    ),
    Mutant(
        BANDWIDTH,
        "for annotation in CAPACITY_ANNOTATIONS:",
        "for annotation in reversed(CAPACITY_ANNOTATIONS):",
        "the thesis annotation wins over Koordinator's",
    ),
    Mutant(
        BANDWIDTH,
        'for name in (f"{direction}Request", f"{direction}Limit"):',
        'for name in (f"{direction}Limit", f"{direction}Request"):',
        "networkQOS limit before request",
    ),
    Mutant(NO, "SAME_ZONE_COST = 1", "SAME_ZONE_COST = 0", "same zone costs 0"),
    Mutant(NO, "MAX_COST = 100", "MAX_COST = 99", "a missing cost is 99"),
    Mutant(NO, "if cost <= limit:", "if cost < limit:", "maxNetworkCost is exclusive"),
    Mutant(
        NO, "rows = np.nonzero(violated > satisfied)[0]", "rows = np.nonzero(violated >= satisfied)[0]", ">= in filter"
    ),
    Mutant(
        "operators/engine/scheduling/normalize.py",
        "return (raw - low) * 100 // (high - low)",
        "return (raw - low) * 100 // (high - low + 1)",
        "min-max off by one",
    ),
    Mutant(
        "operators/engine/scheduling/network_overhead.py",
        "return 100 - np.trunc(100 * (raw - low) / (high - low)).astype(np.int64)",
        "return 100 - np.round(100 * (raw - low) / (high - low)).astype(np.int64)",
        "NetworkOverhead's normalisation rounds",
    ),
    Mutant(
        "operators/engine/scheduling/index.py",
        "if pod.node_name and not pod.is_terminal:",
        "if pod.node_name:",
        "terminated pods count as used bandwidth",
    ),
]


SCOPE = [
    BANDWIDTH,
    NB,
    "operators/engine/scheduling/normalize.py",
    "operators/engine/scheduling/allocatable.py",
]
COMPARE_SWAPS = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
BINOP_SWAPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult}


def systematic(file: str) -> list[tuple[Mutant, str]]:
    """Every mechanical mutant of ``file``: (the mutant, the module's mutated source)."""
    source = (ROOT / file).read_text()
    found: list[tuple[Mutant, str]] = []
    count = len(list(ast.walk(ast.parse(source))))
    for position in range(count):
        for variant in range(2):
            tree = ast.parse(source)
            nodes = list(ast.walk(tree))
            node = nodes[position]
            what = _mutate(node, variant)
            if what is None:
                continue
            line = getattr(node, "lineno", 0)
            found.append((Mutant(file, "", "", f"{file}:{line}: {what}"), ast.unparse(tree) + "\n"))
    return found


def _mutate(node: ast.AST, variant: int) -> str | None:
    """Mutate ``node`` in place (variant 0 or 1 where a node has two mutations); what was done, or None."""
    if variant == 0 and isinstance(node, ast.Compare) and type(node.ops[0]) in COMPARE_SWAPS:
        old = type(node.ops[0])
        node.ops[0] = COMPARE_SWAPS[old]()
        return f"{old.__name__} -> {type(node.ops[0]).__name__}"
    if variant == 0 and isinstance(node, ast.BinOp) and type(node.op) in BINOP_SWAPS:
        old = type(node.op)
        node.op = BINOP_SWAPS[old]()
        return f"{old.__name__} -> {type(node.op).__name__}"
    if variant == 0 and isinstance(node, ast.BoolOp):
        old = type(node.op)
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        return f"{old.__name__} -> {type(node.op).__name__}"
    if variant == 0 and isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        node.op = ast.UAdd()  # +x of a bool is the bool as an int: truthiness unchanged, the `not` gone
        return "not x -> x"
    if isinstance(node, ast.Constant) and type(node.value) is int and variant == 0:
        node.value += 1
        return f"constant {node.value - 1} -> {node.value}"
    if isinstance(node, ast.Constant) and type(node.value) is bool and variant == 0:
        node.value = not node.value
        return f"{not node.value} -> {node.value}"
    return None


def _chosen(mutant: Mutant, only: str) -> bool:
    return any(part in mutant.what for part in only.split("|"))


def run_systematic(args: argparse.Namespace) -> int:
    chosen = [(m, text) for file in SCOPE for m, text in systematic(file) if _chosen(m, args.only)]
    if args.list:
        for mutant, _ in chosen:
            print(mutant.what)
        print(f"{len(chosen)} mutants")
        return 0
    survivors = []
    for mutant, text in chosen:
        path = ROOT / mutant.file
        original = path.read_text()
        started = time.monotonic()
        try:
            path.write_text(text)
            passed = run_tests()
        finally:
            path.write_text(original)
        print(f"{'SURVIVED' if passed else 'killed  '} {mutant.what} ({time.monotonic() - started:.0f} s)", flush=True)
        if passed:
            survivors.append(mutant)
    print(f"{len(chosen) - len(survivors)} of {len(chosen)} mutants killed")
    for mutant in survivors:
        print(f"survivor: {mutant.what}")
    return 1 if survivors else 0


def run_tests() -> bool:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--timeout", "60", *TESTS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument(
        "--only", default="", help="only mutants whose description contains this (alternatives separated by |)"
    )
    parser.add_argument("--systematic", action="store_true", help="mechanical mutants over SCOPE (see above)")
    args = parser.parse_args()
    # SIGTERM as Ctrl-C: the mutated file is restored by the ``finally`` around each run either way.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if args.systematic:
        return run_systematic(args)
    chosen = [m for m in MUTANTS if _chosen(m, args.only)]
    if args.list:
        for mutant in chosen:
            print(f"{mutant.file}: {mutant.what}")
        return 0
    survivors = []
    for mutant in chosen:
        path = ROOT / mutant.file
        original = path.read_text()
        if original.count(mutant.old) != 1:
            print(f"STALE   {mutant.what}: the line to mutate is not in {mutant.file} exactly once")
            survivors.append(mutant)
            continue
        started = time.monotonic()
        try:
            path.write_text(original.replace(mutant.old, mutant.new))
            passed = run_tests()
        finally:
            path.write_text(original)
        verdict = "SURVIVED" if passed else "killed "
        print(f"{verdict} {mutant.what} ({time.monotonic() - started:.0f} s)", flush=True)
        if passed:
            survivors.append(mutant)
    print(f"{len(chosen) - len(survivors)} of {len(chosen)} mutants killed")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
