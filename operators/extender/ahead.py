"""Plans made before kube-scheduler asks: the pods of plan-ungated AppGroups planned as they arrive, and nominated.

A pod nominated to its planned node costs kube-scheduler one node's filters (:mod:`.nominations`). Planned only
when kube-scheduler asks, the first pod of every AppGroup is still scanned against every node, and the extender
answers it with every node as a candidate: on 5,000 nodes, 250 AppGroups arriving together were 250 full scans.
So on clusters where pods are nominated, the extender also follows the pods of plan-ungated AppGroups from its
cache and plans each AppGroup once its pods stop arriving, as the gated mode's passes do
(:data:`~operators.engine.planning.release.BATCH_SECONDS` after the last, at most
:data:`~operators.engine.planning.release.GATHER_SECONDS` after the first), on every node: kube-scheduler has not
narrowed them yet. Every pod of the plan is nominated. A pod kube-scheduler asks about first is planned then, as
without this.

The plans run on the extender's event loop between its answers, in passes: the AppGroups due are planned oldest
first on one view of the cluster, each plan within its budget (shared under a backlog as kube-scheduler's asks share
it) and counting the pods of the plans before it. A pass looks at :data:`PASS_GROUPS` AppGroups at most and starts
no plan after :data:`PASS_SECONDS` (the rest wait for the next; an AppGroup due again meanwhile stays queued once),
and is followed by the answers of the requests that came meanwhile (:mod:`.answering`): they come first. A pass that
raises is the supervisor's (task ``extender-plans-ahead``: logged, counted in ``netaware_task_restarts_total``,
restarted): the AppGroups queued then are planned when kube-scheduler asks about their pods, as without plans ahead.
Planned one AppGroup a pass, the pods of every plan not bound yet were counted on the view and put back again for
each AppGroup: in a 5,000-node burst, half of a plan's time."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable

from operators.api import keys
from operators.engine.cluster.objects import Pod
from operators.engine.planning.release import BATCH_SECONDS, GATHER_SECONDS, gathering_due
from operators.extender.answers import ExtenderState
from operators.sources.kinds import PODS
from operators.sources.store import Change

PASS_SECONDS = 0.1  # a pass starts no plan after this long (a plan's budget is at most 0.1 s): the others wait
PASS_GROUPS = 8  # a pass looks at this many AppGroups of the queue at most (each looked at costs its pods)
MAX_PAUSE_SECONDS = 0.1  # after a pass, the wait for the requests in flight at most


class PlansAhead:
    """See the module docstring."""

    def __init__(self, state: ExtenderState, clock: Callable[[], float] = time.monotonic) -> None:
        self.state = state
        self.clock = clock
        # (namespace, AppGroup label) -> (first arrival, last arrival, a pod of it) of the pods not planned yet
        self.waiting: dict[tuple[str, str], tuple[float, float, Pod]] = {}
        self.wake = asyncio.Event()

    def on_changes(self, changes: Iterable[Change]) -> None:
        now = self.clock()
        for change in changes:
            pod = change.new
            if change.kind != PODS.name or change.old is not None or not isinstance(pod, Pod) or pod.node_name:
                continue
            if keys.PLACED_AT_ADMISSION in pod.annotations:  # its node is in its spec already
                continue
            if name := pod.labels.get(keys.APPGROUP_LABEL):
                first = self.waiting.get((pod.namespace, name), (now, now, pod))[0]
                self.waiting[(pod.namespace, name)] = (first, now, pod)
                self.wake.set()

    def due(self) -> tuple[list[Pod], float | None]:
        """The AppGroups whose pods stopped arriving, by a pod of each, oldest first (taken off the waiting); and
        when the next one is due (None: none waits)."""
        now = self.clock()
        ready: list[tuple[float, Pod]] = []
        later: list[float] = []
        for key, (first, last, pod) in list(self.waiting.items()):
            when = gathering_due(first, last, BATCH_SECONDS, GATHER_SECONDS)
            if when <= now:
                ready.append((first, pod))
                del self.waiting[key]
            else:
                later.append(when)
        return [pod for _, pod in sorted(ready, key=lambda item: item[0])], min(later, default=None)

    def plan_pass(self, pods: list[Pod], until: float = math.inf) -> tuple[int, int]:
        """Plan the AppGroups of ``pods`` (a pod of each, oldest first; those not plan-ungated dropped) in one pass,
        starting no plan after ``until`` (``time.perf_counter()``); the pods planned, and how many of ``pods`` the
        pass took (the rest wait for the next)."""
        follower, index = self.state.follower, self.state.index()
        found = [(pod, follower.group_of(pod, index.snapshot)) for pod in pods]
        groups = [group for _, group in found if group is not None]
        planned, taken = follower.plan_ahead(groups, self.state.provisional, self.state.config, until)
        if taken == len(groups):
            return planned, len(pods)
        return planned, [at for at, (_, group) in enumerate(found) if group is not None][taken]

    async def run(self, stop: asyncio.Event) -> None:
        """Plan the AppGroups as they come due, until ``stop``."""
        queue: list[Pod] = []
        while not stop.is_set():
            ready, next_due = self.due()
            queue = queued(queue, ready)
            if queue:
                started = time.perf_counter()
                queue = queue[self.plan_pass(queue[:PASS_GROUPS], started + PASS_SECONDS)[1] :]
                # kube-scheduler's requests first: those that came during the pass are answered before the next
                # (with no pause at all, a burst's plans left the answers 2 calls a second)
                await self.state.answering.served(MAX_PAUSE_SECONDS)
                continue
            self.wake.clear()
            timeout = None if next_due is None else max(next_due - self.clock(), 0.001)
            waiting = [asyncio.ensure_future(self.wake.wait()), asyncio.ensure_future(stop.wait())]
            await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            for future in waiting:
                future.cancel()


def queued(queue: list[Pod], ready: list[Pod]) -> list[Pod]:
    """``queue``, then the AppGroups of ``ready`` not queued already: an AppGroup whose pods came again while it
    waited for its pass is due again, and its plan takes every pod of it not planned then (planned twice, its second
    plan only found its pods placed)."""
    waiting = {(pod.namespace, pod.labels.get(keys.APPGROUP_LABEL)) for pod in queue}
    return queue + [pod for pod in ready if (pod.namespace, pod.labels.get(keys.APPGROUP_LABEL)) not in waiting]
