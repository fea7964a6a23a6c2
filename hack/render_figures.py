#!/usr/bin/env python3
"""Render the documentation's figure tables from the committed benchmark records (``docs/figures/*.json``):
every page region between ``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->`` becomes the table of record
``NAME`` (``python hack/render_figures.py``; ``--check`` exits 1 when a page and its record disagree).

A record is what a benchmark's ``--record FILE`` writes (:mod:`benchmarks.records`): its parameters, the machine,
and each figure's min / median / max with its unit. A region may name the figures it shows:
``<!-- figures:bench_plan only=boutique/,tight/ -->`` keeps the figures whose names start with one of those.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIGURES = ROOT / "docs" / "figures"
REGION = re.compile(
    r"(<!-- figures:(?P<name>[a-z0-9_-]+)(?P<options>[^>]*)-->\n)(?P<body>.*?)(<!-- /figures:(?P=name) -->)", flags=re.S
)


def _number(value: float) -> str:
    """Whole numbers in full (10,600), others to 4 significant digits (the records' precision)."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.4g}"


def table(record: dict[str, Any], only: tuple[str, ...]) -> str:
    parameters = ", ".join(f"{key} {value}" for key, value in record["parameters"].items() if value is not None)
    machine = record["machine"]
    lines = [
        f"Record `docs/figures/{record['benchmark']}.json`: `python -m benchmarks.{record['benchmark']}` "
        f"({parameters}) on {machine['cpus']} CPUs, Python {machine['python']}.",
        "",
    ]
    budgets = any("budget" in figure for figure in record["figures"].values())
    lines += ["| figure | min | median | max | unit |" + (" budget |" if budgets else ""),
              "|---|---|---|---|---|" + ("---|" if budgets else "")]  # fmt: skip
    for name, figure in record["figures"].items():
        if only and not name.startswith(only):
            continue
        cells = [_number(figure[key]) for key in ("min", "median", "max")]
        budget = f" {figure.get('budget', '')} |" if budgets else ""
        lines.append(f"| {name} | {' | '.join(cells)} | {figure.get('unit', '')} |{budget}")
    return "\n".join(lines) + "\n"


def render(text: str, records: dict[str, dict[str, Any]]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in records:
            raise SystemExit(f"no record docs/figures/{name}.json for the region figures:{name}")
        options = dict(part.split("=", 1) for part in match.group("options").split() if "=" in part)
        only = tuple(options["only"].split(",")) if "only" in options else ()
        return match.group(1) + table(records[name], only) + match.group(5)

    return REGION.sub(replace, text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if a page differs from its records")
    args = parser.parse_args()
    records = {path.stem: json.loads(path.read_text()) for path in sorted(FIGURES.glob("*.json"))}
    drift = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text()
        rendered = render(text, records)
        if rendered != text:
            if args.check:
                drift.append(str(page.relative_to(ROOT)))
            else:
                page.write_text(rendered)
    if drift:
        print(f"pages out of date with their records (run python hack/render_figures.py): {', '.join(drift)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
