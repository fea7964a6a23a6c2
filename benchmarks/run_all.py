#!/usr/bin/env python3
"""Run every component benchmark and print one table: figure, budget (SPEC.md §8), ratio.

    python benchmarks/run_all.py [--quick]      (hack/bench.sh runs this)

Each benchmark is its own script (run as a subprocess, so one does not warm the next); this runner
reads the figure out of its output. ``--quick`` shortens the webhook run (5 s instead of 30 s).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Figure:
    name: str
    script: str
    args: tuple[str, ...]
    pattern: str  # one group: the figure
    unit: str
    budget: float
    at_most: bool  # True: the figure must stay at or below the budget; False: at or above


FIGURES = (
    Figure(
        "extender filter+prioritize p99, in-process",
        "bench_extender.py",
        ("--samples", "200"),
        r"in-process\s+p50\s+[\d.]+ ms\s+p99\s+([\d.]+) ms",
        "ms",
        20,
        True,
    ),
    Figure(
        "extender filter+prioritize p99, HTTP to `netaware extender`",
        "bench_extender.py",
        ("--samples", "200"),
        r"over HTTP\s+p50\s+[\d.]+ ms\s+p99\s+([\d.]+) ms.*own process",
        "ms",
        20,
        True,
    ),
    Figure(
        "simulate 5,000 nodes / 10,000 pods, network-aware",
        "bench_simulate.py",
        (),
        r"network-aware .*?([\d.]+) pods/s",
        "pods/s",
        270,
        False,
    ),
    Figure(
        "webhook p99, 200 concurrent HTTPS clients",
        "bench_webhook.py",
        (),
        r"netaware\s+\d+ req/s\s+p50\s+[\d.]+ ms\s+p99\s+([\d.]+) ms",
        "ms",
        5,
        True,
    ),
    Figure(
        "NetworkTopology recompute, 1,000 nodes, 1M keys",
        "bench_networktopology.py",
        (),
        r"best of \d+: ([\d.]+) s",
        "s",
        2,
        True,
    ),
    Figure(
        "descheduler plan, 5,000 nodes / 100,000 pods",
        "bench_descheduler.py",
        (),
        r"plan: best ([\d.]+) s",
        "s",
        2,
        True,
    ),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="5 s webhook runs instead of 30 s")
    args = parser.parse_args()
    outputs: dict[tuple[str, tuple[str, ...]], str] = {}
    rows = []
    for figure in FIGURES:
        extra = ("--seconds", "5") if args.quick and figure.script == "bench_webhook.py" else figure.args
        key = (figure.script, extra)
        if key not in outputs:
            print(f"running {figure.script} {' '.join(extra)}", file=sys.stderr, flush=True)
            done = subprocess.run(
                [sys.executable, str(ROOT / "benchmarks" / figure.script), *extra],
                capture_output=True,
                text=True,
                check=False,
            )
            outputs[key] = done.stdout + done.stderr
            print(done.stdout, file=sys.stderr)
        found = re.search(figure.pattern, outputs[key])
        if found is None:
            rows.append((figure.name, "not found", "", "", "FAILED TO RUN"))
            continue
        value = float(found.group(1))
        ratio = value / figure.budget
        meets = ratio <= 1 if figure.at_most else ratio >= 1
        budget = f"{'<=' if figure.at_most else '>='} {figure.budget:g} {figure.unit}"
        rows.append((figure.name, f"{value:g} {figure.unit}", budget, f"{ratio:.2f}", "met" if meets else "NOT MET"))
    rows.append(("operator memory, 5,000 nodes + 100,000 pods watched", "not measured", "< 400 MiB", "", ""))
    rows.append(("create AppGroup -> status (emulator)", "not measured", "<= 1.5x empty kopf", "", ""))
    widths = [max(len(row[i]) for row in [("figure", "measured", "budget", "ratio", ""), *rows]) for i in range(5)]
    for row in [("figure", "measured", "budget", "ratio", ""), *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


if __name__ == "__main__":
    main()
