"""kube-scheduler's requests in flight at the extender, so that the plans made between its answers give way to them.

The plans ahead (:mod:`.ahead`) run on the loop that answers kube-scheduler. A pause as long as each pass took left
the loop idle half of a burst whether or not a request waited: in the 5,000-node burst, the plans ahead fell behind
the AppGroups arriving (about 6 planned a second against 12.5 arriving), and kube-scheduler took a quarter of the
pods before their nomination was written. A pass is now followed by what the answers need and no more: one glance at
the sockets (a request that came during the pass is read and its handler started), then the wait until no request is
in flight (0.1 s at most: :data:`~operators.extender.ahead.MAX_PAUSE_SECONDS`). No plan runs while a request is
being answered, and none waits while no request is."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator

from aiohttp import web

GLANCE_SECONDS = 0.002  # the loop polls its sockets and starts the handlers of the requests that came meanwhile


class Answering:
    """The requests in flight (see the module docstring)."""

    def __init__(self) -> None:
        self.in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        self.in_flight += 1
        self._idle.clear()
        try:
            yield
        finally:
            self.in_flight -= 1
            if not self.in_flight:
                self._idle.set()

    async def served(self, limit: float) -> None:
        """Return once the requests that came meanwhile are answered and none is in flight, after ``limit`` seconds
        at most (a request kept waiting by the cluster's API does not stop the plans)."""
        await asyncio.sleep(GLANCE_SECONDS)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), limit)

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        with self.request():
            return await handler(request)
