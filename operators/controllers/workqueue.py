"""A keyed work queue for the controllers that reconcile one object at a time by name (NodeSLOs, node bandwidth):
a name is queued at most once however often it changes, a few workers handle the names once the cache has synced.
A name whose API call failed (an API error, a broken connection, a timeout) is put back after a pause; any other
error puts it back too and ends its worker, which its supervisor restarts (logged, counted, reported)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from operators.kube import API_ERRORS, describe
from operators.supervision import Supervisor, cancel

RETRY_PAUSE = 2.0  # seconds before a name whose handling failed is handled again


@dataclass
class WorkQueue:
    logger: logging.Logger
    failure: str  # the log message of a failed name, with one %s for it: "NodeSLO %s: rendering failed"
    task: str = "workqueue"  # the workers' name under their supervisor
    queue: asyncio.Queue[str] = field(default_factory=asyncio.Queue)
    queued: set[str] = field(default_factory=set)
    workers: list[asyncio.Task[None]] = field(default_factory=list)

    def enqueue(self, name: str) -> None:
        if name not in self.queued:
            self.queued.add(name)
            self.queue.put_nowait(name)

    def start(
        self,
        count: int,
        synced: Callable[[], Awaitable[None]],
        handle: Callable[[str], Awaitable[None]],
        supervisor: Supervisor | None = None,
    ) -> None:
        """``count`` workers under ``supervisor`` that wait for ``synced`` and then ``handle`` the queued names."""
        loop = asyncio.get_running_loop()

        async def work() -> None:
            await synced()
            while True:
                name = await self.queue.get()
                self.queued.discard(name)
                try:
                    await handle(name)
                except API_ERRORS as error:  # the worker pauses too: an outage is not met with a storm of retries
                    self.logger.warning(f"{self.failure} (%s); retrying", name, describe(error))
                    await asyncio.sleep(RETRY_PAUSE)
                    self.enqueue(name)
                except BaseException:
                    loop.call_later(RETRY_PAUSE, self.enqueue, name)
                    raise

        tasks = supervisor or Supervisor()
        self.workers = [tasks.start(self.task, work) for _ in range(count)]

    async def stop(self) -> None:
        await cancel(self.workers)
