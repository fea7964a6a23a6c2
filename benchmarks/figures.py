"""How the benchmarks print a figure over several runs."""

from __future__ import annotations

import statistics
from collections.abc import Iterable


def spread(values: Iterable[float], spec: str = "g") -> str:
    """``min / median / max`` of ``values``, each formatted with ``spec``."""
    ordered = sorted(values)
    return " / ".join(format(value, spec) for value in (ordered[0], statistics.median(ordered), ordered[-1]))


def named_spread(values: list[float], unit: str = "", digits: int = 2) -> str:
    """``min X / median Y / max Z`` with ``unit`` after each (what hack/bench.sh's table reads); n/a when empty."""
    if not values:
        return "n/a"
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"min {low:.{digits}f}{unit} / median {mid:.{digits}f}{unit} / max {high:.{digits}f}{unit}"


def percentile(values: Iterable[float], fraction: float) -> float:
    """The value at ``fraction`` of the sorted ``values`` (nan when there are none)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] if ordered else float("nan")
