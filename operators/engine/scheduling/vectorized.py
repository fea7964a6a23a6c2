"""The scheduling cycle over arrays (numpy): same arithmetic as :mod:`operators.engine.scheduling.plugins`, per node
vectors instead of per node calls. Used when every candidate is a node of the snapshot (the
extender's NodeNames form, ``netaware schedule``); candidates sent as objects take the plain path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from operators.engine.cluster.bandwidth import Accounting, headroom_score
from operators.engine.cluster.snapshot import Node
from operators.engine.scheduling.plugins import (
    ClusterIndex,
    NetworkBandwidthArgs,
    NodeResourcesAllocatableArgs,
    OverheadResult,
    allocatable_score,
    bandwidth_shortfall,
    host_corrected,
    overhead_shortfall,
)

Ints = npt.NDArray[np.int64]


@dataclass
class NodeArrays:
    names: list[str]
    position: dict[str, int]
    used_in: Ints
    used_out: Ints
    place: Ints  # index into ClusterIndex.places
    usage_unknown: npt.NDArray[np.bool_]  # a pod on the node has an unreadable bandwidth

    @classmethod
    def of(cls, index: ClusterIndex) -> NodeArrays:
        names = [node.name for node in index.nodes]
        used = [index.used.get(name, (0, 0)) for name in names]
        place_id = {place: i for i, place in enumerate(index.places)}
        return cls(
            names,
            {name: position for position, name in enumerate(names)},
            np.array([pair[0] for pair in used], dtype=np.int64),
            np.array([pair[1] for pair in used], dtype=np.int64),
            np.array([place_id[index.place_of[name]] for name in names], dtype=np.int64),
            np.array([name in index.usage_problems for name in names], dtype=np.bool_),
        )


def arrays(index: ClusterIndex) -> NodeArrays:
    cached: NodeArrays | None = index.__dict__.get("_arrays")
    if cached is None:
        cached = NodeArrays.of(index)
        index.__dict__["_arrays"] = cached
    return cached


def capacities(index: ClusterIndex, args: NetworkBandwidthArgs) -> Ints:
    """Capacity per node (bits/s), -1 when unknown; once per default."""
    cache: dict[Any, Ints] = index.__dict__.setdefault("_capacity_arrays", {})
    key = args.default_node_bandwidth.nanos if args.default_node_bandwidth is not None else None
    if key not in cache:
        values = index.capacities(args.default_node_bandwidth)
        cache[key] = np.array([-1 if (v := values[node.name]) is None else v for node in index.nodes], dtype=np.int64)
    return cache[key]


def allocatables(index: ClusterIndex, args: NodeResourcesAllocatableArgs) -> Ints:
    cache: dict[NodeResourcesAllocatableArgs, Ints] = index.__dict__.setdefault("_allocatable_arrays", {})
    if args not in cache:
        cache[args] = np.array([allocatable_score(node, args) for node in index.nodes], dtype=np.int64)
    return cache[args]


def overhead_arrays(result: OverheadResult, index: ClusterIndex, positions: Ints) -> tuple[Ints, Ints, Ints]:
    """(satisfied, violated, cost) for the nodes at ``positions``, from the per-place totals."""
    if result.place_totals is None:
        zeros = np.zeros(len(positions), dtype=np.int64)
        return zeros, zeros, zeros
    per_place = np.array([result.place_totals[place] for place in index.places], dtype=np.int64).reshape(-1, 3)
    data = arrays(index)
    table = per_place[data.place[positions]]
    for host, count in result.on_host.items():  # a few hosts: find their rows, correct them
        for row in np.nonzero(positions == data.position[host])[0].tolist():
            table[row] = host_corrected(tuple(table[row].tolist()), index.place_of[host], count)
    return table[:, 0], table[:, 1], table[:, 2]


def overhead_failures(result: OverheadResult, names: list[str], index: ClusterIndex, positions: Ints) -> dict[str, str]:
    if result.error:
        return dict.fromkeys(names, str(result.error))
    if result.place_totals is None or not names:
        return {}
    satisfied, violated, _ = overhead_arrays(result, index, positions)
    rows = np.nonzero(violated > satisfied)[0]
    if rows.size == 0:
        return {}
    # Thousands of rejected nodes per pod share a handful of (satisfied, violated) pairs: each pair's
    # messages for every node of the snapshot are built once and looked up, not formatted per request.
    good, bad = satisfied[rows], violated[rows]
    span = int(bad.max()) + 1
    codes, which = np.unique(good * span + bad, return_inverse=True)
    tables = [_overhead_messages(index, code // span, code % span) for code in codes.tolist()]
    return {
        names[row]: tables[table][position]
        for row, table, position in zip(rows.tolist(), which.ravel().tolist(), positions[rows].tolist(), strict=True)
    }


def _overhead_messages(index: ClusterIndex, satisfied: int, violated: int) -> list[str]:
    """Upstream's message for every node of the snapshot (by position) with these counts; kept for the
    few dozen most recent pairs."""
    cache: dict[tuple[int, int], list[str]] = index.__dict__.setdefault("_overhead_messages", {})
    key = (satisfied, violated)
    if key not in cache:
        if len(cache) >= 64:
            cache.pop(next(iter(cache)))
        tail = " " + overhead_shortfall(satisfied, violated)
        cache[key] = ["Node " + name + tail for name in arrays(index).names]
    return cache[key]


def bandwidth_failures(
    demand: tuple[int, int], nodes: list[Node], positions: Ints, index: ClusterIndex, args: NetworkBandwidthArgs
) -> dict[str, str]:
    """NetworkBandwidth's filter over the node table: the rule and the messages of the bandwidth model."""
    if demand == (0, 0) or not nodes:
        return {}
    data = arrays(index)
    accounting = Accounting(args.accounting_mode)
    capacity = capacities(index, args)[positions]
    used_in, used_out = data.used_in[positions], data.used_out[positions]
    unknown = (capacity < 0) | data.usage_unknown[positions]
    failed = unknown | ~accounting.fits(capacity, used_in, used_out, *demand)
    problems = index.capacity_problems(args.default_node_bandwidth)
    reasons = {}
    for row in np.nonzero(failed)[0].tolist():
        name = nodes[row].name
        if name in problems:
            reasons[name] = problems[name]
        elif capacity[row] < 0:
            reasons[name] = f"node {name} has no known bandwidth capacity"
        elif name in index.usage_problems:
            reasons[name] = f"used bandwidth unknown: {index.usage_problems[name]}"
        else:
            shortfall = bandwidth_shortfall(
                accounting, int(capacity[row]), int(used_in[row]), int(used_out[row]), demand
            )
            reasons[name] = shortfall or ""
    return reasons


def normalize_overhead(raw: Ints) -> Ints:
    if raw.size == 0:
        return raw
    low, high = int(raw.min()), int(raw.max())
    if low == 0 and high == 0:
        return raw
    if high == low:
        return 100 - (raw - low)
    return 100 - np.trunc(100 * (raw - low) / (high - low)).astype(np.int64)


def normalize_min_max(raw: Ints) -> Ints:
    if raw.size == 0:
        return raw
    low, high = int(raw.min()), int(raw.max())
    if high == low:
        return np.zeros_like(raw)
    return (raw - low) * 100 // (high - low)


def bandwidth_raw(demand: tuple[int, int], positions: Ints, index: ClusterIndex, args: NetworkBandwidthArgs) -> Ints:
    data = arrays(index)
    total = Accounting(args.accounting_mode).total(capacities(index, args)[positions])
    used = data.used_in[positions] + data.used_out[positions]
    return np.asarray(headroom_score(total, used + demand[0] + demand[1]))
