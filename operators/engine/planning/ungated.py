"""Plans made when kube-scheduler asks about a pod (pure): the extender's side of an AppGroup annotated
``netaware.io/ordered-scheduling: plan-ungated``.

The ``plan`` mode holds an AppGroup's pods behind a scheduling gate, plans them as a whole and releases each with
a write (:mod:`.release`). Measured on a real control plane, that write and its watch events cost the API server
more CPU than everything else in a 33-pod apply, and on two CPUs every apply waits for it. ``plan-ungated`` makes
no write: pods are admitted without the gate, and when kube-scheduler asks the extender about one of them, the
extender plans it — with every other pending member the cache holds, as a whole — against what is placed, and
narrows the answer to the planned node. The pods planned together but not asked about yet keep their node for
when kube-scheduler asks (the plan is made once for all of them); a pod the plan did not cover is planned again
with whatever is pending then.

1. **Placed**: bound members, and members the extender answered for and kube-scheduler has not bound yet
   (``answered``: counted on that node, so that the next plan does not give its room away). The pod asked about
   is never counted as placed, even when answered before: kube-scheduler asks again only when the last attempt
   did not bind it.
2. **What**: :func:`~operators.engine.planning.plan.plan_appgroup` of the other members (pending, not answered),
   with the rebalancer's layout as the gated mode follows it.
"""

from __future__ import annotations

import datetime
from collections.abc import Collection, Mapping
from dataclasses import replace

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.api.config.scheduler import SchedulerConfig
from operators.engine.cluster.appgroups import ordered_scheduling
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.planning.layout import layout_at
from operators.engine.planning.plan import DEFAULT_BUDGET_SECONDS, Plan, plan_appgroup
from operators.engine.planning.problem import members
from operators.engine.scheduling.index import ClusterIndex


def plans_ungated(group: AppGroup | None) -> bool:
    """Whether ``group`` asked for plans made at scheduling time (``netaware.io/ordered-scheduling: plan-ungated``)."""
    return ordered_scheduling(group) == keys.UNGATED_PLAN


def plan_pending(
    cluster: Snapshot,
    group: AppGroup,
    config: SchedulerConfig,
    answered: Mapping[str, str],
    asking: Pod,
    now: float,
    nodes: Collection[str] | None = None,
    seed: int = 0,
    budget_seconds: float = DEFAULT_BUDGET_SECONDS,
) -> Plan:
    """The plan of ``group``'s pending members on ``cluster`` (nodes, NetworkTopologies, every pod), those in
    ``answered`` (pod key -> the node the extender narrowed it to) but ``asking`` counted on their node.
    ``asking`` is taken as kube-scheduler sent it (the cache may not hold it yet). With ``nodes`` (kube-scheduler's
    candidates for ``asking``), the plan is made on those and on the nodes of the placed members (their pairs'
    costs): kube-scheduler binds to no other, and a cluster's other nodes only make the problem larger."""
    by_name = cluster.node_by_name
    placed = {key: node for key, node in answered.items() if key != asking.key and node in by_name}
    ours = {pod.key for pod in members(group, cluster.pods)} | {asking.key}
    pods = [
        pod.on_node(placed[pod.key]) if pod.key in ours and not pod.node_name and pod.key in placed else pod
        for pod in cluster.pods
        if pod.key != asking.key
    ]
    pods.append(asking)
    if nodes is not None:
        offered = set(nodes)
        kept = offered | {pod.node_name for pod in pods if pod.key in ours and pod.node_name}
        pods = [pod for pod in pods if pod.node_name in kept or (not pod.node_name and pod.key in ours)]
        # the placed members' other nodes count for their pairs, never as a place: kube-scheduler did not offer them
        cluster = replace(
            cluster,
            nodes=tuple(
                node if node.name in offered else replace(node, unschedulable=True)
                for node in cluster.nodes
                if node.name in kept
            ),
        )
    index = ClusterIndex.build(replace(cluster, pods=tuple(pods)))
    at = datetime.datetime.fromtimestamp(now, datetime.UTC)
    layout = layout_at(group, now)
    return plan_appgroup(index, group, config, seed, budget_seconds, now=at, layout=layout, with_edges=False)
