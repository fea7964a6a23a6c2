"""Schedule a generated workload pod by pod with two schedulers and compare them (pure, numpy).

``default`` models kube-scheduler's default profile for these scenarios: NodeResourcesFit filter on real requests
plus the pod-count limit; LeastAllocated (integer arithmetic, 100m / 200Mi for missing requests) and
BalancedAllocation (real requests, skipped for best-effort pods) scores, weight 1 each; the adaptive
``percentageOfNodesToScore`` with the rotating start index; reservoir sampling among the top scores with a seeded
RNG. The other default plugins are constant on these clusters (no taints, affinities, images or spreading
constraints). ``network-aware`` is the same plus the NetworkBandwidth filter and score (docs/design/contracts.md).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from operators.engine.cluster.bandwidth import Accounting
from operators.engine.scheduling import network_bandwidth
from operators.engine.simulation.cluster import DEFAULT_MEMORY, DEFAULT_MILLI_CPU, Cluster, Ints
from operators.engine.simulation.scenarios import PodShape

MIN_FEASIBLE_NODES = 100
MIN_FEASIBLE_PERCENTAGE = 5
SCHEDULERS = ("default", "network-aware")
ALL_ROWS = slice(None)


# --- kube-scheduler's arithmetic, one function each (tested against hand-computed values) ----------


def num_feasible_nodes_to_find(nodes: int, percentage: int = 0) -> int:
    """How many feasible nodes kube-scheduler looks for before scoring (``numFeasibleNodesToFind``)."""
    if nodes < MIN_FEASIBLE_NODES or percentage >= 100:
        return nodes
    if percentage == 0:
        percentage = max(50 - nodes // 125, MIN_FEASIBLE_PERCENTAGE)
    return max(nodes * percentage // 100, MIN_FEASIBLE_NODES)


def least_allocated(requested: Ints, capacity: Ints) -> Ints:
    """``(capacity - requested) * 100 // capacity``, 0 when over capacity or no capacity."""
    safe = np.where(capacity > 0, capacity, 1)
    return np.asarray(np.where((capacity == 0) | (requested > capacity), 0, (capacity - requested) * 100 // safe))


def balanced_allocation(cpu_fraction: npt.NDArray[np.float64], memory_fraction: npt.NDArray[np.float64]) -> Ints:
    """``int64((1 - std) * 100)`` with ``std = |f_cpu - f_mem| / 2`` (fractions capped at 1)."""
    std = np.abs(np.minimum(cpu_fraction, 1.0) - np.minimum(memory_fraction, 1.0)) / 2
    return np.asarray(((1 - std) * 100).astype(np.int64))


# --- scenarios ---------------------------------------------------------------------------------------


# --- the cluster as arrays ---------------------------------------------------------------------------


# --- the two schedulers ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    accounting: str = "duplex"  # duplex | combined
    bandwidth_weight: int = 1
    percentage_of_nodes_to_score: int = 0  # 0: adaptive, as kube-scheduler's default


def feasible(
    cluster: Cluster, shape: PodShape, accounting: str, network_aware: bool, rows: Ints | slice = ALL_ROWS
) -> npt.NDArray[np.bool_]:
    """The filters of the scheduler, over ``rows`` of the cluster: NodeResourcesFit (requests and the pod count)
    and, network-aware, NetworkBandwidth's own filter (:mod:`operators.engine.scheduling.network_bandwidth`)."""
    fits = (
        (cluster.requested_cpu[rows] + shape.cpu <= cluster.cpu[rows])
        & (cluster.requested_memory[rows] + shape.memory <= cluster.memory[rows])
        & (cluster.pod_count[rows] + 1 <= cluster.pods[rows])
    )
    if network_aware:
        demand = (shape.ingress, shape.egress)
        columns = (cluster.bandwidth[rows], cluster.used_in[rows], cluster.used_out[rows])
        fits &= network_bandwidth.passing(demand, *columns, Accounting(accounting))
    return np.asarray(fits)


def bandwidth_fits(cluster: Cluster, ingress: int, egress: int, accounting: str) -> npt.NDArray[np.bool_]:
    """NetworkBandwidth's filter on every node of the cluster."""
    columns = (cluster.bandwidth, cluster.used_in, cluster.used_out)
    return network_bandwidth.passing((ingress, egress), *columns, Accounting(accounting))


def total_capacity(cluster: Cluster, accounting: str) -> Ints:
    return np.asarray(Accounting(accounting).total(cluster.bandwidth))


class Scheduler:
    """kube-scheduler's cycle for one pod at a time over ``cluster`` (mutated as pods bind)."""

    def __init__(self, network_aware: bool, options: Options, rng: random.Random) -> None:
        self.network_aware = network_aware
        self.options = options
        self.rng = rng
        self.next_start = 0

    def schedule(self, cluster: Cluster, shape: PodShape) -> int | None:
        """The node the pod binds to (and bind it), or None when nothing fits."""
        n = len(cluster.names)
        fits = feasible(cluster, shape, self.options.accounting, self.network_aware)
        wanted = num_feasible_nodes_to_find(n, self.options.percentage_of_nodes_to_score)
        order = (self.next_start + np.arange(n)) % n
        found = np.nonzero(fits[order])[0]
        if found.size == 0:  # every node processed: the start index wraps to itself
            return None
        if found.size >= wanted:
            found = found[:wanted]
            processed = int(found[-1]) + 1
        else:
            processed = n
        self.next_start = (self.next_start + processed) % n
        candidates = order[found]
        totals = self._scores(cluster, shape, candidates)
        best = int(totals.max())
        chosen = -1
        for ties, position in enumerate(np.nonzero(totals == best)[0].tolist(), start=1):
            if self.rng.randrange(ties) == 0:  # reservoir sampling among the top scores, as selectHost
                chosen = position
        node = int(candidates[chosen])
        cluster.add(node, shape.cpu, shape.memory, shape.ingress, shape.egress)
        return node

    def _scores(self, cluster: Cluster, shape: PodShape, nodes: Ints) -> Ints:
        accounting = Accounting(self.options.accounting)
        cpu = cluster.cpu[nodes]
        memory = cluster.memory[nodes]
        fit = (
            least_allocated(cluster.nonzero_cpu[nodes] + (shape.cpu or DEFAULT_MILLI_CPU), cpu)
            + least_allocated(cluster.nonzero_memory[nodes] + (shape.memory or DEFAULT_MEMORY), memory)
        ) // 2
        total = fit
        if shape.cpu or shape.memory:  # BalancedAllocation skips best-effort pods (PreScore Skip)
            with np.errstate(divide="ignore", invalid="ignore"):
                f_cpu = np.where(cpu > 0, (cluster.requested_cpu[nodes] + shape.cpu) / np.maximum(cpu, 1), 0.0)
                f_mem = np.where(
                    memory > 0, (cluster.requested_memory[nodes] + shape.memory) / np.maximum(memory, 1), 0.0
                )
            total = total + balanced_allocation(f_cpu, f_mem)
        if self.network_aware and (shape.ingress or shape.egress):
            columns = (cluster.bandwidth[nodes], cluster.used_in[nodes], cluster.used_out[nodes])
            raw = network_bandwidth.score_columns((shape.ingress, shape.egress), *columns, accounting)
            total = total + self.options.bandwidth_weight * network_bandwidth.normalize(raw)
        return np.asarray(total, dtype=np.int64)


# --- the run and its report ----------------------------------------------------------------------------


def expand(shapes: Sequence[PodShape]) -> list[PodShape]:
    return [shape for shape in shapes for _ in range(shape.count)]


@dataclass
class Outcome:
    cluster: Cluster
    scheduled: int
    pending: int
    seconds: float


def run_scheduler(
    cluster: Cluster,
    pods: Sequence[PodShape],
    network_aware: bool,
    options: Options,
    seed: int,
    progress: Callable[[int], None] | None = None,
) -> Outcome:
    scheduler = Scheduler(network_aware, options, random.Random(seed))
    started = time.perf_counter()
    scheduled = pending = 0
    for index, shape in enumerate(pods):
        node = scheduler.schedule(cluster, shape)
        if node is None:
            pending += 1
        else:
            scheduled += 1
            cluster.placements.append((index, node))
        if progress is not None and index % 100 == 99:
            progress(100)
    return Outcome(cluster, scheduled, pending, time.perf_counter() - started)


def objective(cluster: Cluster, accounting: str) -> int:
    """The thesis' objective: Σ over nodes of the squared free bandwidth (bits/s); lower is more even."""
    free = total_capacity(cluster, accounting) - cluster.used_in - cluster.used_out
    return sum(value * value for value in free.tolist())


def report(outcome: Outcome, accounting: str) -> dict[str, Any]:
    cluster = outcome.cluster
    capacity = total_capacity(cluster, accounting)
    over = Accounting(accounting).overcommit(cluster.bandwidth, cluster.used_in, cluster.used_out)
    used = cluster.used_in + cluster.used_out
    utilisation = np.where(capacity > 0, 100.0 * used / np.maximum(capacity, 1), 0.0)
    return {
        "scheduled": outcome.scheduled,
        "pending": outcome.pending,
        "overcommittedNodes": int((over > 0).sum()),
        "maxOvercommitBitsPerSecond": max(0, int(over.max())) if over.size else 0,
        "utilization": {
            "min": round(float(utilisation.min()), 2),
            "p50": round(float(np.percentile(utilisation, 50)), 2),
            "p90": round(float(np.percentile(utilisation, 90)), 2),
            "max": round(float(utilisation.max()), 2),
            "stddev": round(float(utilisation.std()), 2),
        },
        "objective": objective(cluster, accounting),
        "seconds": round(outcome.seconds, 3),
        "podsPerSecond": round(outcome.scheduled / outcome.seconds, 1) if outcome.seconds > 0 else 0.0,
    }


def percent_utilisation(cluster: Cluster, accounting: str) -> list[float]:
    capacity = total_capacity(cluster, accounting)
    used = cluster.used_in + cluster.used_out
    return [100.0 * u / c if c else 0.0 for u, c in zip(used.tolist(), capacity.tolist(), strict=True)]
