"""What the gate keeper says of the plans it makes: a Planned Event per AppGroup (coalesced), a NotPlanned Warning
for pods a plan could not place, and the ``netaware_plan_cost`` gauges (their series removed with the AppGroup); the
eviction of a pod its plan stranded, and the Warning of an unreadable timeout annotation."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client import Gauge

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.controllers.metrics import REGISTRY
from operators.controllers.releases import PLANNED_PODS
from operators.engine.cluster.objects import Pod
from operators.engine.planning.plan import Plan
from operators.engine.planning.release import UNPLACEABLE
from operators.kube import API_ERRORS, describe, post_event, send_json
from operators.logs import about

logger = logging.getLogger("netaware.gates")

COMPONENT = "netaware"
# at most one Planned Event per AppGroup this often (a plan per arriving pod while an apply is admitted would
# otherwise be an API write per pod): the plans between are counted in the next one, and logged each
PLANNED_EVENT_SECONDS = 5.0

PLAN_COST = Gauge(
    "netaware_plan_cost",
    "The latest plan's network cost over the AppGroup's dependency pod pairs: the plan's, and its greedy start's.",
    ["namespace", "appgroup", "kind"],
    registry=REGISTRY,
)
PLAN_COST_KINDS = ("plan", "greedy")


class PlanAnnouncer:
    """The Events and gauges of the plans made, per AppGroup."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.announced: dict[tuple[str, str], tuple[float, int, int]] = {}  # AppGroup -> last Event, plans, pods since

    def forget(self, key: tuple[str, str]) -> None:
        """An AppGroup deleted: what was kept for it goes, its metric series too."""
        self.announced.pop(key, None)
        for kind in PLAN_COST_KINDS:
            with contextlib.suppress(KeyError):
                PLAN_COST.remove(*key, kind)

    @staticmethod
    def log(group: AppGroup, plan: Plan, since_last: float | None = None) -> None:
        """The plan's line in the log, written when it is made: before the releases it sends, so that a reader
        (or a test) who sees a planned pod bound finds the plan already logged. The Event waits for the releases.
        ``since_last``: seconds since the controller saw the last of the pods planned (the settle time and any
        backlog: what a pod waited here before its plan)."""
        lag = f" ({since_last:.2f} s after its last pod was seen)" if since_last is not None else ""
        logger.info("AppGroup %s/%s: %s%s", group.metadata.namespace, group.metadata.name, plan_message(plan), lag)

    async def announce_all(self, api: Any, writing: asyncio.Semaphore, made: list[tuple[AppGroup, Plan]]) -> None:
        """:meth:`announce` each plan made, at once (as many as ``writing`` lets through). One after the other at the
        API server's latency under a burst (about 1 s), a pass of 30 plans took half a minute to post its Events, and
        the next passes, which wait for the writes of the ones before them, planned nothing meanwhile: gaps of 10-15
        s without a plan in a 5,000-node burst."""

        async def one(group: AppGroup, plan: Plan) -> None:
            async with writing:
                await self.announce(api, group, plan)

        await asyncio.gather(*(one(group, plan) for group, plan in made))

    async def announce(self, api: Any, group: AppGroup, plan: Plan) -> None:
        """A Normal Event on the AppGroup for a plan made (pods, cost against its greedy start, time), a Warning
        for the pods it could not place, and the cost gauges."""
        meta = group.metadata
        PLAN_COST.labels(meta.namespace, meta.name, "plan").set(plan.cost.cost)
        PLAN_COST.labels(meta.namespace, meta.name, "greedy").set(plan.greedy.cost)
        involved = involved_appgroup(group)
        message = plan_message(plan)
        key = (meta.namespace, meta.name)
        last, plans, pods = self.announced.get(key, (float("-inf"), 0, 0))
        now = self.clock()
        if now - last < PLANNED_EVENT_SECONDS:
            self.announced[key] = (last, plans + 1, pods + len(plan.pods))
        else:
            self.announced[key] = (now, 0, 0)
            if plans:
                message += f"; {plans} more plan(s) of {pods} pod(s) since the last Planned Event"
            await post_event(api, involved, "Normal", "Planned", message[:1000], COMPONENT)
        if plan.unplaceable:
            why = "; ".join(f"{pod}: {reason}" for pod, reason in sorted(plan.unplaceable.items())[:5])
            text = f"{len(plan.unplaceable)} pod(s) released without a place ({UNPLACEABLE}): {why}"
            await post_event(api, involved, "Warning", "NotPlanned", text[:1000], COMPONENT)


def plan_message(plan: Plan) -> str:
    """What a plan made: its pods, time, network cost against its greedy start, pairs above the limit."""
    return (
        f"{len(plan.pods)} pod(s) planned in {plan.seconds * 1000:.0f} ms: network cost {plan.cost.cost} over the "
        f"dependency pod pairs (greedy start {plan.greedy.cost}), {plan.cost.over_limit} pair(s) above "
        f"maxNetworkCost, mean per edge {plan.mean_edge_cost():.2f}"
        + (f", spread penalty {plan.cost.spread_penalty}" if plan.cost.spread_penalty else "")
    )


def involved_appgroup(group: AppGroup) -> dict[str, Any]:
    """An AppGroup as the object of an Event."""
    meta = group.metadata
    return {
        "apiVersion": f"{keys.APPGROUP_GROUP}/{keys.V1ALPHA1}",
        "kind": "AppGroup",
        "name": meta.name,
        "namespace": meta.namespace,
        "uid": meta.uid,
    }


async def evict_stranded(api: Any, group: AppGroup, pod: Pod, why: str) -> bool | None:
    """A pod stranded by its plan: evicted (the Eviction API: its PodDisruptionBudget applies) so that its owner's
    replacement is planned again; a Warning Event on the AppGroup says which and why. True: evicted; None: gone
    already; False: not evicted (to be tried again)."""
    meta = {"name": pod.name, "namespace": pod.namespace}
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": meta}
    try:
        await send_json(api, "POST", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/eviction", body)
    except API_ERRORS as error:
        # a lost answer may hide an eviction that happened: the pod is terminating then, and not stranded again
        if isinstance(error, ApiException) and error.status == 404:
            return None
        logger.warning("pod %s: stranded, not evicted (%s); retrying", pod.key, describe(error),
                       extra=about("Pod", pod.namespace, pod.name))  # fmt: skip
        return False
    PLANNED_PODS.labels("abandoned").inc()
    message = f"plan abandoned for pod {pod.key}: {why}; evicted, its replacement is planned again"
    logger.info("AppGroup %s/%s: %s", group.metadata.namespace, group.metadata.name, message)
    await post_event(api, involved_appgroup(group), "Warning", "PlanAbandoned", message[:1000], COMPONENT)
    return True


async def warn_timeout(api: Any, group: AppGroup, problem: str) -> None:
    """An AppGroup's timeout annotation that cannot be read: a Warning Event (once per new problem: the caller's)."""
    logger.warning("AppGroup %s/%s: %s", group.metadata.namespace, group.metadata.name, problem,
                   extra=about("AppGroup", group.metadata.namespace, group.metadata.name))  # fmt: skip
    await post_event(api, involved_appgroup(group), "Warning", "InvalidOrderedSchedulingTimeout", problem, COMPONENT)
