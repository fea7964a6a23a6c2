"""A benchmark's record: its parameters, the machine, and each figure with min / median / max (and its floor or
budget where it has one), as JSON. Records committed under ``docs/figures/`` are what the documentation's tables
are rendered from (``python hack/render_figures.py``), so a page never says what no run measured."""

from __future__ import annotations

import json
import os
import platform
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    return {
        "system": platform.system(),
        "processor": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def figure(values: Iterable[float], unit: str = "", **extra: float | str) -> dict[str, Any]:
    """min / median / max of ``values`` (rounded to 4 significant digits), with ``unit`` and e.g. ``floor=``."""
    ordered = sorted(float(value) for value in values)

    def round4(value: float) -> float:
        return float(f"{value:.4g}")

    return {"min": round4(ordered[0]), "median": round4(statistics.median(ordered)), "max": round4(ordered[-1]),
            "unit": unit, **extra}  # fmt: skip


def columns(values: Mapping[str, Iterable[float]], unit: str = "") -> dict[str, Any]:
    """One figure measured for several subjects (a comparison's columns): each column's min / median / max."""
    return {"unit": unit, "columns": {name: figure(column) for name, column in values.items()}}


def measured_and_simulated(
    measured: Mapping[str, Sequence[Mapping[str, Any]]], simulated: Mapping[str, Mapping[str, Any]], keys: Iterable[str]
) -> dict[str, Any]:
    """Comparisons of a benchmark on the real control plane: per figure ``key``, a column per mode measured (its
    runs) and one per mode the simulator predicted (``MODE (simulate)``, where it predicts a number)."""
    return {
        key: columns({
            **{mode: [run[key] for run in runs] for mode, runs in measured.items()},
            **{f"{mode} (simulate)": [float(predicted[key])] for mode, predicted in simulated.items()
               if isinstance(predicted.get(key), int | float)},
        })
        for key in keys
    }  # fmt: skip


def write(
    path: str | Path, benchmark: str, parameters: Mapping[str, Any], figures: Mapping[str, Any], module: str = ""
) -> None:
    """The record; ``module``: what makes it, when not ``benchmarks.<benchmark>``."""
    record = {"benchmark": benchmark, "parameters": dict(parameters), "machine": machine(), "figures": dict(figures)}
    if module:
        record["module"] = module
    Path(path).write_text(json.dumps(record, indent=2, sort_keys=False) + "\n")
