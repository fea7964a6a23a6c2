"""Releases the topology-order scheduling gate: the shell over :func:`operators.engine.status.gates.gate_plan`.

* Pods and AppGroup specs come from the process's cluster cache. A change to a pod of an AppGroup, or to an
  AppGroup's spec, marks the AppGroup's name for evaluation when it has gated pods; nothing is listed.
* One task evaluates the marked names (only after the cache's first sync: an AppGroup not listed yet is not
  a missing AppGroup) and wakes again when the first held pod would time out.
* A pass plans the marked AppGroups in the order their first held pod arrived, for :data:`PASS_SECONDS` at most.
* Plans read one cluster index kept by delta (:class:`~operators.sources.live_index.LiveIndex`: no rebuild per
  plan). A pass opens a view over it with every pod released by a plan and not bound yet, or in flight, counted on
  its planned node, adds each plan's releases to it as they are made (the next plan of the pass sees them), and
  closes it before anything is awaited; the released members are then checked against the bound pods alone.
* Releases are sent (and followed until their watch event comes back) by :mod:`operators.controllers.releases`,
  :data:`WRITERS` at a time. A pod released by the timeout gets a Normal Event naming the workloads it did not
  wait for.
* A pass's writes (releases, Events, evictions) are a task of their own (:mod:`.pass_writes`): the next pass plans
  meanwhile; those not written when the loop ends are forgotten, and planned again by the next loop.
* A pass that fails unexpectedly keeps its AppGroup names marked; its supervisor restarts the loop.
* Metrics: ``netaware_gated_pods`` (pods held now), ``netaware_plan_index_builds``, ``netaware_plan_seconds``
  and ``netaware_plan_cost`` (its series removed with its AppGroup).

While the controller is down gated pods wait; when it is back, the first evaluation releases every pod whose
turn or timeout has come (the timeout counts from the pod's creation, not from the controller's start).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import Gauge, Histogram

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.api.config.controllers import AppGroupOptions
from operators.controllers.metrics import REGISTRY
from operators.controllers.pass_writes import STRAND_CHECK_SECONDS, Evictions, StrandChecks, Writes
from operators.controllers.plan_events import PlanAnnouncer, warn_timeout
from operators.controllers.releases import RETRY_SECONDS, Placed, Releases
from operators.engine.cluster.appgroups import by_name, plans_by_whole_group, pod_appgroup, workload_namespaces
from operators.engine.cluster.objects import Pod
from operators.engine.planning.plan import Plan
from operators.engine.planning.release import (
    BACKLOG_SECONDS,
    PlanPace,
    awaiting_bind,
    provisional,
    release_by_plan,
    stranded,
)
from operators.engine.status.gates import GatePlan, Release, gate_plan, is_gated, timeout_of
from operators.sources.cache import ClusterCache
from operators.sources.kinds import APPGROUP_PODS, APPGROUP_SPECS
from operators.sources.live_index import LiveIndex, Provisional
from operators.sources.store import Change

logger = logging.getLogger("netaware.gates")

# releases written at once: one takes ~1 s inside the API server in the 5,000-node burst (32 held it to 42 pods/s)
WRITERS = 128
# a pass plans AppGroups in the order their pods arrived for this long at most (at least one): the others are
# planned in the next pass, once this one's releases are sent, so that one large AppGroup holds back a burst of
# small ones by one plan at most, and the first releases go out while the rest is planned
PASS_SECONDS = BACKLOG_SECONDS  # a pass plans this long at most; a backlog shares it (as the extender's does)
WRITES_BEHIND = 4  # passes whose writes may still be under way when the next one plans (then it waits for the oldest)

GATED = Gauge("netaware_gated_pods", "Pods held by the topology-order scheduling gate.", registry=REGISTRY)

INDEX_BUILDS = Gauge(
    "netaware_plan_index_builds",
    "Times the plans' cluster index was built from every node: once after the cache's first sync, then only if a "
    "delta failed (every other change is applied by delta).",
    registry=REGISTRY,
)

PLANS = Histogram(
    "netaware_plan_seconds",
    "Seconds to plan an AppGroup's gated pods as a whole (ordered-scheduling: plan).",
    registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)

PodKey = tuple[str, str]  # (namespace, name)


class GateKeeper:
    """Which AppGroup names have gated pods, which need a look, and the task that releases them."""

    def __init__(
        self,
        cache: ClusterCache,
        timeout: float,
        members: Mapping[tuple[str, str], Mapping[str, Pod]],
        clock: Callable[[], float] = time.time,
        options: AppGroupOptions | None = None,
        live: LiveIndex | None = None,
    ) -> None:
        self.cache = cache
        # the cluster index every plan reads, kept by delta (plans need it: None without them), and while a pass
        # plans, the pods its plans and the earlier ones placed counted on their nodes over it
        self.live = live
        self.view: Provisional | None = None
        self.checking: list[tuple[AppGroup, list[Pod]]] = []  # groups planned in this pass: their members
        self.counted: dict[str, tuple[Pod, Pod | None]] = {}  # how the pods released, not bound, count (memo)
        self.timeout = timeout
        self.clock = clock
        self.options = options or AppGroupOptions()
        self.pace, self.budget = PlanPace(), self.options.plan_budget_seconds  # each plan's: shared by a backlog
        self.arrived: dict[PodKey, float] = {}  # gated pod -> when this controller first saw it (plans batch by it)
        # (namespace, AppGroup label) -> its pods by name: the AppGroup controller's, kept by delta (its listener
        # runs before this one, so they are current when a change reaches here)
        self.members = members
        self.gated: dict[str, set[PodKey]] = defaultdict(set)  # AppGroup name -> its gated pods
        self.placing: dict[str, set[PodKey]] = defaultdict(set)  # ... its pods released by a plan, not bound yet
        self.releases = Releases(clock, self._retry, self.options.plan_affinity)  # sent, and not seen back yet
        self.marked: set[str] = set()
        self.problems: dict[tuple[str, str], str | None] = {}  # AppGroup -> its timeout annotation's problem
        self.deadlines: dict[str, float] = {}  # AppGroup name -> when to look at it again (a timeout, a retry)
        self.wake = asyncio.Event()
        self._named: tuple[int, Mapping[str, tuple[AppGroup, ...]]] = (-1, {})  # (their version, by name)
        self.writes = Writes(self.wake)  # the passes' writes under way
        self.made: list[tuple[AppGroup, Plan]] = []  # plans made in this evaluation, announced after it
        self.abandoned: list[tuple[AppGroup, Pod, str]] = []  # stranded pods found in it, evicted after it
        self.evictions = Evictions()  # the stranded pods evicted or being evicted (never twice)
        self.strand_checks = StrandChecks(STRAND_CHECK_SECONDS)  # when each released pod's node was checked
        self.announcer = PlanAnnouncer(clock)

    # -- changes (on the controller's loop) ---------------------------------------------------------

    def on_changes(self, changes: Iterable[Change]) -> None:
        for change in changes:
            if change.kind == APPGROUP_PODS.name:
                self._pod_changed(change.old, change.new)
            elif change.kind == APPGROUP_SPECS.name:
                group = change.new or change.old
                if isinstance(group, AppGroup):
                    self._mark(group.metadata.name)
                if change.new is None and isinstance(change.old, AppGroup):
                    self._forget_appgroup(change.old)

    def _pod_changed(self, old: Pod | None, new: Pod | None) -> None:
        """One pod's change: where it is held (gated, placing), and what is known of it no longer (a release seen
        back, a pod gone)."""
        pod = new or old
        assert pod is not None
        key = (pod.namespace, pod.name)
        for before in (old,) if old is not None else ():
            if name := before.labels.get(keys.APPGROUP_LABEL):
                self.gated[name].discard(key)
                self.placing[name].discard(key)
                self._prune(name)
                self._mark(name)
        if new is not None and (name := new.labels.get(keys.APPGROUP_LABEL)):
            if awaiting_bind(new):
                self.placing[name].add(key)
            if is_gated(new):
                self.gated[name].add(key)
                self.arrived.setdefault(key, self.clock())
            self._mark(name)
        if new is None or not is_gated(new):  # released (by us or anyone) or gone
            self.releases.seen(key)
            self.arrived.pop(key, None)
        if new is None and old is not None:
            self.evictions.gone(old.uid)

    def _prune(self, name: str) -> None:
        for held in (self.gated, self.placing):
            if not held.get(name, True):
                del held[name]

    def _forget_appgroup(self, group: AppGroup) -> None:
        """An AppGroup deleted: what was kept for it goes, its metric series too."""
        key = (group.metadata.namespace, group.metadata.name)
        self.problems.pop(key, None)
        self.announcer.forget(key)

    def _mark(self, name: str) -> None:
        if self.gated.get(name) or self.placing.get(name):
            self.marked.add(name)
            self.wake.set()

    # -- decisions ------------------------------------------------------------------------------------

    def plans(
        self, name: str, now: float, named: Mapping[str, tuple[AppGroup, ...]] | None = None
    ) -> list[tuple[AppGroup | None, GatePlan]]:
        """One plan per AppGroup ``name`` that covers a namespace with gated pods; the gated pods no AppGroup
        covers make one more plan (without an AppGroup: released). ``named``: the AppGroups by name, when the
        caller has them (one pass over the cache for many names)."""
        groups = (named or self.appgroups_by_name()).get(name, ())
        held = self.gated.get(name, set()) | self.placing.get(name, set())
        owners = {ns: pod_appgroup(name, ns, groups) for ns in {ns for ns, _ in held}}  # once per namespace, not pod
        plans = []
        for group in {id(group): group for group in owners.values()}.values():
            if group is None:
                covered = {namespace for namespace, owner in owners.items() if owner is None}
            else:
                covered = set(workload_namespaces(group))
            members = [pod for namespace in covered for pod in self.members.get((namespace, name), {}).values()]
            if self.options.plans and plans_by_whole_group(group):
                plans.append((group, self._by_plan(group, members, now)))
            else:
                plans.append((group, gate_plan(group, members, now, self.timeout)))
        return plans

    def _by_plan(self, group: AppGroup | None, members: list[Pod], now: float) -> GatePlan:
        """The release by a whole-group plan, as a :class:`GatePlan` whose releases carry their planned node."""
        started = time.perf_counter()
        members = [self.releases.as_sent(pod) for pod in members]
        decision = release_by_plan(
            group, members, lambda: self._view().index, self.options.plan_config, self.arrived, now, self.timeout,
            self.budget, window=self.options.plan_window_seconds,
        )  # fmt: skip
        if decision.plan is not None and group is not None:
            PLANS.observe(time.perf_counter() - started)
            self.made.append((group, decision.plan))
            self.pace.planned(now)
            last = max((self.arrived.get((i.pod.namespace, i.pod.name), 0.0) for i in decision.release), default=0.0)
            self.announcer.log(group, decision.plan, self.clock() - last if last else None)
        deadline = decision.next_deadline
        if group is not None:
            self.checking.append((group, members))  # checked against the bound pods once the pass's view is closed
            if any(awaiting_bind(pod) for pod in members):
                due = now + STRAND_CHECK_SECONDS  # released, not bound yet: still bindable where planned?
                deadline = due if deadline is None else min(deadline, due)
        releases = tuple(
            Placed(item.pod, item.reason, item.waited, item.node, item.unplaced) for item in decision.release
        )
        return GatePlan(releases, (), deadline)

    def _arrival(self, name: str) -> tuple[float, str]:
        """When the first gated pod of AppGroup label ``name`` still held arrived (names with none come last)."""
        times = [self.arrived[key] for key in self.gated.get(name, ()) if key in self.arrived]
        return min(times, default=float("inf")), name

    def _view(self) -> Provisional:
        """This pass's view of the cluster for plans (opened on its first plan): the kept index with every pod
        released by a plan and not bound yet, or in flight, counted on its planned node (rule 1 of
        :mod:`~operators.engine.planning.release`)."""
        if self.view is None:
            if self.live is None:
                raise RuntimeError("plans need the gate keeper's kept index")
            self.view = Provisional(self.live)
            pods = [pod for name, placing in self.placing.items() for pod in self._pods(name, placing)]
            pods += [pod for pod, _ in self.releases.in_flight.values()]
            memo, self.counted = self.counted, {}  # kept for the pods still held, from pass to pass
            self.counted.update((pod.key, memo[pod.key]) for pod in pods if pod.key in memo)
            self.view.place(provisional(pods, self.view.index.node_by_name, self.counted))
        return self.view

    def _pods(self, name: str, keys_: Iterable[PodKey]) -> list[Pod]:
        """The pods of AppGroup label ``name`` with ``keys_``, as the releases in flight leave them."""
        found = (self.members.get((namespace, name), {}).get(pod) for namespace, pod in keys_)
        return [self.releases.as_sent(pod) for pod in found if pod is not None]

    def _close_view(self, now: float) -> None:
        """The pass's view closed (the kept index is the cache's again), then the released members of the groups
        it planned at ``now`` checked against the pods kube-scheduler has bound (:func:`stranded`), when due."""
        if self.view is not None:
            self.view.close()
            self.view = None
        checking, self.checking = self.checking, []
        if checking and self.live is not None:
            bound = self.live.current()
            for group, members in checking:
                for pod, why in stranded(self.strand_checks.due(members, now), bound, self.options.plan_config):
                    if self.evictions.claim(pod.uid):  # now: the next pass may run before the eviction is written
                        self.abandoned.append((group, pod, why))

    def appgroups_by_name(self) -> Mapping[str, tuple[AppGroup, ...]]:
        """The cached AppGroups by name, grouped again only when one of them changed (a pass asks each time)."""
        version = self.cache.version(APPGROUP_SPECS)
        if self._named[0] != version:
            self._named = (version, by_name(g for g in self.cache.objects(APPGROUP_SPECS) if isinstance(g, AppGroup)))
        return self._named[1]

    # -- the task -------------------------------------------------------------------------------------

    async def run(self, api: Any, stopped: Callable[[], bool] = lambda: False) -> None:
        """Evaluate marked AppGroup names and release what their plans say, until ``stopped``. A pass that fails
        unexpectedly keeps its names marked (the supervisor restarts this loop)."""
        await self.cache.wait_synced()  # an AppGroup not listed yet is not a missing AppGroup
        if self.live is not None:  # the index built now, not by the first plan
            self.live.build()
            INDEX_BUILDS.set(self.live.rebuilds)
        writing = asyncio.Semaphore(WRITERS)
        self.marked.update(name for held in (self.gated, self.placing) for name, pods in held.items() if pods)
        try:
            await self._passes(api, writing, stopped)
        finally:  # stopped or failed: the writes under way end with the passes, never outlive them, and what
            # they had not written is planned again by the next loop (this one restarted, or another leader's)
            await self.writes.end()
            self.releases.forget_unanswered()
            self.evictions.unwritten()

    async def _passes(self, api: Any, writing: asyncio.Semaphore, stopped: Callable[[], bool]) -> None:
        while not stopped():
            self.wake.clear()
            names, self.marked = self.marked, set()
            try:
                await self._pass(api, writing, names)
            except BaseException:
                self.marked |= names
                raise
            GATED.set(sum(len(gated) for gated in self.gated.values()))
            if self.live is not None:
                INDEX_BUILDS.set(self.live.rebuilds)
            first = min(self.deadlines.values(), default=None)
            timeout = max(first - self.clock(), 0.05) if first is not None else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout)
            due = [name for name, deadline in self.deadlines.items() if deadline <= self.clock()]
            for name in due:
                del self.deadlines[name]
                self.marked.add(name)

    async def _pass(self, api: Any, writing: asyncio.Semaphore, names: set[str]) -> None:
        """One evaluation of ``names``: plans made; then releases sent, Events posted, stranded pods evicted by a
        task of their own (:meth:`_write`): the next pass plans while they are written, as the releases are counted
        in flight from the moment they are planned."""
        await self.writes.behind(WRITES_BEHIND - 1)
        now = self.clock()
        for pod in self.releases.expire(now):
            self._mark(pod.labels.get(keys.APPGROUP_LABEL, ""))
        releases = self.releases.due_again(now)
        self.releases.start(releases, now)
        holding: dict[str, float] = {}  # names with pods held -> their first deadline
        problems: list[tuple[AppGroup, str]] = []
        named = self.appgroups_by_name() if names else {}
        order = sorted(names, key=self._arrival)  # first come, first planned
        waiting = sum(1 for name in {*order, *self.marked} if self.gated.get(name))
        nodes = len(self.live.current().nodes) if self.live is not None and waiting else 0
        self.budget = self.pace.budget(self.options.plan_budget_seconds, waiting, PASS_SECONDS, nodes, now)
        started = time.perf_counter()
        try:
            for position, name in enumerate(order):
                if position and time.perf_counter() - started > PASS_SECONDS:
                    self.marked.update(order[position:])  # next pass, once this one's releases are sent
                    self.wake.set()
                    break
                for group, plan in self.plans(name, now, named):
                    if group is not None:
                        problem = timeout_of(group, self.timeout)[1]
                        key = (group.metadata.namespace, name)
                        if self.problems.get(key) != problem and problem is not None:
                            problems.append((group, problem))
                        self.problems[key] = problem
                    new = [item for item in plan.release if not self.releases.sending(item.pod)]
                    self.releases.start(new, now)  # in flight from now on: the next AppGroup's plan counts them
                    if self.view is not None:  # ... on the index this pass plans on
                        sent = [self.releases.as_sent(item.pod) for item in new]
                        self.view.place(provisional(sent, self.view.index.node_by_name))
                    releases.extend(new)
                    if plan.next_deadline is not None:
                        holding[name] = min(holding.get(name, plan.next_deadline), plan.next_deadline)
        finally:
            self._close_view(now)  # before anything is awaited: the kept index is the cache's again
        made, self.made = self.made, []
        abandoned, self.abandoned = self.abandoned, []
        for name, deadline in holding.items():
            self.deadlines[name] = min(self.deadlines.get(name, deadline), deadline)
        if problems or releases or made or abandoned:
            self.writes.start(self._write(api, writing, problems, releases, made, abandoned))

    async def _write(
        self,
        api: Any,
        writing: asyncio.Semaphore,
        problems: list[tuple[AppGroup, str]],
        releases: list[Release],
        made: list[tuple[AppGroup, Plan]],
        abandoned: list[tuple[AppGroup, Pod, str]],
    ) -> None:
        """A pass's writes: Warnings, the releases (:data:`WRITERS` at a time), then the plans' Events (as many at a
        time), the evictions of stranded pods."""
        for group_with_problem, problem in problems:
            await warn_timeout(api, group_with_problem, problem)
        sending = (self.releases.send(api, writing, item) for item in releases)
        results = await asyncio.gather(*sending, return_exceptions=True)
        await self.announcer.announce_all(api, writing, made)
        for group_planned, pod, why in abandoned:
            await self._abandon(api, group_planned, pod, why)
        failed = [result for result in results if isinstance(result, BaseException)]
        if failed:
            raise failed[0]

    async def _abandon(self, api: Any, group: AppGroup, pod: Pod, why: str) -> None:
        if not await self.evictions.evict(api, group, pod, why):
            self._retry(pod)

    def _retry(self, pod: Pod) -> None:
        """Look at the pod's AppGroup again in :data:`RETRY_SECONDS`; the loop woken, so that it waits for that
        deadline too (a write task calls this while the loop sleeps on a timeout computed without it)."""
        name = pod.labels.get(keys.APPGROUP_LABEL, "")
        self.deadlines[name] = min(self.deadlines.get(name, float("inf")), self.clock() + RETRY_SECONDS)
        self.wake.set()
