"""A keyed work queue for the controllers that reconcile one object at a time by name (NodeSLOs, node bandwidth):
a name is queued at most once however often it changes, a few workers handle the names once the cache has synced,
an API error puts the name back after a pause, any other error is logged (the next change brings it back)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kubernetes_asyncio.client.exceptions import ApiException

RETRY_PAUSE = 2.0  # seconds before a name whose API call failed is handled again


@dataclass
class WorkQueue:
    logger: logging.Logger
    failure: str  # the log message of a failed name, with one %s for it: "NodeSLO %s: rendering failed"
    queue: asyncio.Queue[str] = field(default_factory=asyncio.Queue)
    queued: set[str] = field(default_factory=set)
    workers: list[asyncio.Task[None]] = field(default_factory=list)

    def enqueue(self, name: str) -> None:
        if name not in self.queued:
            self.queued.add(name)
            self.queue.put_nowait(name)

    def start(
        self, count: int, synced: Callable[[], Awaitable[None]], handle: Callable[[str], Awaitable[None]]
    ) -> None:
        """``count`` workers that wait for ``synced`` and then ``handle`` the queued names."""

        async def work() -> None:
            await synced()
            while True:
                name = await self.queue.get()
                self.queued.discard(name)
                try:
                    await handle(name)
                except ApiException as error:
                    self.logger.warning(f"{self.failure} (%s %s); retrying", name, error.status, error.reason)
                    await asyncio.sleep(RETRY_PAUSE)
                    self.enqueue(name)
                except Exception:
                    self.logger.exception(self.failure, name)

        self.workers = [asyncio.create_task(work()) for _ in range(count)]

    async def stop(self) -> None:
        for worker in self.workers:
            worker.cancel()
        for worker in self.workers:
            with contextlib.suppress(asyncio.CancelledError):
                await worker
