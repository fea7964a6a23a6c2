"""The plans ahead give way to kube-scheduler's requests, and only to them: a pass is followed by the answers of the
requests that came during it, and by no pause when none is in flight (a pause as long as the pass took halved
the plans' pace in a burst)."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import build_snapshot
from operators.extender import server
from operators.extender.ahead import PlansAhead
from operators.extender.answering import GLANCE_SECONDS, Answering
from operators.extender.answers import ExtenderState
from tests.support.planning import CONFIG, node, pod

PASS_SECONDS = 0.03  # what each fake pass takes, holding the loop as a plan does


def state_of_one_node() -> ExtenderState:
    snapshot = build_snapshot([node("n1", "za")])
    return ExtenderState(lambda: snapshot, CONFIG)


def passes_of(ahead: PlansAhead, log: list[str], count: int) -> asyncio.Event:
    """``ahead`` given ``count`` AppGroups due at once, its passes faked: each takes one AppGroup, holds the loop
    :data:`PASS_SECONDS` and is logged; set once the last has run."""
    finished = asyncio.Event()
    due = [Pod.parse(pod(f"b-{number}", "b", group=f"g{number}")) for number in range(count)]
    ahead.due = lambda: (due.copy() if not log else [], None)  # type: ignore[method-assign]

    def fake_pass(pods: list[Pod], until: float = math.inf) -> tuple[int, int]:
        log.append("pass")
        time.sleep(PASS_SECONDS)
        if log.count("pass") == count:
            finished.set()
        return 1, 1

    ahead.plan_pass = fake_pass  # type: ignore[method-assign]
    return finished


async def run_until(ahead: PlansAhead, finished: asyncio.Event) -> None:
    """Run ``ahead`` until its last pass has run and the loop has glanced at the sockets after it."""
    stop = asyncio.Event()
    task = asyncio.create_task(ahead.run(stop))
    try:
        await asyncio.wait_for(finished.wait(), 5)
    finally:
        stop.set()
        ahead.wake.set()
        await asyncio.wait_for(task, 5)


async def test_a_request_that_came_during_a_pass_is_answered_before_the_next_pass() -> None:
    # The request arrives while the first pass holds the loop (its task starts once the pass ends) and takes
    # 60 ms to answer (awaiting, as a handler reading its body does). The second pass waits for it. (A pause as
    # long as the pass took, 30 ms, ran the second pass first.)
    state = state_of_one_node()
    ahead = PlansAhead(state)
    log: list[str] = []
    finished = passes_of(ahead, log, 2)
    asking: list[asyncio.Task[None]] = []

    async def request() -> None:
        with state.answering.request():
            await asyncio.sleep(0.06)
            log.append("answered")

    planned = ahead.plan_pass

    def arriving_during_the_first(pods: list[Pod], until: float = math.inf) -> tuple[int, int]:
        if not asking:
            asking.append(asyncio.get_running_loop().create_task(request()))
        return planned(pods, until)

    ahead.plan_pass = arriving_during_the_first  # type: ignore[method-assign]
    await run_until(ahead, finished)
    await asyncio.gather(*asking)
    assert log == ["pass", "answered", "pass"]


async def test_with_no_request_in_flight_the_next_pass_waits_only_a_glance_at_the_sockets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Three passes of 30 ms and no request: the loop sleeps only the glance between them (before, it slept as
    # long as each pass took).
    state = state_of_one_node()
    ahead = PlansAhead(state)
    log: list[str] = []
    finished = passes_of(ahead, log, 3)
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def recorded(delay: float, result: Any = None) -> Any:
        slept.append(delay)
        return await real_sleep(delay, result)

    monkeypatch.setattr(asyncio, "sleep", recorded)
    await run_until(ahead, finished)
    assert log == ["pass"] * 3
    assert len(slept) >= 2 and slept == [GLANCE_SECONDS] * len(slept), slept


async def test_a_request_that_stays_in_flight_holds_the_plans_for_the_limit_only() -> None:
    answers = Answering()
    with answers.request():  # a handler waiting on the cluster's API, say
        started = time.monotonic()
        await answers.served(0.05)
        assert answers.in_flight == 1 and time.monotonic() - started >= 0.05
    await asyncio.wait_for(answers.served(60), 5)  # none in flight: at once


async def test_the_extenders_requests_are_counted_in_flight_while_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    state = state_of_one_node()
    seen: list[int] = []
    real_handler = server.filter_handler

    async def observed(request: web.Request) -> web.Response:
        seen.append(state.answering.in_flight)
        return await real_handler(request)

    monkeypatch.setattr(server, "filter_handler", observed)
    async with TestClient(TestServer(server.build_app(state))) as client:
        response = await client.post("/filter", json={"Pod": pod("x-0", "x"), "NodeNames": ["n1"], "Nodes": None})
        assert response.status == 200, await response.text()
    assert seen == [1] and state.answering.in_flight == 0
