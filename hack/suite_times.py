#!/usr/bin/env python3
"""Keep the times of a run of the README's test command as the record ``docs/figures/suite_times.json``: the
control plane's build (``.tools/build-seconds``, written by ``hack/control-plane/build.sh``) and the suite's
seconds and tests per tier (``.tools/suite-times.json``, written by ``tests/conftest.py`` after every run).

    python -m hack.suite_times --tools cold|warm --go-cache cold|warm [--from DIR] [--record FILE]

``--tools``: whether the build started without ``.tools/`` (a clean clone: ``cold``) or with it (``warm``);
``--go-cache``: whether Go's module and build caches were empty (a fresh machine: ``cold``) or filled;
``--from``: the checkout whose ``.tools/`` holds the times (a clean clone CI ran in; default: this one). A run of
part of the suite is refused: the record is of every tier.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from benchmarks import records

ROOT = pathlib.Path(__file__).resolve().parent.parent

TIERS = ("unit", "integration", "packaging", "e2e", "realnode")  # the README's tiers, in the order they run


def figures(times: dict[str, dict[str, float]], build_seconds: float, wall_seconds: float) -> dict[str, object]:
    """One figure per tier's seconds and tests, the suite's wall time and the build's."""
    found: dict[str, object] = {"build s": records.figure([build_seconds], "s"),
                                "suite s": records.figure([wall_seconds], "s")}  # fmt: skip
    for tier in TIERS:
        found[f"{tier}/seconds"] = records.figure([times["seconds"][tier]], "s")
        found[f"{tier}/tests"] = records.figure([times["tests"][tier]])
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tools", choices=("cold", "warm"), required=True)
    parser.add_argument("--go-cache", choices=("cold", "warm"), required=True)
    parser.add_argument("--from", dest="source", type=pathlib.Path, default=ROOT)
    parser.add_argument("--record", type=pathlib.Path, default=ROOT / "docs" / "figures" / "suite_times.json")
    args = parser.parse_args()
    tools = args.source / ".tools"
    try:
        times = json.loads((tools / "suite-times.json").read_text())
        build_seconds = float((tools / "build-seconds").read_text())
    except (OSError, ValueError) as error:
        print(f"suite_times: {error}", file=sys.stderr)
        return 2
    missing = [tier for tier in TIERS if not times.get("tests", {}).get(tier)]
    if missing:
        print(f"suite_times: the run has no test of the tiers {', '.join(missing)}: not the whole suite",
              file=sys.stderr)  # fmt: skip
        return 2
    parameters = {"tools": args.tools, "go_cache": args.go_cache, "command": "the README's test command"}
    found = figures(times, build_seconds, float(times["wall seconds"]))
    records.write(args.record, "suite_times", parameters, found, module="hack.suite_times")
    print(f"wrote {args.record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
