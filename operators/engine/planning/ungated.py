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
3. **How long**: a plan is anytime (it searches to its budget), and kube-scheduler waits for it; when AppGroups
   arrive together, each plan's budget is :data:`~operators.engine.planning.release.BACKLOG_SECONDS` shared among
   the AppGroups with a pending pod no plan placed yet (:func:`waiting_groups`,
   :func:`~operators.engine.planning.release.shared_budget`, as the gated mode shares its pass), and less again
   while AppGroups keep arriving (the plans of the last seconds share a third of a second each second,
   :class:`~operators.engine.planning.release.PlanPace`): 250 AppGroups at 100 ms each held kube-scheduler's
   queue 25 s.
"""

from __future__ import annotations

import datetime
from collections.abc import Collection, Container, Mapping
from dataclasses import replace

from operators.api.appgroup import AppGroup
from operators.api.config.scheduler import SchedulerConfig
from operators.engine.cluster.appgroups import plans_ungated
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.planning.layout import layout_at
from operators.engine.planning.plan import DEFAULT_BUDGET_SECONDS, Plan, plan_appgroup
from operators.engine.planning.release import BACKLOG_SECONDS, PlanPace
from operators.engine.scheduling.index import ClusterIndex
from operators.memo import per_object

_UNGATED: dict[int, tuple[object, frozenset[str]]] = {}  # id of an AppGroups tuple -> (it, the names)
_UNGATED_KEPT = 8


def answered_pods(index: ClusterIndex, answered: Mapping[str, tuple[str, str]], asking: Pod | None) -> list[Pod]:
    """What a plan counts as given (rule 1), to be placed on ``index``: each AppGroup member the extender answered
    for (``answered``: pod key -> (node, its AppGroup's name)) and kube-scheduler has not bound yet, on that node,
    whatever its AppGroup; ``asking`` as kube-scheduler sent it, unbound (the cache may not hold it yet; None: a
    plan made before kube-scheduler asks)."""
    nodes = index.node_by_name
    out = []
    for key, (node, name) in answered.items():
        pod = index.appgroup_pods.get(name, {}).get(key)
        if (asking is None or key != asking.key) and pod is not None and not pod.node_name and node in nodes:
            out.append(pod.on_node(node))
    if asking is not None:
        out.append(asking.on_node(""))
    return out


def ungated_names(groups: tuple[AppGroup, ...]) -> frozenset[str]:
    """The names of the plan-ungated AppGroups of ``groups``, kept per tuple (with the tuple: its id cannot be
    reused while held). A live cache's snapshots share the AppGroups' tuple while no AppGroup's spec or annotations
    change; found again for every plan, they were a sixth of the extender's plans ahead in a 5,000-node burst with
    1,250 AppGroups in the cluster."""
    return per_object(_UNGATED, groups, _UNGATED_KEPT, _ungated_names, groups)


def _ungated_names(groups: tuple[AppGroup, ...]) -> frozenset[str]:
    return frozenset(group.metadata.name for group in groups if plans_ungated(group))


def waiting_groups(index: ClusterIndex, held: Container[str]) -> int:
    """The plan-ungated AppGroup names with a pending member whose key is not in ``held`` (the pods a plan placed
    or answered for): each waits for a plan of its own."""
    names = ungated_names(index.snapshot.app_groups)
    members = index.appgroup_pods

    def waiting(pods: Mapping[str, Pod]) -> bool:
        return any(key not in held and not pod.node_name and not pod.is_terminal for key, pod in pods.items())

    return sum(1 for name in names if waiting(members.get(name, {})))


def backlog_budget(
    index: ClusterIndex,
    held: Container[str],
    configured: float = DEFAULT_BUDGET_SECONDS,
    pace: PlanPace | None = None,
    now: float = 0.0,
) -> float:
    """A plan's budget at ``now`` when :func:`waiting_groups` AppGroups wait, and ``pace`` made its plans (rule 3)."""
    return (pace or PlanPace()).budget(configured, waiting_groups(index, held), BACKLOG_SECONDS, len(index.nodes), now)


def plan_pending(
    index: ClusterIndex,
    group: AppGroup,
    config: SchedulerConfig,
    now: float,
    nodes: Collection[str] | None = None,
    seed: int = 0,
    budget_seconds: float = DEFAULT_BUDGET_SECONDS,
) -> Plan:
    """The plan of ``group``'s pending members on ``index`` (the cluster with :func:`answered_pods` placed). With
    ``nodes`` (kube-scheduler's candidates for the pod asked about), the plan places pods on those only:
    kube-scheduler binds to no other (the placed members' other nodes still count for their pairs)."""
    at = datetime.datetime.fromtimestamp(now, datetime.UTC)
    layout = layout_at(group, now)
    return plan_appgroup(
        index, group, config, seed, budget_seconds, now=at, layout=layout, with_edges=False, allowed=nodes
    )


def index_with_answers(cluster: Snapshot, answered: Mapping[str, tuple[str, str]], asking: Pod) -> ClusterIndex:
    """``cluster`` (every pod) with :func:`answered_pods` placed, built from scratch: what a kept index equals with
    the same pods placed on it, for a caller that holds a snapshot."""
    counted = {pod.key: pod for pod in answered_pods(ClusterIndex.build(cluster), answered, asking)}
    pods = [counted.pop(pod.key, pod) for pod in cluster.pods]
    return ClusterIndex.build(replace(cluster, pods=(*pods, *counted.values())))
