"""How the benchmarks print a figure over several runs."""

from __future__ import annotations

import statistics
from collections.abc import Iterable


def spread(values: Iterable[float], spec: str = "g") -> str:
    """``min / median / max`` of ``values``, each formatted with ``spec``."""
    ordered = sorted(values)
    return " / ".join(format(value, spec) for value in (ordered[0], statistics.median(ordered), ordered[-1]))


def percentile(values: Iterable[float], fraction: float) -> float:
    """The value at ``fraction`` of the sorted ``values`` (nan when there are none)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] if ordered else float("nan")
