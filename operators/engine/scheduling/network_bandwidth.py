"""NetworkBandwidth (the thesis' plugin, Koordinator's NetBandwidth score), over a node table, with the rules of
the bandwidth model (:mod:`operators.engine.cluster.bandwidth`).

**Filter**: a pod that asks for no bandwidth passes everywhere; a pod whose own bandwidth is unreadable fails
everywhere, naming its annotation; a node whose capacity is unknown or unreadable, or whose used bandwidth is
unknown (a pod on it is unreadable), fails with that reason; otherwise the pod's demand must fit the free
capacity under the accounting (duplex or combined).

**Score**: ``(total - used_after) * 100 // total``, the total doubled in duplex accounting; 0 where the
capacity is unknown. **NormalizeScore**: min-max to 0..100 (all equal: 0), as the thesis.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from operators.engine.cluster.bandwidth import Accounting, headroom_score
from operators.engine.scheduling.normalize import normalize_min_max
from operators.engine.scheduling.table import Ints, NodeTable

NAME = "NetworkBandwidth"
Bools = npt.NDArray[np.bool_]


def shortfall(
    accounting: Accounting, capacity: int, used_in: int, used_out: int, demand: tuple[int, int]
) -> str | None:
    """Why the demand does not fit (None when it does): the filter's message."""
    if accounting.fits(capacity, used_in, used_out, *demand):
        return None
    if accounting is Accounting.COMBINED:
        free = capacity - used_in - used_out
        return f"insufficient network bandwidth: requested {demand[0] + demand[1]} bits/s, free {max(free, 0)}"
    for direction, want, used in (("ingress", demand[0], used_in), ("egress", demand[1], used_out)):
        if want and want > capacity - used:
            return f"insufficient {direction} bandwidth: requested {want} bits/s, free {max(capacity - used, 0)}"
    return None


def filter_nodes(demand: tuple[int, int], problem: str, table: NodeTable, accounting: Accounting) -> dict[str, str]:
    """The rows that fail, with the reason (see the module docstring)."""
    if problem:
        return dict.fromkeys(table.names, problem)
    if demand == (0, 0) or not len(table):
        return {}
    failed = table.usage_unknown | ~passing(demand, table.capacity, table.used_in, table.used_out, accounting)
    reasons = {}
    for row in np.nonzero(failed)[0].tolist():
        name = table.names[row]
        if name in table.capacity_problems:
            reasons[name] = table.capacity_problems[name]
        elif table.capacity[row] < 0:
            reasons[name] = f"node {name} has no known bandwidth capacity"
        elif name in table.usage_problems:
            reasons[name] = f"used bandwidth unknown: {table.usage_problems[name]}"
        else:
            capacity, used_in, used_out = (int(table.capacity[row]), int(table.used_in[row]), int(table.used_out[row]))
            reasons[name] = shortfall(accounting, capacity, used_in, used_out, demand) or ""
    return reasons


def passing(demand: tuple[int, int], capacity: Ints, used_in: Ints, used_out: Ints, accounting: Accounting) -> Bools:
    """The filter over bandwidth columns (the simulator's are its cluster's): the demand fits the free capacity;
    an unknown capacity (-1) never passes a pod that asks for bandwidth."""
    if demand == (0, 0):
        return np.ones(len(capacity), dtype=np.bool_)
    return np.asarray(passes(demand, capacity, used_in, used_out, accounting))


def passes(demand: tuple[int, int], capacity: Any, used_in: Any, used_out: Any, accounting: Accounting) -> Any:
    """:func:`passing` on one node's ints (a planner's check of one node: numpy's overhead on one-element arrays
    was most of its time), or elementwise on columns."""
    return (capacity >= 0) & accounting.fits(capacity, used_in, used_out, *demand)


def score(demand: tuple[int, int], table: NodeTable, accounting: Accounting) -> Ints:
    return score_columns(demand, table.capacity, table.used_in, table.used_out, accounting)


def score_columns(
    demand: tuple[int, int], capacity: Ints, used_in: Ints, used_out: Ints, accounting: Accounting
) -> Ints:
    """The raw score over bandwidth columns: the headroom left after the pod, in percent of the total."""
    return np.asarray(headroom_score(accounting.total(capacity), used_in + used_out + demand[0] + demand[1]))


normalize = normalize_min_max
