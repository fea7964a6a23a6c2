"""One supervisor for every long-running task of every component (the status writer, the gate keeper, the
NetworkTopology loops, the work queues, the watches, the extender's index follower, the certificate reloader, the
descheduler, the probe, the agent).

A task nobody watches is a zombie in waiting: one unexpected exception (a transport error kubernetes-asyncio does
not wrap, a bug in a planner) ends it while the process keeps its Lease and answers ``/healthz``. Under
:meth:`Supervisor.run` a task that raises, or ends while it should still run, is:

1. logged with its traceback and counted in ``netaware_task_restarts_total{task}``;
2. restarted after a backoff (:data:`FIRST_BACKOFF` doubling up to :data:`MAX_BACKOFF`; a task that ran
   :data:`HEALTHY_AFTER` seconds since its last start begins again from the first backoff);
3. reported: after :data:`FAILING_AFTER` failures in a row (no healthy stretch between), :meth:`problem` names it
   until it has run a healthy stretch again, ``/healthz`` fails and the kubelet restarts the pod; while any task
   waits to be restarted, :meth:`running` is false, and ``/readyz`` says so.

Expected failures (an API error, a broken connection, a timeout: :data:`operators.kube.API_ERRORS`) are the loops'
own to retry where they happen, so they lose nothing; only what nobody expected reaches the supervisor.

The problem and readiness are plain attribute reads: the kopf thread's tasks and the main loop's share one
supervisor, and the probes read it from either.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter

logger = logging.getLogger("netaware.supervision")

FIRST_BACKOFF = 0.5  # seconds before the first restart
MAX_BACKOFF = 30.0
HEALTHY_AFTER = 60.0  # a task that ran this long since it was (re)started is healthy again
FAILING_AFTER = 5  # failures in a row that make the process unhealthy


@dataclass
class _Watched:
    """What the supervisor knows of one task name (several tasks may share one: the NetworkTopology loops)."""

    failures: int = 0  # in a row, without a healthy stretch between
    waiting: int = 0  # instances in backoff now
    last_error: str = ""
    started: float = 0.0  # when an instance was last (re)started


@dataclass
class Supervisor:
    """See the module docstring. ``registry``: where ``netaware_task_restarts_total`` is counted (None: nowhere)."""

    registry: CollectorRegistry | None = None
    first_backoff: float = FIRST_BACKOFF
    max_backoff: float = MAX_BACKOFF
    healthy_after: float = HEALTHY_AFTER
    failing_after: int = FAILING_AFTER
    clock: Callable[[], float] = time.monotonic
    restarts: Counter | None = None
    _tasks: dict[str, _Watched] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.restarts is None and self.registry is not None:
            self.restarts = Counter(
                "netaware_task_restarts",
                "Restarts of a long-running task after it failed or ended unexpectedly, per task.",
                ["task"],
                registry=self.registry,
            )

    def problem(self) -> str:
        """Why the process is unhealthy ("" when it is not): the tasks that keep failing."""
        now = self.clock()
        failing = sorted(
            (name, watched)
            for name, watched in list(self._tasks.items())
            if watched.failures >= self.failing_after and now - watched.started < self.healthy_after
        )
        return "; ".join(
            f"task {name} failed {watched.failures} times in a row (last: {watched.last_error})"
            for name, watched in failing
        )

    def running(self) -> bool:
        """Every supervised task is running (none waits to be restarted)."""
        return not any(watched.waiting for watched in list(self._tasks.values()))

    def failures(self, name: str) -> int:
        """How many times ``name`` failed in a row."""
        watched = self._tasks.get(name)
        return watched.failures if watched is not None else 0

    async def run(self, name: str, body: Callable[[], Awaitable[None]], stopped: Callable[[], bool]) -> None:
        """Run ``body()`` until ``stopped()``, restarting it as the module docstring says; never raises but
        ``asyncio.CancelledError``."""
        watched = self._tasks.setdefault(name, _Watched())
        if self.restarts is not None:
            self.restarts.labels(name)  # the task's series from its start: 0 restarts is data for rate() and alerts
        backoff = self.first_backoff
        while not stopped():
            started = watched.started = self.clock()
            try:
                await body()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # what nobody expected: logged, counted, restarted
                why = f"{type(error).__name__}: {str(error)[:300]}"
                logger.exception("task %s failed; restarting it", name)
            else:
                if stopped():
                    return
                why = "ended while it should run"
                logger.error("task %s %s; restarting it", name, why)
            if self.clock() - started >= self.healthy_after:
                backoff, watched.failures = self.first_backoff, 0
            watched.failures += 1
            watched.last_error = why
            if self.restarts is not None:
                self.restarts.labels(name).inc()
            if stopped():
                return
            watched.waiting += 1
            try:
                await _backoff(backoff, stopped)
            finally:
                watched.waiting -= 1
            backoff = min(backoff * 2, self.max_backoff)

    def start(self, name: str, body: Callable[[], Awaitable[None]], stopped: Callable[[], bool] = lambda: False
              ) -> asyncio.Task[None]:  # fmt: skip
        """:meth:`run` as a task of the running loop (stopped by cancelling it: :func:`cancel`)."""
        return asyncio.get_running_loop().create_task(self.run(name, body, stopped), name=f"supervised {name}")


STOP_POLL = 0.1  # seconds between two looks at the stop flag during a backoff


async def _backoff(seconds: float, stopped: Callable[[], bool]) -> None:
    """Sleep ``seconds``, or less once ``stopped()``: a stop that only sets the flag (a probe's, a watch's) ends a
    backoff of up to :data:`MAX_BACKOFF` at once, as a cancellation does (a probe whose rounds had failed a few
    times in a row would otherwise sleep out its backoff after SIGTERM, up to half a minute)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not stopped():
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            return
        await asyncio.sleep(min(left, STOP_POLL))


async def cancel(tasks: Iterable[asyncio.Task[None] | None]) -> None:
    """Cancel ``tasks`` and wait for them to end; never raises (a supervised task ends by its cancellation)."""
    held = [task for task in tasks if task is not None]
    for task in held:
        task.cancel()
    for task in held:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
