"""A mixed-integer program as columns and rows (pure data), the form :func:`.exact.solve` hands HiGHS: what the
per-pod program (:mod:`.exact`) and the aggregated one (:mod:`.aggregated`) both build."""

from __future__ import annotations

from operators.engine.planning.problem import Problem

Row = tuple[float | None, float | None, dict[int, float]]  # lower, upper, {column: value}


class Program:
    """Columns (cost, upper bound, integer or not), rows, and a constant added to the objective."""

    def __init__(self, problem: Problem):
        self.problem = problem
        self.cost: list[float] = []
        self.upper: list[float] = []
        self.integers: list[int] = []
        self.rows: list[Row] = []
        self.constant = 0.0

    def _column(self, cost: float, upper: float, integer: bool = False) -> int:
        self.cost.append(cost)
        self.upper.append(upper)
        if integer:
            self.integers.append(len(self.cost) - 1)
        return len(self.cost) - 1
