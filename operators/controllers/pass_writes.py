"""The gate keeper's passes' writes (releases, Events, evictions) as tasks of their own: a pass plans while the
ones before it are still written (their releases are counted in flight from the moment they are planned), and
none outlives the loop that started it."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


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
        """One that failed wakes the loop, whose next pass raises it (:meth:`behind`)."""
        if not task.cancelled() and task.exception() is not None:
            self.wake.set()

    async def behind(self, most: int) -> None:
        """Until at most ``most`` passes' writes are under way (the oldest awaited first); a write that failed
        unexpectedly is raised here, so the pass fails and the supervisor restarts the loop."""
        self.tasks = [task for task in self.tasks if not task.done() or (not task.cancelled() and task.exception())]
        while self.tasks and (len(self.tasks) > most or self.tasks[0].done()):
            await self.tasks.pop(0)

    async def end(self) -> None:
        """The writes under way when the passes end: cancelled (a release not written is planned again by the next
        leader: its pod is still gated) and awaited."""
        for task in self.tasks:
            task.cancel()
        tasks, self.tasks = self.tasks, []
        if tasks:
            await asyncio.wait(tasks)
