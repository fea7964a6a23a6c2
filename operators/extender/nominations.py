"""The planned node of a plan-ungated pod written where kube-scheduler reads it first: ``status.nominatedNodeName``.

A plan-ungated pod is not gated, so kube-scheduler runs its filters on every node for it
(``percentageOfNodesToScore: 100``: the planned node must be among its candidates) and sends the extender all that
pass. On 5,000 nodes that cost 47-77 ms of kube-scheduler's CPU and 28-46 ms of the extender's per pod. A pod
with a nominated node is tried on that node first, alone, and the extender asked about it alone; only when the
node no longer passes does kube-scheduler look at the others (upstream's ``evaluateNominatedNode``, kept for the
pods preemption nominates). kube-scheduler also counts a nominated pod on its node when it filters the node for
other pods of equal or lower priority, so the plan's room is held against every scheduler's pods, not only the
extender's plans.

So when a plan places pods that kube-scheduler has not asked about yet, each is nominated to its planned node: one
status patch per pod, carrying the pod's uid (a pod deleted and created again under its name is not touched).
The patch is a courtesy: refused or failed, the pod is still answered from the plan when kube-scheduler asks,
after its full scan. Patches go out at most :data:`IN_FLIGHT` at a time, behind the answer, never awaited by it;
at most :data:`QUEUED` wait (beyond that a plan's pods are not nominated: their answers are the plan's anyway).

Only on clusters of at least ``--nominate-from-nodes`` nodes: below it, a full scan costs kube-scheduler less than
the patch and its watch events cost the API server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client import CollectorRegistry, Counter

from operators.engine.cluster.objects import Pod
from operators.kube import API_ERRORS, MERGE_PATCH, describe, send_json

logger = logging.getLogger("netaware.extender")

IN_FLIGHT = 32  # with 8, a burst's patches fell behind kube-scheduler; with 96, its binds slowed (1.0 to 2.5 s)
WRITTEN, BOUND, REFUSED, SKIPPED = "written", "bound", "refused", "skipped"
QUEUED = 10_000


def nomination(pod: Pod, node: str) -> dict[str, object]:
    """The merge patch nominating ``pod`` to ``node`` (its uid a precondition)."""
    return {"metadata": {"uid": pod.uid}, "status": {"nominatedNodeName": node}}


class PodNominator:
    """Writes ``status.nominatedNodeName`` of planned pods in the background (see the module docstring)."""

    def __init__(self, api: client.ApiClient, registry: CollectorRegistry | None = None) -> None:
        self.api = api
        self._slots = asyncio.Semaphore(IN_FLIGHT)
        self._tasks: set[asyncio.Task[None]] = set()
        self.written = Counter(
            "netaware_extender_nominations_total",
            "Planned pods of plan-ungated AppGroups nominated to their planned node (status.nominatedNodeName), by "
            "result: written; bound (kube-scheduler bound the pod before the patch arrived); refused (any other "
            "answer, or the connection); skipped (too many patches waiting).",
            ["result"],
            registry=registry,
        )

    def nominate(self, planned: Iterable[tuple[Pod, str]]) -> None:
        for pod, node in planned:
            if len(self._tasks) >= QUEUED:
                self.written.labels(SKIPPED).inc()
                continue
            task = asyncio.create_task(self._write(pod, node))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _write(self, pod: Pod, node: str) -> None:
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status"
        async with self._slots:
            try:
                await send_json(self.api, "PATCH", path, nomination(pod, node), MERGE_PATCH)
            except ApiException as error:
                # 422: bound meanwhile (the API server refuses a nomination on a bound pod), the usual case
                result = BOUND if error.status == 422 else REFUSED
                self.written.labels(result).inc()
                log = logger.debug if result == BOUND else logger.info
                log("pod %s: not nominated to its planned node %s: %s", pod.key, node, describe(error))
                return
            except API_ERRORS as error:
                self.written.labels(REFUSED).inc()
                logger.info("pod %s: not nominated to its planned node %s: %s", pod.key, node, describe(error))
                return
        self.written.labels(WRITTEN).inc()

    async def close(self) -> None:
        """Cancel the patches not written yet (the extender is stopping)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
