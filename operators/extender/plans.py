"""The extender's plans for AppGroups annotated ``netaware.io/ordered-scheduling: plan-ungated``: the shell over
:func:`operators.engine.planning.ungated.plan_pending`.

* When kube-scheduler asks about a pending pod of such an AppGroup, the pod's node comes from the last plan that
  covered it and was not used yet; otherwise a plan is made now, of every pending member the cache holds, and
  the nodes of the others are kept for when kube-scheduler asks about them.
* The answer is narrowed to that node when kube-scheduler's candidates and netaware's filters both pass it; when
  they do not (the cluster changed since the plan), the pod is answered as any other and counted ``off-plan``.
* The nodes answered are counted as placed by the next plans until the pod is seen bound or gone, or for
  :data:`ANSWERED_SECONDS` (kube-scheduler asks again only after an attempt that did not bind).

One extender process keeps these in memory: the chart's extender Service keeps a scheduler on one replica
(``sessionAffinity: ClientIP``). Replicas answering one scheduler in turn would each plan on their own: the
plans stay feasible (kube-scheduler checks every node it binds to) but may disagree.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Histogram

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.api.config.scheduler import SchedulerConfig
from operators.engine.cluster.appgroups import plans_ungated, pod_appgroup, workload_namespaces
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.planning.plan import Plan
from operators.engine.planning.release import PlanPace
from operators.engine.planning.ungated import answered_pods, backlog_budget, plan_pending
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.status.dependencies import validate
from operators.extender.admission import AdmittedPods
from operators.sources.live_index import Provisional

logger = logging.getLogger("netaware.extender")

ANSWERED_SECONDS = 60.0
# A pod asked about drops the answers and plans of bound or gone pods at most this often (a bound pod's are never
# placed: they only take memory; the passes of plans ahead drop those of the AppGroups they plan, every pass).
SWEEP_SECONDS = 1.0
KEPT = 10_000  # answers and planned nodes held at most (pods of AppGroups deleted meanwhile are never asked about)
# A plan at admission holds the pods' creation (the API server waits for the webhook): at most this long
ADMISSION_BUDGET_SECONDS = 0.02
ON_PLAN, OFF_PLAN, UNPLACEABLE = "on-plan", "off-plan", "unplaceable"


@dataclass
class PlanMetrics:
    plans: Histogram
    pods: Counter
    asks: Counter

    @classmethod
    def create(cls, registry: CollectorRegistry) -> PlanMetrics:
        return cls(
            Histogram(
                "netaware_extender_plan_seconds",
                "Seconds to plan an AppGroup's pending pods when kube-scheduler asked about one (plan-ungated).",
                registry=registry,
                buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25),
            ),
            Counter(
                "netaware_extender_planned_pods_total",
                "Pods of plan-ungated AppGroups asked about: answered with their planned node (on-plan), answered "
                "as any pod because the planned node no longer passed (off-plan), or placed nowhere by the plan "
                "(unplaceable).",
                ["result"],
                registry=registry,
            ),
            Counter(
                "netaware_extender_planned_asks_total",
                "Pods of plan-ungated AppGroups asked about with a planned node, by the nomination kube-scheduler's "
                "copy of the pod carried (planned: that node; none; other) and its candidates (one: it tried the "
                "nominated node alone; several: it scanned every node).",
                ["nomination", "candidates"],
                registry=registry,
            ),
        )


@dataclass
class PlanFollower:
    """See the module docstring."""

    clock: Callable[[], float] = time.time
    metrics: PlanMetrics | None = None
    # pod key -> (node, its AppGroup, when answered)
    answered: dict[str, tuple[str, str, float]] = field(default_factory=dict)
    # pod key -> (node, its AppGroup): of a plan, not asked about yet
    planned: dict[str, tuple[str, str]] = field(default_factory=dict)
    # given the pods a plan placed and kube-scheduler has not asked about, with their nodes, on clusters of at
    # least ``nominate_from_nodes`` nodes (:mod:`operators.extender.nominations`)
    nominate: Callable[[Iterable[tuple[Pod, str]]], None] | None = None
    nominate_from_nodes: int = 0
    swept: float = -math.inf  # when the answers and plans of bound or gone pods were last dropped (:meth:`_forget`)
    pace: PlanPace = field(default_factory=PlanPace)  # when the plans of the last while were made (their budgets)
    admitted: AdmittedPods | None = None  # the pods placed at admission (:mod:`operators.extender.admission`)

    def group_of(self, pod: Pod, cluster: Snapshot) -> AppGroup | None:
        """The plan-ungated AppGroup of a pending ``pod`` (None: answered as any pod)."""
        name = pod.labels.get(keys.APPGROUP_LABEL)
        if not name or pod.node_name:
            return None
        group = pod_appgroup(name, pod.namespace, cluster.app_groups_by_name.get(name, ()))
        if group is None or not plans_ungated(group) or validate(group.spec):
            return None
        return group

    def node_for(
        self,
        pod: Pod,
        group: AppGroup,
        provisional: Callable[[], Provisional],
        config: SchedulerConfig,
        candidates: Collection[str],
    ) -> str | None:
        """The node planned for ``pod`` (``provisional``: a view of the cluster the plan counts the answered pods
        on; ``candidates``: kube-scheduler's nodes for it); None when the plan places it nowhere."""
        now = self.clock()
        reference = f"{group.metadata.namespace}/{group.metadata.name}"
        pinned = pod.annotations.get(keys.PLANNED_NODE) if pod.annotations.get(keys.PLACED_AT_ADMISSION) else None
        if pinned and pinned in candidates:  # placed at admission: its node is in its spec, no plan to make
            return pinned
        view = provisional()
        try:  # nothing awaited until closed: no cache change lands in the view
            if now - self.swept >= SWEEP_SECONDS:  # a sweep costs every pod held: not once per pod asked about
                self._forget([group], view.index, now)
            node = self.planned.pop(pod.key, (None, ""))[0]
            # nominated, a pod whose node kube-scheduler's filters refused now is planned again on its candidates
            # (kube-scheduler scanned every node for it anyway); else it is answered as any pod (off-plan)
            gone = node is not None and self._nominating(view.index) and node not in candidates
            if node is None or node not in view.index.node_by_name or gone:
                node = self._plan(view, group, config, now, pod, candidates).get(pod.key)
        finally:
            view.close()
        if node is None:
            self.count(UNPLACEABLE)
            return None
        self.answered[pod.key] = (node, reference, now)
        return node

    def place_admitted(
        self, pods: Sequence[Pod], group: AppGroup, provisional: Callable[[], Provisional], config: SchedulerConfig
    ) -> dict[str, str]:
        """The nodes planned for ``pods`` of ``group`` as they are admitted, in one plan (the pods admitted before them
        are counted on their nodes by the kept usage); those it places nowhere left out. Pod key -> node."""
        now = self.clock()
        view = provisional()
        try:
            index = view.place([*answered_pods(view.index, self._held(None), None), *(p.on_node("") for p in pods)])
            plan, budget, seconds = self._timed_plan(index, group, config, now, None, ADMISSION_BUDGET_SECONDS)
        finally:
            view.close()
        admitted = {pod.key for pod in pods}
        places = {planned.pod: planned.node for planned in plan.pods if planned.pod in admitted}
        for _ in range(len(admitted) - len(places)):
            self.count(UNPLACEABLE)
        logger.info(
            "AppGroup %s/%s: %d pod(s) placed at admission in %.0f ms (budget %.0f ms), network cost %d",
            group.metadata.namespace, group.metadata.name, len(places), seconds * 1e3, budget * 1e3, plan.cost.cost,
        )  # fmt: skip
        return places

    def plan_ahead(
        self,
        groups: Sequence[AppGroup],
        provisional: Callable[[], Provisional],
        config: SchedulerConfig,
        until: float = math.inf,
    ) -> tuple[int, int]:
        """Plan the pending pods of ``groups``, in order, before kube-scheduler asks about them, those with a pod in
        no plan yet, on a cluster where they are nominated (:mod:`operators.extender.ahead`). One pass over one
        view: the pods answered for and planned before are counted once for the pass, not once per plan, and each
        plan counts the pods of the plans made before it in the pass. No plan starts once ``time.perf_counter()``
        passes ``until`` (the first always does). (The pods planned, the groups taken: the rest wait.)"""
        now = self.clock()
        view = provisional()
        try:
            if not self._nominating(view.index):
                return 0, len(groups)
            cache = view.index  # the pods as the cache has them (placing changes the members the index reads)
            pending = self._forget(groups, cache, now)
            due = [(at, group) for at, group in enumerate(groups) if not self._in_plans(pending[at])]
            if not due:
                return 0, len(groups)
            index = view.place(answered_pods(cache, self._held(None), None))
            planned = 0
            for count, (at, group) in enumerate(due):
                if count and time.perf_counter() >= until:
                    return planned, at
                places = self._plan_on(index, group, config, now, None, None)
                planned += len(places)
                made = {key: (node, group.metadata.name) for key, node in places.items()}
                index = view.place(answered_pods(index, made, None))
            return planned, len(groups)
        finally:
            view.close()

    def _in_plans(self, pending: Iterable[str]) -> bool:
        """Whether each of the ``pending`` pods is in a plan or answered for already."""
        return all(key in self.planned or key in self.answered for key in pending)

    def _held(self, reference: str | None) -> dict[str, tuple[str, str]]:
        """Pod key -> (node, AppGroup name) of the pods a plan counts as placed: every pod answered for, and the
        planned pods of AppGroups other than ``reference`` (None: of every one). Nominated, a pod's own AppGroup's
        planned pods hold their room too: moved, a pod would hold its room in kube-scheduler's view on the old node
        until the new nomination lands, and refuse others there."""
        held = {key: (node, of.rpartition("/")[2]) for key, (node, of) in self.planned.items() if of != reference}
        held.update({key: (node, of.rpartition("/")[2]) for key, (node, of, _) in self.answered.items()})
        return held

    def _plan(
        self,
        view: Provisional,
        group: AppGroup,
        config: SchedulerConfig,
        now: float,
        asking: Pod,
        candidates: Collection[str],
    ) -> dict[str, str]:
        """``group``'s pending pods planned on ``view`` when kube-scheduler asks about ``asking`` (with the pods
        :meth:`_held` placed). Pod -> node."""
        reference = f"{group.metadata.namespace}/{group.metadata.name}"
        held = self._held(None if self._nominating(view.index) else reference)
        index = view.place(answered_pods(view.index, held, asking))
        return self._plan_on(index, group, config, now, asking, candidates)

    def _plan_on(
        self,
        index: ClusterIndex,
        group: AppGroup,
        config: SchedulerConfig,
        now: float,
        asking: Pod | None,
        candidates: Collection[str] | None,
    ) -> dict[str, str]:
        """``group``'s pending pods planned on ``index`` (the pods held placed); the nodes of those other than
        ``asking`` kept and nominated. Pod -> node."""
        reference = f"{group.metadata.namespace}/{group.metadata.name}"
        plan, budget, seconds = self._timed_plan(index, group, config, now, candidates)
        places = {planned.pod: planned.node for planned in plan.pods}
        others = {key: node for key, node in places.items() if asking is None or key != asking.key}
        self.planned.update({key: (node, reference) for key, node in others.items()})
        self._nominate(index, group, others)
        logger.info(
            "AppGroup %s: %d pod(s) planned %s in %.0f ms (budget %.0f ms), network cost %d (greedy start %d)",
            reference, len(plan.pods), f"for pod {asking.key}" if asking is not None else "ahead", seconds * 1e3,
            budget * 1e3, plan.cost.cost, plan.greedy.cost,
        )  # fmt: skip
        return places

    def _timed_plan(
        self,
        index: ClusterIndex,
        group: AppGroup,
        config: SchedulerConfig,
        now: float,
        candidates: Collection[str] | None,
        most: float = math.inf,
    ) -> tuple[Plan, float, float]:
        """``group``'s pending pods planned on ``index`` within the backlog's budget (``most`` at most), counted in
        the pace and the metrics: the plan, its budget and its seconds."""
        started = time.perf_counter()
        budget = backlog_budget(index, self.planned.keys() | self.answered.keys(), pace=self.pace, now=now)
        budget = min(budget, most)
        plan = plan_pending(index, group, config, now, candidates, budget_seconds=budget)
        self.pace.planned(now)
        seconds = time.perf_counter() - started
        if self.metrics is not None:
            self.metrics.plans.observe(seconds)
        return plan, budget, seconds

    def _nominating(self, index: ClusterIndex) -> bool:
        return self.nominate is not None and len(index.nodes) >= self.nominate_from_nodes

    def _nominate(self, index: ClusterIndex, group: AppGroup, places: dict[str, str]) -> None:
        if self.nominate is None or not self._nominating(index):
            return
        members = index.appgroup_pods.get(group.metadata.name, {})
        self.nominate(
            (members[key], node)
            for key, node in places.items()
            if key in members and members[key].nominated_node != node
        )

    def missed(self, pod: Pod, node: str) -> None:
        """kube-scheduler's candidates or netaware's filters refused ``pod``'s planned ``node``."""
        self.answered.pop(pod.key, None)
        self.count(OFF_PLAN)
        logger.info("pod %s: its planned node %s no longer passes; answered as any pod", pod.key, node)

    def asked(self, pod: Pod, node: str | None, candidates: int) -> None:
        """How kube-scheduler asked about ``pod``, planned to ``node``: a pod scanned on every node though its plan
        was nominated tells whether the nomination had not reached kube-scheduler or its node failed there."""
        if self.metrics is None or node is None:
            return
        nominated = pod.nominated_node
        seen = "planned" if nominated == node else "other" if nominated else "none"
        self.metrics.asks.labels(seen, "one" if candidates == 1 else "several").inc()

    def count(self, result: str) -> None:
        if self.metrics is not None:
            self.metrics.pods.labels(result).inc()

    def _forget(self, groups: Sequence[AppGroup], index: ClusterIndex, now: float) -> list[set[str]]:
        """Drop the answers older than :data:`ANSWERED_SECONDS`, and the answers and plans of the pods of ``groups``
        now bound or gone, in one sweep however many groups; each group's pending pods."""
        self.swept = now
        pending = []
        still: dict[str, set[str]] = {}  # namespace/name -> its pending pods
        for group in groups:
            namespaces = set(workload_namespaces(group))
            members = index.appgroup_pods.get(group.metadata.name, {})
            pending.append({key for key, pod in members.items()
                            if pod.namespace in namespaces and not pod.node_name and not pod.is_terminal})  # fmt: skip
            still.setdefault(f"{group.metadata.namespace}/{group.metadata.name}", set()).update(pending[-1])
        self.answered = {
            key: held
            for key, held in self.answered.items()
            if now - held[2] < ANSWERED_SECONDS and (held[1] not in still or key in still[held[1]])
        }
        self.planned = {
            key: held for key, held in self.planned.items() if held[1] not in still or key in still[held[1]]
        }
        for held in (self.answered, self.planned):
            if len(held) > KEPT:
                held.clear()
        return pending
