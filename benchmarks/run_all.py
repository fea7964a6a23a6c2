#!/usr/bin/env python3
"""Run every component benchmark and print one table: figure, budget (docs/design/contracts.md), ratio.

    python -m benchmarks.run_all [--quick] [--against REV] [--only SUBSTRING]      (hack/bench.sh runs this)

Each benchmark is its own script (run as a subprocess, so one does not warm the next) and writes its figures as
a record (``--record FILE``, :mod:`benchmarks.records`); this runner reads each figure's median from the record.
``--quick`` shortens the webhook runs (3 s per rate instead of 10 s) and
leaves out the live benchmark (``bench_live.py``, about eight minutes once: a 5k/100k cluster per phase).

``--against REV`` measures a change: every benchmark also runs on ``REV`` (checked out in a temporary git
worktree, so its scripts import its own code), before and after alternating in one run, and a column gives
after / before (above 1 is slower for a time, faster for a rate).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Figure:
    name: str
    script: str
    args: tuple[str, ...]
    key: str  # the figure's name in the benchmark's record (``--record``): its median is the figure
    budget: float
    at_most: bool  # True: the figure must stay at or below the budget; False: at or above


LIVE = ("--repeat", "1")
FIGURES = (
    Figure("extender filter+prioritize p99, in-process", "bench_extender.py", ("--samples", "200"),
           "in-process: p99", 20, True),
    Figure("extender filter+prioritize p99, HTTP to `netaware extender`", "bench_extender.py", ("--samples", "200"),
           "over HTTP, own process: p99", 20, True),
    Figure("simulate 5,000 nodes / 10,000 pods, network-aware", "bench_simulate.py", (), "network-aware", 270, False),
    Figure("webhook p99, open loop 500 req/s over HTTPS", "bench_webhook.py", ("--rates", "500,1000"),
           "open loop 500 req/s: netaware p99", 5, True),
    Figure("webhook p99, open loop 1,000 req/s over HTTPS", "bench_webhook.py", ("--rates", "500,1000"),
           "open loop 1000 req/s: netaware p99", 5, True),
    Figure("NetworkTopology recompute, 1,000 nodes, 1M keys", "bench_networktopology.py", (),
           "recompute (999,000 keys)", 2, True),
    Figure("descheduler plan, 5,000 nodes / 100,000 pods", "bench_descheduler.py", (),
           "plan (one cycle, snapshot built)", 2, True),
    Figure("probe bytes/s per peer at the chart's defaults (issue 19: a few KB/s)", "bench_probe.py",
           ("--seconds", "10"), "defaults: bytes/s per peer", 4000, True),
    Figure("netaware run initial sync, 5k nodes + 100k pods (live)", "bench_live.py", LIVE,
           "netaware run: initial sync", 60, True),
    Figure("netaware run peak RSS (live)", "bench_live.py", LIVE, "netaware run: peak RSS", 400, True),
    Figure("netaware run RSS / raw-dict floor (live)", "bench_live.py", LIVE, "netaware run: RSS / floor", 1, True),
    Figure("AppGroup create -> status p99, synced (live)", "bench_live.py", LIVE,
           "AppGroup create -> status, synced, p99", 1, True),
    Figure("extender filter+prioritize p99, 50 pod changes/s (live)", "bench_live.py", LIVE, "extender churn: p99",
           20, True),
    Figure("extender peak RSS (live)", "bench_live.py", LIVE, "extender churn: peak RSS", 400, True),
    Figure("extender filter+prioritize p99, 20k nodes (live)", "bench_live.py", LIVE, "extender 20k nodes: p99",
           20, True),
    Figure("descheduler full cycle incl. snapshot (live)", "bench_live.py", LIVE, "descheduler full cycle", 2, True),
)  # fmt: skip


def run_record(root: Path, figure: Figure, extra: tuple[str, ...]) -> dict[str, Any]:
    """Run the figure's benchmark with ``extra`` in ``root`` and return its record (empty when it wrote none)."""
    print(f"running {figure.script} {' '.join(extra)} in {root}", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="netaware-record-") as folder:
        path = Path(folder) / "record.json"
        done = subprocess.run(
            [sys.executable, "-m", f"benchmarks.{Path(figure.script).stem}", *extra, "--record", str(path)],
            capture_output=True,
            text=True,
            check=False,
            cwd=root,
        )
        print(done.stdout, done.stderr[-2000:] if done.returncode else "", file=sys.stderr)
        return json.loads(path.read_text()) if path.exists() else {}


def figure_of(figure: Figure, record: dict[str, Any]) -> tuple[float, str] | None:
    """The figure's median and unit in ``record`` (None: not recorded)."""
    found = record.get("figures", {}).get(figure.key)
    return (float(found["median"]), str(found.get("unit", ""))) if found else None


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
    outputs: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}
    before: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}
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
                    before[key] = run_record(old_root, figure, extra)
                outputs[key] = run_record(ROOT, figure, extra)
            found = figure_of(figure, outputs[key])
            if found is None:
                rows.append((figure.name, "not found", "", "", "FAILED TO RUN", *(("", "") if args.against else ())))
                continue
            value, unit = found
            ratio = value / figure.budget
            meets = ratio <= 1 if figure.at_most else ratio >= 1
            budget = f"{'<=' if figure.at_most else '>='} {figure.budget:g} {unit}"
            row: tuple[str, ...] = (figure.name, f"{value:g} {unit}", budget, f"{ratio:.2f}",
                                    "met" if meets else "NOT MET")  # fmt: skip
            if args.against:
                old = figure_of(figure, before[key])
                row += (f"{old[0]:g} {unit}", f"{value / old[0]:.2f}") if old else ("not recorded", "")
            rows.append(row)
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


if __name__ == "__main__":
    main()
