"""The extender's plans-ahead loop under its supervisor, with a failure injected: a pass that raises is logged,
counted in ``netaware_task_restarts_total{task="extender-plans-ahead"}`` and the loop restarted; the AppGroup of
that pass is planned when kube-scheduler asks about its pods (as without plans ahead), and the AppGroups that come
due later are planned ahead again. Cluster of :func:`tests.extender.test_plans.twin_state`: n1 (a-0 and c-0 bound,
room for one pod more) and n2 in zone za, n3 in zb; pair's b-0 and twin's d-0 pending."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from operators.engine.cluster.objects import Pod
from operators.extender.ahead import PlansAhead
from operators.sources.kinds import PODS
from operators.sources.store import Change
from operators.supervision import Supervisor
from tests.extender.test_plans import filter_of, nominations_of, twin_state
from tests.support.planning import pod


async def until(check: Callable[[], bool], what: str) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not within 5 s: {what}")


async def test_a_pass_that_raises_is_restarted_and_later_appgroups_are_planned_ahead_again() -> None:
    state = twin_state(n1_pods="3")
    written = nominations_of(state, from_nodes=3)
    now = [0.0]
    ahead = PlansAhead(state, clock=lambda: now[0])
    passes: list[list[str]] = []
    real = ahead.plan_pass

    def failing_first(pods: list[Pod], until: float = math.inf) -> tuple[int, int]:
        passes.append([pod.name for pod in pods])
        if len(passes) == 1:
            raise RuntimeError("injected")
        return real(pods, until)

    ahead.plan_pass = failing_first  # type: ignore[method-assign]
    registry = CollectorRegistry()
    tasks = Supervisor(registry, first_backoff=0.01)
    stop = asyncio.Event()
    loop = tasks.start("extender-plans-ahead", lambda: ahead.run(stop), stop.is_set)
    try:
        ahead.on_changes([Change(PODS.name, None, Pod.parse(pod("b-0", "b")))])
        now[0] = 1.0  # due: 0.1 s after its last pod
        ahead.wake.set()
        await until(lambda: passes == [["b-0"]], "the first pass, which raises")
        restarted = {"task": "extender-plans-ahead"}
        await until(lambda: registry.get_sample_value("netaware_task_restarts_total", restarted) == 1, "a restart")
        assert written == [] and state.follower.planned == {}  # pair's pass lost: nothing nominated
        # kube-scheduler asks about b-0: planned then, beside a-0 on n1 (cost 0), as without plans ahead
        assert filter_of(state, pod("b-0", "b"))["NodeNames"] == ["n1"]
        # twin, due after the restart, is planned ahead and nominated: d-0 to n2, n1 being full with b-0 answered
        ahead.on_changes([Change(PODS.name, None, Pod.parse(pod("d-0", "d", group="twin")))])
        now[0] = 2.0
        ahead.wake.set()
        await until(lambda: written == [("default/d-0", "n2")], "twin planned ahead after the restart")
        assert passes == [["b-0"], ["d-0"]]
    finally:
        stop.set()
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
