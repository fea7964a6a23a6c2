"""What a plan is compared with (pure data): the exact solver's answer for the same problem, or a bound."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reference:
    """The exact solver's answer for the same problem: the optimum when proven, else the best bound and the best
    plan it found within its time limit."""

    solver: str
    optimal: bool
    objective: int | None  # its best plan's objective (None: none found)
    bound: float  # a lower bound of the optimum (the optimum itself when proven)
    seconds: float
