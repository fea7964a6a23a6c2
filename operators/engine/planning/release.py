"""Releasing an AppGroup's gated pods by a whole-group plan (pure): the AppGroup controller's decision for an
AppGroup annotated ``netaware.io/ordered-scheduling: plan``.

1. **Who is placed already**: bound pods, and pods released by an earlier plan (of this AppGroup or another)
   that kube-scheduler has not bound yet (annotation ``netaware.io/planned-node``: they are counted on that node,
   so a later plan does not give their room away; a release sent and not yet seen back is passed in as it will
   be: :func:`as_released`; :func:`provisional` says how they count, :func:`plan_view` builds such an index from
   scratch, a live controller keeps one). Members released otherwise and not bound yet (a timeout) are kube-scheduler's:
   neither planned nor counted.
2. **When**: the gated pods are planned together once the group has arrived — every workload of the spec has
   a pod and no gated pod arrived in the last :data:`SETTLE_SECONDS` — or once no gated pod arrived for
   ``window`` (default :data:`BATCH_SECONDS`; at most :data:`GATHER_SECONDS` after the first of them),
   whichever comes first (``arrived``: when the controller first saw each gated pod; the API's creation times
   have whole seconds): the API server admits an apply's pods one by one, and a plan of the first few would fix
   the application's place before the rest is known (measured: 300 pods admitted over 8 s and planned as they
   came cost 11.5 per pair, planned at once 0.9). Pods arriving once some of the group is placed (a scale-up, a
   replaced pod) are planned against the placed ones :data:`FOLLOW_SECONDS` after they arrive (or the window,
   if shorter): the first plan fixes where the application is, and waiting longer would only hold each later
   pod back. Under a rebalancer's layout the gated pods wait (looked at every :data:`VACATE_SECONDS`, until the
   layout's time or their timeout) while one of them fits none of its deficit nodes only because terminating
   pods still hold them (:func:`~operators.engine.planning.layout.held_by_leaving`): the pods a swap moves away
   have not gone yet, and planned now the replacement would land elsewhere, its move missed (and the workload
   barred from that node by the rebalancer).
3. **What**: the plan (:func:`~operators.engine.planning.plan.plan_appgroup`) of the gated pods; each planned
   pod is released to its node (:func:`release_patch`: a required node affinity on ``metadata.name`` added in
   the same patch that removes the gate, as Kubernetes allows on a gated pod, and the annotation of rule 1).
   A pod the plan cannot place is released without a place, with the reason: kube-scheduler says what it
   finds.
4. **Timeout and spec**: a pod waiting past the ordered-scheduling timeout, every pod of an invalid AppGroup,
   and a pod whose workload is not in the spec are released without a place (as in the dependencies-first
   mode).
5. **Stranded**: a released pod not bound yet whose planned node can no longer take it (:func:`stranded`: the
   node gone, tainted or cordoned, or filled by pods bound meanwhile) is evicted, so that its owner's
   replacement is gated and planned again against what the cluster holds then.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import jsonpatch

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.api.config.scheduler import SchedulerConfig
from operators.engine.admission.pod_bandwidth import json_patch
from operators.engine.cluster.kube import filters as kube_filters
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.planning.layout import held_by_leaving, layout_at, rebalancing_of
from operators.engine.planning.plan import DEFAULT_BUDGET_SECONDS, Plan, plan_appgroup
from operators.engine.planning.work import BUILD_WORK
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.status.gates import (
    GATE,
    NOT_A_WORKLOAD,
    TIMEOUT,
    Release,
    is_gated,
    timeout_of,
    without_order,
)

BATCH_SECONDS = 0.1  # a group's first plan: once none of its gated pods arrived for this long (default)
SETTLE_SECONDS = 0.05  # ... or once every workload has a pod and none arrived for this long
FOLLOW_SECONDS = 0.01  # once some of the group is placed, later pods are planned this soon after they arrive
GATHER_SECONDS = 30.0  # a group's first plan waits for its pods to stop arriving at most this long
VACATE_SECONDS = 0.5  # a rebalancer's replacement waiting for a terminating pod to go: looked at again this soon
MIN_BUDGET_SECONDS = 0.01  # a plan's budget under the deepest backlog (the configured one when that is less)
# ... and at least the work of building its problem and this much search: the greedy start with its network costs
# (0.4 ms of work for 8 pods on 5,000 nodes) and a sweep or two (the burst's 250 AppGroups of 4-12 pods planned in
# turn on 5,000 nodes, offline: 0.59 per edge with 2 ms, 0.50 with 5, 0.49 with 10, 0.47 with 85)
MIN_SEARCH_SECONDS = 0.005
BACKLOG_SECONDS = 0.5  # the planning time AppGroups waiting together share (each plan's budget: this over them)
# AppGroups that keep arriving share this much planning a second (work of the reference machine), counted over the
# plans of the last RATE_SECONDS and those waiting: a share of each pass alone kept the planner busy for as long as
# they arrived, a core taken from the API server that binds them (the same burst planned in turn: 10.5 CPU s at
# 100 ms a plan for 0.47 per edge, 2.1 s at 25 ms for 0.49)
PLAN_DUTY = 0.3
RATE_SECONDS = 2.0
IN_PLAN = "InPlan"
UNPLACEABLE = "Unplaceable"
AFFINITY_KEY = "metadata.name"
REQUIRED, PREFERRED = "required", "preferred"  # how a released pod carries its planned node

PodKey = tuple[str, str]


@dataclass(frozen=True)
class PlannedRelease:
    """A gated pod to release, to ``node`` (None: without a place), why, and how long it waited; ``unplaced``: why
    the plan gave it no node (logged with the release)."""

    pod: Pod
    node: str | None
    reason: str
    waited: float
    unplaced: str = ""


@dataclass(frozen=True)
class ReleaseDecision:
    release: tuple[PlannedRelease, ...] = ()
    plan: Plan | None = None  # the plan made now (None: none made)
    next_deadline: float | None = None  # when to look again (seconds since the epoch)


def planned_node(pod: Pod) -> str | None:
    return pod.annotations.get(keys.PLANNED_NODE) or None


def awaiting_bind(pod: Pod) -> bool:
    """Released by a plan and not bound yet (rule 1): counted on its planned node by later plans."""
    return not pod.node_name and not is_gated(pod) and planned_node(pod) is not None


def gathering_due(first: float, last: float, quiet: float, most: float) -> float:
    """When a group's pods, the ``first`` and ``last`` of them arrived at those times, are planned together: once
    none arrived for ``quiet``, at the latest ``most`` after the first."""
    return min(last + quiet, first + most)


def shared_budget(configured: float, waiting: int, pass_seconds: float, nodes: int = 0, recent: int = 0) -> float:
    """Each plan's budget when ``waiting`` AppGroups wait to be planned: the configured budget, or the planner's
    ``pass_seconds`` shared among them when that is less, or less again :data:`PLAN_DUTY` shared among them and the
    ``recent`` plans made in the last :data:`RATE_SECONDS` (AppGroups that keep arriving: a burst); never below
    :data:`MIN_BUDGET_SECONDS` nor below :data:`MIN_SEARCH_SECONDS` past the work of building the problem on a
    cluster of ``nodes`` nodes (charged to the budget: a budget under it leaves the greedy start no time for the
    network costs, and it places the pods by room alone). The planner is anytime (a plan that cannot be proven
    optimal searches to its budget): at 100 ms each, a burst of 250 AppGroups in 20 s waits 25 s of planning
    alone, and each plan still starts from the smallest-domain placement and its local optimum, so a shorter
    budget costs walks, never a plan worse than that. (A floor of 10 ms alone was under the 15 ms a problem on
    5,000 nodes is charged: a burst made by 32 clients planned its AppGroups at 0.58-0.63 per edge against 0.49
    with 8, some pairs above ``maxNetworkCost``.)"""
    share = pass_seconds / max(waiting, 1)
    if recent:
        share = min(share, PLAN_DUTY * RATE_SECONDS / (recent + waiting))
    return min(configured, max(share, MIN_BUDGET_SECONDS, MIN_SEARCH_SECONDS + BUILD_WORK * nodes / 1e9))


class PlanPace:
    """When the plans of the last :data:`RATE_SECONDS` were made: the ``recent`` of :func:`shared_budget`."""

    def __init__(self) -> None:
        self.made: collections.deque[float] = collections.deque()

    def planned(self, now: float) -> None:
        self.made.append(now)

    def budget(self, configured: float, waiting: int, pass_seconds: float, nodes: int, now: float) -> float:
        """:func:`shared_budget` with the plans made since ``now`` - :data:`RATE_SECONDS`."""
        while self.made and self.made[0] <= now - RATE_SECONDS:
            self.made.popleft()
        return shared_budget(configured, waiting, pass_seconds, nodes, len(self.made))


def release_by_plan(
    group: AppGroup | None,
    members: Iterable[Pod],
    index: ClusterIndex | Callable[[], ClusterIndex],
    config: SchedulerConfig,
    arrived: Mapping[PodKey, float],
    now: float,
    default_timeout: float,
    budget_seconds: float = DEFAULT_BUDGET_SECONDS,
    seed: int = 0,
    window: float = BATCH_SECONDS,
) -> ReleaseDecision:
    """What to release of ``members`` (the pods labelled for ``group``, as the releases in flight leave them) at
    ``now``; ``index``: the cluster as plans see it, every pod released by a plan and not bound yet counted on its
    planned node (rule 1: :func:`plan_view` from a snapshot, or a kept index with :func:`provisional` pods), or a
    function that gives it, called only when a plan is made (or a rebalancing's layout checked): most calls decide
    nothing is due yet, and the gate keeper's view of the cluster costs what every pod awaiting its binding costs
    to count, each time it is opened (5 of every 6 views it opened in a burst were for no plan)."""
    pods = list(members)
    gated = sorted((pod for pod in pods if is_gated(pod)), key=lambda pod: pod.key)
    if not gated:
        return ReleaseDecision()

    def waited(pod: Pod) -> float:
        return max(now - pod.created, 0.0) if pod.created is not None else 0.0

    if (unordered := without_order(group, gated, now)) is not None:
        reason, now_released, due_next = unordered
        return ReleaseDecision(tuple(PlannedRelease(pod, None, reason, waited(pod)) for pod in now_released),
                               next_deadline=due_next)  # fmt: skip
    assert group is not None
    selectors = {entry.workload.selector for entry in group.spec.workloads}
    timeout, _ = timeout_of(group, default_timeout)
    released = [
        PlannedRelease(pod, None, NOT_A_WORKLOAD, waited(pod))
        for pod in gated
        if pod.labels.get(keys.APPGROUP_WORKLOAD_LABEL) not in selectors
    ]
    released += [
        PlannedRelease(pod, None, TIMEOUT, waited(pod))
        for pod in gated
        if pod.labels.get(keys.APPGROUP_WORKLOAD_LABEL) in selectors and pod.created is not None
        and now - pod.created >= timeout
    ]  # fmt: skip
    done = {item.pod.key for item in released}
    waiting = [pod for pod in gated if pod.key not in done]
    if not waiting:
        return ReleaseDecision(tuple(released))
    times = [arrived.get((pod.namespace, pod.name), now) for pod in waiting]
    present = {pod.labels.get(keys.APPGROUP_WORKLOAD_LABEL) for pod in pods}
    anchored = any(pod.node_name or awaiting_bind(pod) for pod in pods)
    if anchored:
        first_due = min(times) + min(window, FOLLOW_SECONDS)
    else:  # the group's first plan: once its pods stop arriving for the window (a burst is one group), or the cap
        first_due = gathering_due(min(times), max(times), window, GATHER_SECONDS)
    settled = max(times) + SETTLE_SECONDS
    if now < first_due and not (selectors <= present and now >= settled):
        due = min(first_due, settled) if selectors <= present else first_due
        timeouts = [pod.created + timeout for pod in waiting if pod.created is not None]
        return ReleaseDecision(tuple(released), None, min([due, *timeouts]))
    cluster = index() if callable(index) else index
    layout = layout_at(group, now)
    if layout is not None and held_by_leaving(layout, pods, waiting, cluster):
        rebalancing = rebalancing_of(group)
        assert rebalancing is not None
        timeouts = [pod.created + timeout for pod in waiting if pod.created is not None]
        return ReleaseDecision(tuple(released), None, min([now + VACATE_SECONDS, rebalancing.until, *timeouts]))
    only = {pod.key for pod in waiting}  # other unbound members (released by a timeout) are kube-scheduler's
    plan = plan_appgroup(cluster, group, config, seed, budget_seconds, layout=layout, only=only, with_edges=False)
    places = {planned.pod: planned.node for planned in plan.pods}
    for pod in waiting:
        node = places.get(pod.key)
        if node:
            released.append(PlannedRelease(pod, node, IN_PLAN, waited(pod)))
        else:
            released.append(PlannedRelease(pod, None, UNPLACEABLE, waited(pod), plan.unplaceable.get(pod.key, "")))
    return ReleaseDecision(tuple(released), plan)


def provisional(
    pods: Iterable[Pod], nodes: Container[str], memo: dict[str, tuple[Pod, Pod | None]] | None = None
) -> list[Pod]:
    """Of ``pods``, those released by a plan and not bound yet, as plans count them (rule 1): on their planned
    node, when it is one of ``nodes`` (a pod whose planned node is gone counts nowhere: it is stranded).
    ``memo`` (pod key -> the pod and how it counts) keeps the counted pods of a caller that asks again and again
    about the same pod objects: the same counted object each time (what is parsed of it is kept per object)."""
    found = []
    for pod in pods:
        held = memo.get(pod.key) if memo is not None else None
        if held is None or held[0] is not pod:
            node = planned_node(pod)
            held = (pod, pod.on_node(node) if awaiting_bind(pod) and node else None)
            if memo is not None:
                memo[pod.key] = held
        if held[1] is not None and held[1].node_name in nodes:
            found.append(held[1])
    return found


def plan_view(cluster: Snapshot) -> ClusterIndex:
    """``cluster`` (its pods as the releases in flight leave them) as plans see it (rule 1), built from scratch:
    what a kept index with :func:`provisional` pods equals."""
    counted = {pod.key: pod for pod in provisional(cluster.pods, cluster.node_by_name)}
    return ClusterIndex.build(replace(cluster, pods=tuple(counted.get(pod.key, pod) for pod in cluster.pods)))


def stranded(
    members: Iterable[Pod], index: ClusterIndex, config: SchedulerConfig | None = None
) -> list[tuple[Pod, str]]:
    """Members released by a plan and not bound whose planned node can no longer take them (rule 5): the node is
    gone or kube-scheduler's filters refuse it now over the pods bound (a taint, the resources left, a host port,
    an anti-affinity, a spread, a volume: :mod:`~operators.engine.cluster.kube.filters`, the configuration's
    ``config``) — with why, in kube-scheduler's words. Their required affinity cannot be changed once released,
    so only a replacement (the pod evicted, its owner making a new one, gated and planned again) gets them
    placed. ``index``: the cluster as kube-scheduler sees it (the bound pods only)."""
    nodes = index.node_by_name
    defaults = kube_filters.spread_defaults(config) if config is not None else None
    enabled = (
        kube_filters.DEFAULT_FILTERS
        if config is None
        else tuple(name for name in config.filters if name in kube_filters.DEFAULT_FILTERS)
    )  # those the configuration keeps
    found = []
    for pod in members:
        node_name = planned_node(pod)
        if pod.node_name or is_gated(pod) or pod.is_terminal or pod.is_terminating or node_name is None:
            continue  # an evicted pod (terminating) is on its way out already
        node = nodes.get(node_name)
        if node is None:
            found.append((pod, f"its planned node {node_name} is gone"))
            continue
        cycle = kube_filters.prefilter(pod, index.placed, index.requested, defaults)
        _, reasons = kube_filters.failure(cycle, node, enabled)
        if reasons:
            found.append((pod, f"its planned node {node_name} no longer fits it: {', '.join(reasons)}"))
    return found


def release_patch(pod: Pod, node: str | None, affinity_kind: str = REQUIRED) -> list[dict[str, Any]]:
    """The JSON patch releasing ``pod``: a ``test`` of the gates as last seen, the gates without ours, and with a
    ``node``, a node affinity for it and the ``netaware.io/planned-node`` annotation. ``required`` (the default):
    a required term added to every existing one (Kubernetes lets a gated pod's required affinity be narrowed,
    never widened); ``preferred``: a preferred term of weight 100 added (any change is allowed while gated)."""
    current = [{"name": name} for name in pod.scheduling_gates]
    operations: list[dict[str, Any]] = [
        {"op": "test", "path": "/spec/schedulingGates", "value": current},
        {"op": "replace", "path": "/spec/schedulingGates", "value": [g for g in current if g["name"] != GATE]},
    ]
    if node is None:
        return operations
    return operations + pin_operations(pod, node, affinity_kind)


def pin_operations(
    pod: Pod, node: str, affinity_kind: str = REQUIRED, annotations: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The JSON patch operations that give ``pod`` a node affinity for ``node`` (see :func:`release_patch`), the
    ``netaware.io/planned-node`` annotation and ``annotations``: of a release, or of a pod placed when it is
    admitted."""
    operations: list[dict[str, Any]] = []
    spec = pod.raw.get("spec") or {}
    affinity = dict(spec.get("affinity") or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    field = {"key": AFFINITY_KEY, "operator": "In", "values": [node]}
    if affinity_kind == PREFERRED:
        preferred = list(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ())
        preferred.append({"weight": 100, "preference": {"matchFields": [field]}})
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    else:
        required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
        terms = [dict(term) for term in required.get("nodeSelectorTerms") or ()] or [{}]
        for term in terms:
            term["matchFields"] = [*(term.get("matchFields") or ()), field]
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
    affinity["nodeAffinity"] = node_affinity
    if isinstance(pod.raw.get("spec"), dict):
        operations.append({"op": "add", "path": "/spec/affinity", "value": affinity})
    else:  # no spec at all (a review's pod may say null): the affinity is all of it
        operations.append({"op": "add", "path": "/spec", "value": {"affinity": affinity}})
    return [*operations, *json_patch(pod.raw, {keys.PLANNED_NODE: node, **(annotations or {})})]


def as_released(pod: Pod, node: str | None, affinity_kind: str = REQUIRED) -> Pod:
    """``pod`` as its release (:func:`release_patch`) leaves it: what a plan made before the release is seen back
    must count (rule 1), and what the API server will hold once it is."""
    released = jsonpatch.apply_patch(dict(pod.raw), release_patch(pod, node, affinity_kind))
    return Pod.parse(released, pod.namespace)


def as_gate_release(item: PlannedRelease) -> Release:
    """The dependencies-first mode's record of a release (its Events and metrics read this)."""
    return Release(item.pod, item.reason, item.waited)
