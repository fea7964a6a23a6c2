#!/usr/bin/env python3
"""Run every component benchmark and print one table: figure, budget (docs/design/contracts.md), ratio.

    python -m benchmarks.run_all [--quick] [--against REV] [--only SUBSTRING]      (hack/bench.sh runs this)

Each benchmark is its own script (run as a subprocess, so one does not warm the next); this runner
reads the figure out of its output. ``--quick`` shortens the webhook runs (3 s per rate instead of 10 s) and
leaves out the live benchmark (``bench_live.py``, about eight minutes once: a 5k/100k cluster per phase).

``--against REV`` measures a change: every benchmark also runs on ``REV`` (checked out in a temporary git
worktree, so its scripts import its own code), before and after alternating in one run, and a column gives
after / before (above 1 is slower for a time, faster for a rate).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
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
        "webhook p99, open loop 500 req/s over HTTPS",
        "bench_webhook.py",
        ("--rates", "500,1000"),
        r"open loop 500 req/s.*?\n\s+netaware\s+\d+ req/s\s+p50\s+[\d.]+ ms\s+p99\s+([\d.]+) ms",
        "ms",
        5,
        True,
    ),
    Figure(
        "webhook p99, open loop 1,000 req/s over HTTPS",
        "bench_webhook.py",
        ("--rates", "500,1000"),
        r"open loop 1000 req/s.*?\n\s+netaware\s+\d+ req/s\s+p50\s+[\d.]+ ms\s+p99\s+([\d.]+) ms",
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
    Figure(
        "probe bytes/s per peer at the chart's defaults (issue 19: a few KB/s)",
        "bench_probe.py",
        ("--seconds", "10"),
        r"defaults .*?, ([\d.]+) B/s per peer",
        "B/s",
        4000,
        True,
    ),
    *(
        Figure(name, "bench_live.py", ("--repeat", "1"), r"(?s)" + pattern, unit, budget, True)
        for name, pattern, unit, budget in (
            (
                "netaware run initial sync, 5k nodes + 100k pods (live)",
                r"initial sync[^\n]*median ([\d.]+) s",
                "s",
                60,
            ),
            (
                "netaware run peak RSS (live)",
                r"netaware run,.*?VmHWM\):\s+min [\d.]+ MiB / median ([\d.]+)",
                "MiB",
                400,
            ),
            (
                "netaware run RSS / raw-dict floor (live)",
                r"netaware run,.*?floor:\s+min [\d.]+x / median ([\d.]+)x",
                "x",
                1,
            ),
            ("AppGroup create -> status p99, synced (live)", r"synced, p99: min [\d.]+ s / median ([\d.]+) s", "s", 1),
            (
                "extender filter+prioritize p99, 50 pod changes/s (live)",
                r"pod changes/s:.*?p99: min [\d.]+ ms / median ([\d.]+) ms",
                "ms",
                20,
            ),
            ("extender peak RSS (live)", r"pod changes/s:.*?VmHWM\):\s+min [\d.]+ MiB / median ([\d.]+)", "MiB", 400),
            (
                "extender filter+prioritize p99, 20k nodes (live)",
                r"20,000 nodes.*?p99: min [\d.]+ ms / median ([\d.]+) ms",
                "ms",
                20,
            ),
            (
                "descheduler full cycle incl. snapshot (live)",
                r"full cycle.*?\n\s+min [\d.]+ s / median ([\d.]+) s",
                "s",
                2,
            ),
        )
    ),
)


def run_figure(root: Path, figure: Figure, extra: tuple[str, ...]) -> str:
    print(f"running {figure.script} {' '.join(extra)} in {root}", file=sys.stderr, flush=True)
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{Path(figure.script).stem}", *extra],
        capture_output=True,
        text=True,
        check=False,
        cwd=root,
    )
    print(done.stdout, file=sys.stderr)
    return done.stdout + done.stderr


def figure_of(figure: Figure, output: str) -> float | None:
    found = re.search(figure.pattern, output)
    return float(found.group(1)) if found else None


@contextlib.contextmanager
def worktree(rev: str | None) -> Iterator[Path | None]:
    """A temporary checkout of ``rev`` (None: no checkout)."""
    if rev is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="netaware-bench-") as folder:
        path = Path(folder) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(path), rev], cwd=ROOT, check=True, capture_output=True
        )
        try:
            yield path
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 s webhook runs per rate instead of 10 s")
    parser.add_argument("--against", metavar="REV", default=None, help="also run on REV and print after / before")
    parser.add_argument("--only", default="", help="only the benchmarks whose script name contains this")
    args = parser.parse_args()
    outputs: dict[tuple[str, tuple[str, ...]], str] = {}
    before: dict[tuple[str, tuple[str, ...]], str] = {}
    rows: list[tuple[str, ...]] = []
    header = ("figure", "measured", "budget", "ratio", "", *(("before", "after/before") if args.against else ()))
    with worktree(args.against) as old_root:
        for figure in FIGURES:
            if args.only not in figure.script:
                continue
            if args.quick and figure.script == "bench_live.py":
                continue  # several minutes: a full run only
            quick = args.quick and figure.script == "bench_webhook.py"
            extra = (*figure.args, "--seconds", "3") if quick else figure.args
            key = (figure.script, extra)
            if key not in outputs:
                if old_root is not None:
                    before[key] = run_figure(old_root, figure, extra)
                outputs[key] = run_figure(ROOT, figure, extra)
            value = figure_of(figure, outputs[key])
            if value is None:
                rows.append((figure.name, "not found", "", "", "FAILED TO RUN", *(("", "") if args.against else ())))
                continue
            ratio = value / figure.budget
            meets = ratio <= 1 if figure.at_most else ratio >= 1
            budget = f"{'<=' if figure.at_most else '>='} {figure.budget:g} {figure.unit}"
            row: tuple[str, ...] = (
                figure.name,
                f"{value:g} {figure.unit}",
                budget,
                f"{ratio:.2f}",
                "met" if meets else "NOT MET",
            )
            if args.against:
                old = figure_of(figure, before[key])
                row += (f"{old:g} {figure.unit}", f"{value / old:.2f}") if old else ("not found", "")
            rows.append(row)
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


if __name__ == "__main__":
    main()
