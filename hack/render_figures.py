#!/usr/bin/env python3
"""Render the documentation's figures from the committed benchmark records (``docs/figures/*.json``):
every page region between ``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->`` becomes the table of record
``NAME``, and every plot of :data:`PLOTS` is drawn from its records into ``docs/figures/PLOT.svg``
(``python hack/render_figures.py``; ``--check`` exits 1 when a page or a plot and its records disagree).

A record is what a benchmark's ``--record FILE`` writes (:mod:`benchmarks.records`): its parameters, the machine,
and each figure's min / median / max with its unit — or, for a comparison, one such figure per column. A region
may name the figures it shows: ``<!-- figures:bench_plan only=boutique/,tight/ -->`` keeps the figures whose
names start with one of those, and ``columns="a,b c"`` the columns of a comparison it shows, in that order. A
plot carries the digest of the records and the code it was drawn from (its SVG description), so the check does not
depend on matplotlib drawing the same bytes from one version to the next.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import math
import pathlib
import re
import shlex
from collections.abc import Callable
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIGURES = ROOT / "docs" / "figures"
REGION = re.compile(
    r"(<!-- figures:(?P<name>[a-z0-9_-]+)(?P<options>[^>]*)-->\n)(?P<body>.*?)(<!-- /figures:(?P=name) -->)", flags=re.S
)
Record = dict[str, Any]


def _number(value: float) -> str:
    """Whole numbers in full (10,600), others to 4 significant digits (the records' precision)."""
    if math.isnan(value):
        return "-"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.4g}"


def _spread(figure: dict[str, Any]) -> str:
    """A comparison's cell: the median, and the min-max when the runs differ."""
    low, median, high = (figure[key] for key in ("min", "median", "max"))
    return (
        _number(median) if low == high or math.isnan(median) else f"{_number(median)} ({_number(low)}-{_number(high)})"
    )


def table(record: Record, only: tuple[str, ...], columns: tuple[str, ...] = (), file: str = "") -> str:
    parameters = ", ".join(
        f"{key} {value}" for key, value in record["parameters"].items() if value is not None and key != "record"
    )
    machine = record["machine"]
    lines = [
        f"Record `docs/figures/{file or record['benchmark']}.json`: "
        f"`python -m {record.get('module') or 'benchmarks.' + record['benchmark']}` "
        f"({parameters}) on {machine['cpus']} CPUs, Python {machine['python']}.",
        "",
    ]
    chosen = {name: figure for name, figure in record["figures"].items() if not only or name.startswith(only)}
    if any("columns" in figure for figure in chosen.values()):
        names = list(columns or next(figure for figure in chosen.values() if "columns" in figure)["columns"])
        lines += ["| figure | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        for name, figure in chosen.items():
            cells = [_spread(figure["columns"][column]) if column in figure["columns"] else "" for column in names]
            lines.append(f"| {name} | {' | '.join(cells)} |")
        return "\n".join(lines) + "\nMedian of the runs (min-max).\n"
    budgets = any("budget" in figure for figure in chosen.values())
    lines += ["| figure | min | median | max | unit |" + (" budget |" if budgets else ""),
              "|---|---|---|---|---|" + ("---|" if budgets else "")]  # fmt: skip
    for name, figure in chosen.items():
        cells = [_number(figure[key]) for key in ("min", "median", "max")]
        budget = f" {figure.get('budget', '')} |" if budgets else ""
        lines.append(f"| {name} | {' | '.join(cells)} | {figure.get('unit', '')} |{budget}")
    return "\n".join(lines) + "\n"


def render(text: str, records: dict[str, Record]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in records:
            raise SystemExit(f"no record docs/figures/{name}.json for the region figures:{name}")
        options = dict(part.split("=", 1) for part in shlex.split(match.group("options")) if "=" in part)
        only = tuple(options["only"].split(",")) if "only" in options else ()
        columns = tuple(options["columns"].split(",")) if "columns" in options else ()
        return match.group(1) + table(records[name], only, columns, name) + match.group(5)

    return REGION.sub(replace, text)


# -- plots ---------------------------------------------------------------------------------------------------


def _medians_and_errors(cells: list[dict[str, Any] | None]) -> tuple[list[float], list[list[float]]]:
    """Bar heights (the medians; 0 where a cell is missing) and their error bars (down to the min, up to the max)."""
    stats = [cell or {"min": 0.0, "median": 0.0, "max": 0.0} for cell in cells]
    medians = [cell["median"] for cell in stats]
    return medians, [[cell["median"] - cell["min"] for cell in stats], [cell["max"] - cell["median"] for cell in stats]]


def _budget(figure: dict[str, Any]) -> float:
    """The number of a figure's recorded budget ("< 5 ms" -> 5)."""
    found = re.search(r"[\d.]+", str(figure.get("budget", "")))
    if found is None:
        raise SystemExit(f"a plotted figure has no budget: {figure}")
    return float(found.group())


def _bars(axes: Any, record: Record, figures: list[tuple[str, str]], title: str) -> None:
    """Grouped bars: one group per (figure name, label), one bar per column, the min-max as an error bar."""
    columns = list(record["figures"][figures[0][0]]["columns"])
    width = 0.8 / len(columns)
    for position, column in enumerate(columns):
        medians, errors = _medians_and_errors([record["figures"][name]["columns"].get(column) for name, _ in figures])
        offsets = [group + (position - (len(columns) - 1) / 2) * width for group in range(len(figures))]
        axes.bar(offsets, medians, width, yerr=errors, capsize=2, label=column)
    axes.set_xticks(range(len(figures)), [label for _, label in figures])
    axes.set_title(title, fontsize=10)


def peers_plot(records: dict[str, Record], pyplot: Any) -> Any:
    """netaware against scheduler-plugins: speed, network cost, and the bandwidth guarantee."""
    record = records["bench_peers"]
    figure, (speed, cost, guarantee) = pyplot.subplots(1, 3, figsize=(13, 3.8))
    scenarios = [("onlineboutique", "Online Boutique"), ("random-dag", "random DAG"), ("thesis-1", "thesis 1")]
    _bars(speed, record, [(f"{name}: pods/s", label) for name, label in scenarios], "pods bound per second")
    _bars(cost, record, [(f"{name}: mean cost per edge", label) for name, label in scenarios[:2]],
          "mean network cost per dependency edge")  # fmt: skip
    _bars(guarantee, record, [("thesis-1: overcommitted nodes", "thesis 1")], "nodes overcommitted (of 200)")
    speed.legend(fontsize=7)
    figure.tight_layout()
    return figure


def latency_plot(records: dict[str, Record], pyplot: Any) -> Any:
    """Latency against its floor and its budget: the webhook (empty aiohttp handler) and the extender (a server
    on the same stack that decides nothing)."""
    webhook, live = records["bench_webhook"]["figures"], records["bench_live"]["figures"]
    rows = [
        ("webhook\n500 req/s", webhook["open loop 500 req/s: netaware p99"],
         webhook["open loop 500 req/s: empty handler p99"]),
        ("webhook\n1,000 req/s", webhook["open loop 1000 req/s: netaware p99"],
         webhook["open loop 1000 req/s: empty handler p99"]),
        ("extender\n5k nodes, churn", live["extender churn: p99"], live["extender churn: protocol floor p99"]),
        ("extender\n20k nodes", live["extender 20k nodes: p99"], live["extender 20k nodes: protocol floor p99"]),
    ]  # fmt: skip
    figure, axes = pyplot.subplots(figsize=(8, 3.6))
    for offset, label, column in ((-0.2, "netaware", 1), (0.2, "floor", 2)):
        medians, errors = _medians_and_errors([row[column] for row in rows])
        axes.bar([i + offset for i in range(len(rows))], medians, 0.4, yerr=errors, capsize=2, label=label)
    for i, row in enumerate(rows):  # each netaware figure's budget, as its benchmark recorded it
        axes.hlines(_budget(row[1]), i - 0.45, i + 0.45, colors="black", linestyles="dashed", linewidth=1)
    axes.set_xticks(range(len(rows)), [row[0] for row in rows], fontsize=8)
    axes.set_ylabel("p99, ms (dashed: budget)")
    axes.legend(fontsize=8, loc="upper left")
    figure.tight_layout()
    return figure


PLOTS: dict[str, tuple[tuple[str, ...], Callable[[dict[str, Record], Any], Any]]] = {
    "peers": (("bench_peers",), peers_plot),
    "latency": (("bench_webhook", "bench_live"), latency_plot),
}


def digest(records: dict[str, Record], names: tuple[str, ...], plot: Callable[..., Any]) -> str:
    """What a plot is drawn from: its records and the code that draws it."""
    text = json.dumps([records[name] for name in names], sort_keys=True) + inspect.getsource(plot)
    return "records sha256 " + hashlib.sha256(text.encode()).hexdigest()[:16]


def drawn_from(path: pathlib.Path) -> str | None:
    """The records digest a plot says it was drawn from (None: no plot)."""
    if not path.exists():
        return None
    found = re.search(r"<dc:description>([^<]*)</dc:description>", path.read_text())
    return found.group(1) if found else ""


def draw(name: str, records: dict[str, Record], stamp: str) -> None:
    import matplotlib

    matplotlib.use("svg")
    matplotlib.rcParams["svg.hashsalt"] = "netaware"  # stable element ids
    from matplotlib import pyplot

    _, plot = PLOTS[name]
    figure = plot(records, pyplot)
    figure.savefig(FIGURES / f"{name}.svg", metadata={"Date": None, "Description": stamp})
    pyplot.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if a page or a plot differs from its records")
    args = parser.parse_args(argv)
    records = {path.stem: json.loads(path.read_text()) for path in sorted(FIGURES.glob("*.json"))}
    drift = []
    for page in sorted(FIGURES.parent.rglob("*.md")):
        text = page.read_text()
        rendered = render(text, records)
        if rendered != text:
            if args.check:
                drift.append(str(page.relative_to(FIGURES.parent.parent)))
            else:
                page.write_text(rendered)
    for name, (needs, plot) in PLOTS.items():
        if not all(need in records for need in needs):
            continue
        stamp = digest(records, needs, plot)
        if drawn_from(FIGURES / f"{name}.svg") != stamp:
            if args.check:
                drift.append(f"docs/figures/{name}.svg")
            else:
                draw(name, records, stamp)
    if drift:
        print(f"out of date with their records (run python hack/render_figures.py): {', '.join(drift)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
