#!/usr/bin/env python3
"""Day two on real nodes, as a record: ``tests/e2e/test_day_two.py`` run ``--repeat`` times (each run a control plane
of its own with three real nodes and a KWOK node), and what its tests measured kept as min / median / max.

    python -m benchmarks.bench_day_two [--repeat 3] [--record FILE]

Per run: an upgrade from the previous release (tests/fixtures/releases) and one that replaces every pod of this
release, each while a pod is created every 100 ms (refused, admitted without their mutation, the second
scheduler's extender calls skipped); then the node holding the operator's and the second scheduler's leaders lost
(its kubelet, containerd and pods killed): pods refused meanwhile, and the seconds from the loss to the next
AppGroup status written by the new operator leader and to the first binding by the new scheduler leader (the
budget: the lease duration + 5 s). Needs root and the built control plane (bash hack/control-plane/build.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import records

ROOT = Path(__file__).resolve().parent.parent
MODULE = "tests/e2e/test_day_two.py"
BUDGET = "<= 20 s"  # the lease duration (15 s, the chart's default) + 5 s


def one_run(folder: Path, run: int) -> dict[str, float]:
    figures = folder / f"run-{run}.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", MODULE],
        cwd=ROOT,
        env={**os.environ, "NETAWARE_DAY_TWO_FIGURES": str(figures), "CI": "true"},
        check=False,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"run {run}: the day-two tests failed:\n{done.stdout[-4000:]}")
    found: dict[str, float] = json.loads(figures.read_text().splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--record", default=None, help="write the figures as JSON to this file")
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="netaware-day-two-") as folder:
        for run in range(args.repeat):
            runs.append(one_run(Path(folder), run))
            print(f"run {run + 1}: " + ", ".join(f"{key} {value:g}" for key, value in runs[-1].items()), flush=True)
    figures: dict[str, Any] = {}
    for name in runs[0]:
        unit = "s" if name.endswith("seconds") or "->" in name else ""
        extra = {"budget": BUDGET} if "->" in name else {}
        figures[name] = records.figure([run[name] for run in runs], unit, **extra)
    for name, value in figures.items():
        print(f"{name}: min {value['min']} median {value['median']} max {value['max']} {value['unit']}")
    if args.record:
        records.write(args.record, "bench_day_two", {"repeat": args.repeat, "module": MODULE}, figures)


if __name__ == "__main__":
    main()
