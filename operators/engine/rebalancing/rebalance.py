"""One cycle of the rebalancer (pure): the moves of running pods that lower the objective, within every rule of
:mod:`.safety`.

**Objective** (lower is better): ``weights.networkCost`` x the sum over the AppGroups released by plan of their
dependency-edge cost (the planner's: every pod pair's NetworkOverhead cost, plus its penalty above
``maxNetworkCost``), + ``weights.bandwidthBalance`` x the thesis' imbalance Σ free²: over the nodes with a known
bandwidth and each direction (one with ``combined`` accounting), the free bandwidth in units of 100 Mbit/s,
squared. For a given total, Σ free² is lowest when the free bandwidth is spread evenly.

**A move** evicts one running pod; it is proposed only where its replacement will land:

1. *AppGroups released by plan* (``netaware.io/ordered-scheduling: plan``, every member bound and settled): the
   planner places the whole group afresh on the cluster (:func:`~operators.engine.planning.plan.plan_appgroup`
   with its members unbound), and searches from where the pods are: the *target layout* is whichever of the two the
   cycle's moves bring lower (the nearer on a tie). A move takes a pod of a workload from a node holding more of
   the workload than the target to one holding fewer (a deficit node) that kube-scheduler's filters accept; the
   layout after the cycle's moves (not the target: a workload two moves from it would have two deficits, and its
   replacement could take either) is written on the AppGroup before the evictions, and the release plans each
   replacement on its move's node (:mod:`operators.engine.planning.layout`). Moves are chosen greedily, best
   first, at most one per workload; the cycle keeps the prefix of that sequence with the lowest objective, then
   drops any move that gains less than ``minGainPerMove`` against the others (its leave-one-out gain).
2. *Other pods asking for bandwidth* (not AppGroup members) on the ``breadth`` nodes with the least free bandwidth:
   the replacement's node is the one the simulated kube-scheduler + extender picks for it
   (:func:`~operators.engine.scheduling.schedule.schedule` on the cluster without the pod); moves are taken best
   first while one gains at least ``minGainPerMove``, one per workload.

A move never takes a node above LowNodeLoad's high thresholds (``ceilings``); the cycle proposes nothing when its
moves together gain less than ``minGainPerCycle``, so the objective never rises.
"""

from __future__ import annotations

from collections.abc import Sequence

from operators.api.config.descheduler import DeschedulerPolicy, RebalanceArgs
from operators.api.config.scheduler import SchedulerConfig
from operators.engine.cluster.appgroups import plans_by_whole_group, plans_ungated
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.descheduling.limits import EvictionLimits
from operators.engine.descheduling.lownodeload import EvictionPlan as LowNodeLoadPlan
from operators.engine.descheduling.lownodeload import EvictionPlanner
from operators.engine.rebalancing.appgroups import group_moves, placed_and_planned
from operators.engine.rebalancing.bandwidth import bandwidth_moves
from operators.engine.rebalancing.model import Balance, Ceilings, Cycle, Move, Rebalance, Usage
from operators.engine.rebalancing.safety import History, by_workload, in_rollout
from operators.engine.scheduling.index import ClusterIndex

__all__ = ["Move", "Rebalance", "after_low_node_load", "placed_and_planned", "rebalance"]


def rebalance(
    snapshot: Snapshot,
    args: RebalanceArgs,
    config: SchedulerConfig,
    history: History,
    now: float,
    ceilings: Ceilings,
    usage: Usage,
    limits: EvictionLimits | None = None,
    evicting: Sequence[Pod] = (),
) -> Rebalance:
    """The cycle's moves on ``snapshot`` (see the module docstring). ``ceilings``/``usage``: LowNodeLoad's room
    below the high thresholds and a pod's usage of them; ``limits``: the eviction limits this cycle shares with
    LowNodeLoad; ``evicting``: pods LowNodeLoad evicts this cycle (their workloads are in flight). ``history`` is
    read, not changed: the shell records the moves it makes."""
    index = ClusterIndex.build(snapshot)
    balance = Balance(index, config)
    result = Rebalance()
    before_imbalance = balance.total()
    result.imbalance = (before_imbalance, before_imbalance)
    in_flight = len(history.in_flight) + len(evicting)
    left = min(args.max_moves_per_cycle, history.hourly_left(args, now))
    if in_flight:
        result.note = f"{in_flight} moves in flight: waiting for them to land"
        return result
    if left <= 0:
        result.note = "no moves left in this cycle's or this hour's budget"
        return result
    room = {node: dict(resources) for node, resources in ceilings.items()}  # the cycle's own, it moves them
    cycle = Cycle(snapshot, args, config, history, now, limits or EvictionLimits(), room, usage, balance, left,
                  rollouts=_rollouts(snapshot))  # fmt: skip
    weight = args.weights
    if weight.network_cost > 0:
        for group in sorted(snapshot.app_groups, key=lambda g: (g.metadata.namespace, g.metadata.name)):
            if plans_by_whole_group(group) or plans_ungated(group):
                group_moves(cycle, group, result)
    if weight.bandwidth_balance > 0:
        bandwidth_moves(cycle, result)
    gained = sum(move.gain for move in cycle.moves)
    if cycle.moves and gained < args.min_gain_per_cycle:
        result.note = f"the moves gain {gained:.3f} together, less than minGainPerCycle {args.min_gain_per_cycle:g}"
        result.layouts = {}
        for cost in result.groups.values():
            cost.after = cost.before
        return result
    result.moves = cycle.moves
    result.imbalance = (before_imbalance, cycle.balance.total())
    network = sum(cost.before for cost in result.groups.values()), sum(cost.after for cost in result.groups.values())
    result.objective = tuple(  # type: ignore[assignment]
        weight.network_cost * cost + weight.bandwidth_balance * imbalance
        for cost, imbalance in zip(network, result.imbalance, strict=True)
    )
    if not result.moves and not result.note:
        result.note = _nothing_moved(result.skipped)
    return result


def _nothing_moved(skipped: dict[str, str]) -> str:
    """Why a cycle with no note proposed nothing. An AppGroup or pod skipped (a replacement not Running yet, a
    rollout) is waited for, not settled: the note must not claim that no move gains enough (it once did, and the
    cycle after a move read as converged while a replacement was still starting)."""
    if not skipped:
        return "no move gains at least minGainPerMove"
    first = sorted(skipped.items())[0]
    more = f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
    return f"skipped {first[0]}: {first[1]}{more}"


def _rollouts(snapshot: Snapshot) -> dict[str, str]:
    """workload -> why its pods are changing now (only those that are)."""
    found = {workload: in_rollout(pods) for workload, pods in by_workload(snapshot.pods).items() if workload}
    return {workload: why for workload, why in found.items() if why}


def after_low_node_load(
    snapshot: Snapshot,
    policy: DeschedulerPolicy,
    config: SchedulerConfig,
    history: History,
    now: float,
    planner: EvictionPlanner,
    plan: LowNodeLoadPlan,
) -> Rebalance:
    """The rebalancer's part of a descheduling cycle, after LowNodeLoad's ``plan`` by ``planner``: its ceilings,
    its pods' usage, the eviction limits it has counted into, its evictions in flight."""
    assert policy.rebalance is not None
    return rebalance(snapshot, policy.rebalance, config, history, now, planner.ceilings(), planner.pod_usage,
                     planner.limits, [eviction.pod for eviction in plan.evictions])  # fmt: skip
