"""One scheduling cycle over a node table, as kube-scheduler's framework runs it: PreFilter once per pod
(the per-cycle :class:`CycleState`), then Filter, Score and NormalizeScore per plugin, each plugin written
once (``network_overhead``, ``network_bandwidth``, ``allocatable``). The extender's ``/filter`` and
``/prioritize`` and ``netaware schedule`` run exactly this."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from operators.api import keys
from operators.api.config.scheduler import ALLOCATABLE, NETWORK_BANDWIDTH, NETWORK_OVERHEAD, SchedulerConfig
from operators.api.errors import FieldError
from operators.api.quantity import Quantity
from operators.engine.cluster.bandwidth import Accounting, pod_demand
from operators.engine.cluster.objects import Pod
from operators.engine.scheduling import allocatable, network_bandwidth, network_overhead
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.network_overhead import OverheadState
from operators.engine.scheduling.table import Ints, NodeTable


@dataclass(frozen=True)
class PodInputs:
    """Everything a cycle reads of a pod, and nothing else: the plugins are handed this, never the pod, so two
    pods with equal inputs get the same answer from every plugin on the same nodes. That makes it the key under
    which the extender shares an answer between pods (a Deployment's replicas), complete by construction: a
    plugin that needs more of a pod must add it here."""

    labels: tuple[tuple[str, str], ...]
    annotations: tuple[tuple[str, str], ...]
    requests: tuple[tuple[str, Quantity], ...]  # the pod's effective requests: the bandwidth resources come first

    @classmethod
    def of(cls, pod: Pod) -> PodInputs:
        return cls(
            tuple(sorted(pod.labels.items())),
            tuple(sorted(pod.annotations.items())),
            tuple(sorted(pod.requests.items())),
        )


@dataclass(frozen=True)
class CycleState:
    """What the cycle computes once per pod (upstream's CycleState) from the pod's :class:`PodInputs`: its demand,
    or why it is unreadable, and NetworkOverhead's PreFilter result."""

    inputs: PodInputs
    demand: tuple[int, int]
    demand_problem: str
    overhead: OverheadState

    @classmethod
    def of(cls, pod: Pod, index: ClusterIndex, config: SchedulerConfig) -> CycleState:
        return cls.of_inputs(PodInputs.of(pod), index, config)

    @classmethod
    def of_inputs(cls, inputs: PodInputs, index: ClusterIndex, config: SchedulerConfig) -> CycleState:
        try:
            demand, problem = pod_demand(dict(inputs.annotations), dict(inputs.requests)), ""
        except FieldError as error:
            demand, problem = (0, 0), f"bandwidth unreadable: {error}"
        if any(key == keys.PLANNED_NODE for key, _ in inputs.annotations):
            overhead = network_overhead.OverheadState()  # placed by a whole-group plan: maxNetworkCost was its job
        else:
            overhead = network_overhead.prefilter(dict(inputs.labels), index, config.overhead)
        return cls(inputs, demand, problem, overhead)


def filter_table(state: CycleState, table: NodeTable, config: SchedulerConfig) -> dict[str, dict[str, str]]:
    """Per filter plugin, the rows it rejects with the reason (rows absent from every map pass)."""
    failed: dict[str, dict[str, str]] = {}
    if NETWORK_OVERHEAD in config.filters:
        failed[NETWORK_OVERHEAD] = network_overhead.filter_nodes(state.overhead, table)
    if NETWORK_BANDWIDTH in config.filters:
        accounting = Accounting(config.bandwidth.accounting_mode)
        failed[NETWORK_BANDWIDTH] = network_bandwidth.filter_nodes(
            state.demand, state.demand_problem, table, accounting
        )
    return failed


def score_table(
    state: CycleState, table: NodeTable, config: SchedulerConfig
) -> tuple[dict[str, Ints], dict[str, Ints]]:
    """(raw, normalised) scores per weighted plugin, in the order of the table's rows."""
    raw: dict[str, Ints] = {}
    normalized: dict[str, Ints] = {}
    if NETWORK_OVERHEAD in config.weights:
        raw[NETWORK_OVERHEAD] = network_overhead.score(state.overhead, table)
        normalized[NETWORK_OVERHEAD] = network_overhead.normalize(raw[NETWORK_OVERHEAD])
    if NETWORK_BANDWIDTH in config.weights:
        accounting = Accounting(config.bandwidth.accounting_mode)
        raw[NETWORK_BANDWIDTH] = network_bandwidth.score(state.demand, table, accounting)
        normalized[NETWORK_BANDWIDTH] = network_bandwidth.normalize(raw[NETWORK_BANDWIDTH])
    if ALLOCATABLE in config.weights:
        raw[ALLOCATABLE] = allocatable.score(table, config.allocatable)
        normalized[ALLOCATABLE] = allocatable.normalize(raw[ALLOCATABLE])
    return raw, normalized


def weighted_total(normalized: Mapping[str, Ints], weights: Mapping[str, int], rows: int) -> Ints:
    totals = np.zeros(rows, dtype=np.int64)
    for plugin, values in normalized.items():
        totals += values * weights[plugin]
    return totals


def merge_reasons(failed: Mapping[str, dict[str, str]]) -> dict[str, str]:
    """One reason per rejected node: the plugins' reasons joined with ``; `` in filter order."""
    merged: dict[str, str] = {}
    for reasons in failed.values():
        if not merged:
            merged = dict(reasons)
            continue
        for name, reason in reasons.items():
            merged[name] = f"{merged[name]}; {reason}" if name in merged else reason
    return merged
