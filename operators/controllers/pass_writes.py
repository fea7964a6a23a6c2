"""The gate keeper's passes' writes (releases, Events, evictions) as tasks of their own: a pass plans while the
ones before it are still written (their releases are counted in flight from the moment they are planned), and
none outlives the loop that started it. And the evictions of stranded pods, claimed when found, and when each
released pod was last checked for stranding."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from operators.api.appgroup import AppGroup
from operators.controllers.plan_events import evict_stranded
from operators.engine.cluster.objects import Pod
from operators.engine.planning.release import awaiting_bind

logger = logging.getLogger("netaware.gates")
STRAND_CHECK_SECONDS = 2.0  # how often a released, unbound pod's planned node is checked again


class Writes:
    """The writes under way, oldest first; ``wake``: the loop's event, set when one fails unexpectedly."""

    def __init__(self, wake: asyncio.Event) -> None:
        self.wake = wake
        self.tasks: list[asyncio.Task[None]] = []

    def start(self, writes: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(writes)
        task.add_done_callback(self._done)
        self.tasks.append(task)

    def _done(self, task: asyncio.Task[None]) -> None:
        """One that failed is logged and wakes the loop, whose next pass raises it (:meth:`behind`)."""
        if not task.cancelled() and (error := task.exception()) is not None:
            logger.error("a pass's writes failed: %r", error, exc_info=error)
            self.wake.set()

    async def behind(self, most: int) -> None:
        """Until at most ``most`` passes' writes are under way (the oldest awaited first); a write that failed
        unexpectedly is raised here, so the pass fails and the supervisor restarts the loop."""
        self.tasks = [task for task in self.tasks if not task.done() or (not task.cancelled() and task.exception())]
        while self.tasks and (len(self.tasks) > most or self.tasks[0].done()):
            oldest = self.tasks[0]
            await asyncio.wait([oldest])  # kept in the list meanwhile: cancelled with the loop, :meth:`end` awaits it
            self.tasks.remove(oldest)
            if not oldest.cancelled():
                oldest.result()

    async def end(self) -> None:
        """The writes under way when the passes end: cancelled (a release not written is planned again by the next
        leader: its pod is still gated) and awaited."""
        for task in self.tasks:
            task.cancel()
        tasks, self.tasks = self.tasks, []
        if tasks:
            await asyncio.wait(tasks)


class Evictions:
    """The uids of the stranded pods evicted or being evicted: claimed when found (never evicted twice, even by a
    pass that runs before the eviction is written), kept until the pod is gone, given up when the eviction fails
    or its write ended unwritten."""

    def __init__(self) -> None:
        self.evicted: set[str] = set()
        self.claimed: set[str] = set()  # ... of those, the ones whose eviction is not written yet

    def claim(self, uid: str) -> bool:
        if uid in self.evicted:
            return False
        self.evicted.add(uid)
        self.claimed.add(uid)
        return True

    def gone(self, uid: str) -> None:
        self.evicted.discard(uid)

    async def evict(self, api: Any, group: AppGroup, pod: Pod, why: str) -> bool:
        """Evict a claimed pod: False when it is to be tried again."""
        try:
            evicted = await evict_stranded(api, group, pod, why)
        except BaseException:
            self.evicted.discard(pod.uid)
            raise
        finally:
            self.claimed.discard(pod.uid)
        if evicted is False:
            self.evicted.discard(pod.uid)
        return evicted is not False

    def unwritten(self) -> None:
        """The writes ended with their loop: the claims not written are given up (found stranded again)."""
        self.evicted -= self.claimed
        self.claimed.clear()


class StrandChecks:
    """When each released, unbound pod's planned node was last checked (is it stranded?), so that it is checked
    once per ``period``: a group planned in parts is planned pass after pass, and checking all its released pods
    each time was a quarter of the passes' time in a burst of three 300-pod groups. A pod due is looked at again
    by then anyway (the gate keeper's deadline for its group)."""

    KEPT = 10_000  # past this many remembered, those older than the period are dropped (bound or gone pods)

    def __init__(self, period: float) -> None:
        self.period = period
        self.checked: dict[str, float] = {}  # pod uid -> when

    def due(self, members: list[Pod], now: float) -> list[Pod]:
        """Of ``members``, those released and not bound that were not checked in the last period, each counted as
        checked ``now``."""
        if len(self.checked) > self.KEPT:
            for uid in [uid for uid, when in self.checked.items() if when <= now - self.period]:
                del self.checked[uid]
        due = []
        for pod in members:
            if awaiting_bind(pod) and self.checked.get(pod.uid, float("-inf")) <= now - self.period:
                self.checked[pod.uid] = now
                due.append(pod)
        return due
