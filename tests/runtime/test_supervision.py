"""The one supervision rule: a task that raises or ends is logged, counted, restarted with a growing backoff; five
failures in a row (no healthy stretch between) make the process unhealthy until the task has run a healthy stretch
again; a task waiting to restart makes it not ready; a stop ends it without a restart."""

from __future__ import annotations

import asyncio
import itertools
import logging

import pytest
from prometheus_client import CollectorRegistry

from operators.supervision import Supervisor, cancel


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Runs:
    """How many times a body ran, and a wait for the n-th run."""

    def __init__(self) -> None:
        self.count = 0
        self.changed = asyncio.Event()

    def ran(self) -> int:
        self.count += 1
        self.changed.set()
        return self.count

    async def reach(self, count: int) -> None:
        async with asyncio.timeout(5):
            while self.count < count:
                self.changed.clear()
                await self.changed.wait()


def restarts(registry: CollectorRegistry, task: str) -> float:
    return registry.get_sample_value("netaware_task_restarts_total", {"task": task}) or 0.0


async def test_a_failing_task_is_restarted_with_a_doubling_backoff_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = CollectorRegistry()
    tasks = Supervisor(registry, first_backoff=0.01, max_backoff=0.04)
    started: list[float] = []
    runs = Runs()

    async def body() -> None:
        started.append(asyncio.get_running_loop().time())
        if runs.ran() <= 4:
            raise ConnectionResetError("peer reset")
        await asyncio.Event().wait()

    with caplog.at_level(logging.ERROR, "netaware.supervision"):
        task = tasks.start("writer", body)
        await runs.reach(5)
        await cancel([task])
    assert restarts(registry, "writer") == 4
    gaps = [later - earlier for earlier, later in itertools.pairwise(started)]
    backoffs = (0.01, 0.02, 0.04, 0.04)  # doubling from 0.01, capped at 0.04
    assert all(gap >= backoff - 0.002 for gap, backoff in zip(gaps, backoffs, strict=True)), gaps
    assert "task writer failed; restarting it" in caplog.text and "ConnectionResetError: peer reset" in caplog.text


async def test_five_failures_in_a_row_make_it_unhealthy_until_a_healthy_stretch() -> None:
    clock = Clock()
    tasks = Supervisor(CollectorRegistry(), first_backoff=0.001, healthy_after=60, clock=clock)
    failing = True
    runs = Runs()

    async def body() -> None:
        run = runs.ran()
        if failing:
            if run == 5:
                await asyncio.sleep(0.01)  # the test looks before the fifth failure
            raise RuntimeError(f"bug {run}")
        await asyncio.Event().wait()

    task = tasks.start("gates", body)
    await runs.reach(5)
    assert tasks.problem() == ""  # four failures: not yet
    await asyncio.sleep(0.02)
    assert tasks.problem() == "task gates failed 5 times in a row (last: RuntimeError: bug 5)"
    failing = False
    await runs.reach(6)
    assert tasks.problem() != ""  # running again, but not for a healthy stretch yet
    clock.now += 60
    assert tasks.problem() == ""
    await cancel([task])


async def test_a_task_that_ran_a_healthy_stretch_starts_its_count_again() -> None:
    clock = Clock()
    tasks = Supervisor(CollectorRegistry(), first_backoff=0.001, healthy_after=60, clock=clock)
    stop = asyncio.Event()
    runs = 0

    async def body() -> None:
        nonlocal runs
        runs += 1
        if runs == 4:
            clock.now += 61  # this run lasted a healthy stretch before it failed
        if runs == 5:
            stop.set()
        raise RuntimeError("bug")

    await asyncio.wait_for(tasks.run("loop", body, stop.is_set), timeout=2)
    assert tasks.failures("loop") == 2  # runs 4 and 5: run 4 began the count again


async def test_a_task_waiting_to_restart_is_not_running() -> None:
    tasks = Supervisor(first_backoff=0.2)

    async def body() -> None:
        raise OSError("refused")

    task = tasks.start("index", body)
    await asyncio.sleep(0.05)
    assert not tasks.running()
    await cancel([task])
    assert tasks.running()


async def test_a_task_that_ends_while_it_should_run_is_restarted_and_one_that_stops_is_not() -> None:
    registry = CollectorRegistry()
    tasks = Supervisor(registry, first_backoff=0.001)
    stop = asyncio.Event()
    runs = 0

    async def body() -> None:
        nonlocal runs
        runs += 1
        if runs == 3:
            stop.set()

    await asyncio.wait_for(tasks.run("probe", body, stop.is_set), timeout=2)
    assert runs == 3
    assert restarts(registry, "probe") == 2  # the runs that ended before the stop


async def test_a_stop_flag_set_during_a_backoff_ends_it_at_once() -> None:
    tasks = Supervisor(first_backoff=30.0, max_backoff=30.0)
    stop = asyncio.Event()
    runs = Runs()

    async def body() -> None:
        runs.ran()
        raise ConnectionResetError("peer reset")

    task = asyncio.create_task(tasks.run("probe", body, stop.is_set))
    await runs.reach(1)
    await asyncio.sleep(0.05)
    assert not tasks.running()  # in its 30 s backoff
    began = asyncio.get_running_loop().time()
    stop.set()  # the flag alone, as SIGTERM sets it: no cancellation
    await asyncio.wait_for(task, 2)
    assert asyncio.get_running_loop().time() - began < 0.5
    assert runs.count == 1 and tasks.running()


async def test_cancel_never_raises_even_for_a_task_that_failed() -> None:
    async def failed() -> None:
        raise RuntimeError("dead")

    task = asyncio.get_running_loop().create_task(failed())
    await asyncio.sleep(0)
    await cancel([task, None])
    assert task.done()
