"""A mixed-integer program as columns and rows (pure data), and :func:`solve_program`, which hands one to HiGHS (the
``exact`` extra): what the per-pod program (:mod:`.exact`), the aggregated one (:mod:`.aggregated`) and the packing
bound's (:mod:`.packing`) build and solve."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

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


class MissingSolver(RuntimeError):
    """The ``exact`` extra is not installed."""


@dataclass(frozen=True)
class Solved:
    """What HiGHS made of a program (a minimisation, its constant included): proven optimal, proven infeasible, or
    stopped at the time limit; the objective of the best solution found (None: none) and the best bound."""

    optimal: bool
    infeasible: bool
    objective: float | None
    bound: float


def solve_program(model: Program, seconds: float, cutoff: float | None = None) -> Solved:
    """``model`` solved by HiGHS within ``seconds``; with ``cutoff``, only solutions below it are looked for (none:
    infeasible)."""
    try:
        import highspy
    except ImportError:
        raise MissingSolver("the exact reference needs the exact extra: pip install 'netaware[exact]'") from None
    with _quiet_stdout():  # HiGHS prints a banner from C++ when made, whatever its options
        highs = highspy.Highs()  # type: ignore[no-untyped-call]
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("time_limit", float(seconds))
    highs.setOptionValue("mip_rel_gap", 0.0)
    if cutoff is not None:
        highs.setOptionValue("objective_bound", cutoff - model.constant)
    inf = highspy.kHighsInf
    count = len(model.cost)
    highs.addVars(count, np.zeros(count), np.array(model.upper, dtype=np.float64))
    highs.changeColsCost(count, np.arange(count, dtype=np.int32), np.array(model.cost, dtype=np.float64))
    integers = np.array(model.integers, dtype=np.int32)
    if len(integers):
        highs.changeColsIntegrality(
            len(integers), integers, np.full(len(integers), highspy.HighsVarType.kInteger, dtype=np.uint8)
        )
    if model.rows:
        starts: list[int] = []
        indices: list[int] = []
        values: list[float] = []
        lower: list[float] = []
        upper: list[float] = []
        for row_lower, row_upper, entries in model.rows:
            starts.append(len(indices))
            for column, value in entries.items():
                indices.append(column)
                values.append(value)
            lower.append(-inf if row_lower is None else row_lower)
            upper.append(inf if row_upper is None else row_upper)
        highs.addRows(
            len(model.rows),
            np.array(lower, dtype=np.float64),
            np.array(upper, dtype=np.float64),
            len(indices),
            np.array(starts, dtype=np.int32),
            np.array(indices, dtype=np.int32),
            np.array(values, dtype=np.float64),
        )
    highs.run()
    status = highs.getModelStatus()
    info = highs.getInfo()
    optimal = status == highspy.HighsModelStatus.kOptimal
    found = info.primal_solution_status == 2  # kSolutionStatusFeasible
    objective = float(info.objective_function_value) + model.constant if found else None
    if optimal and objective is not None:
        bound = objective
    else:
        bound = float(info.mip_dual_bound) + model.constant if len(integers) else model.constant
    return Solved(optimal, status == highspy.HighsModelStatus.kInfeasible, objective, bound)


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """File descriptor 1 to /dev/null inside (what C++ writes there bypasses ``sys.stdout``)."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
