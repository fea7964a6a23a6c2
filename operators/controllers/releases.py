"""The releases of the topology-order gate, as the gate keeper sends them, and what is known of each until its watch
event comes back.

* A release is one JSON patch per pod: a ``test`` of ``spec.schedulingGates`` as last seen, then the list without
  our gate (and, from a plan, the planned node: :func:`~operators.engine.planning.release.release_patch`).
* **In flight**: from the moment it is sent until the pod is seen released (or gone), a release is never sent
  again, and every plan counts the pod as the release leaves it (:func:`as_released`: on its planned node), so
  that a plan made before the watch event arrives does not give its room away — whichever AppGroup plans.
* A refusal (409, 422: the pod changed meanwhile) forgets the release; the pod is evaluated again from its next
  version. Another API error forgets it and the AppGroup is looked at again after :data:`RETRY_SECONDS`.
* A broken connection or a timeout leaves it unknown whether the release landed: it stays in flight and is sent
  again, the same, after :data:`RETRY_SECONDS` (a 422 then means the first attempt did land). A release not seen
  back within :data:`IN_FLIGHT_SECONDS` of its answer is no longer counted, and its pod is evaluated afresh; one
  not answered yet (waiting for a writer, or for the API server) never expires: its write ends in an answer or a
  failure, which forgets it. Counted from the plan instead, releases queued behind a burst's writes expired
  before their watch events came back, and their nodes were planned twice.
* Metrics: ``netaware_gate_wait_seconds{reason}`` (creation to release) and ``netaware_planned_pods_total``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client import Counter, Histogram

from operators.api import keys
from operators.controllers.metrics import REGISTRY
from operators.engine.cluster.objects import Pod
from operators.engine.planning.release import REQUIRED, as_released, release_patch
from operators.engine.status.gates import TIMEOUT, Release
from operators.kube import TRANSPORT_ERRORS, describe, post_event, send_json
from operators.logs import about

logger = logging.getLogger("netaware.gates")

JSON_PATCH = "application/json-patch+json"
RETRY_SECONDS = 2.0
IN_FLIGHT_SECONDS = 30.0
COMPONENT = "netaware"

WAIT = Histogram(
    "netaware_gate_wait_seconds",
    "Seconds from a gated pod's creation to the removal of its topology-order gate, by why it was released.",
    ["reason"],
    registry=REGISTRY,
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
PLANNED_PODS = Counter(
    "netaware_planned_pods_total",
    "Pods of plans: released to their planned node (placed), released without a place (unplaceable), evicted "
    "when their planned node could no longer take them (abandoned).",
    ["result"],
    registry=REGISTRY,
)
for _result in ("placed", "unplaceable", "abandoned"):  # every series there from the start (rate() sees 0)
    PLANNED_PODS.labels(_result)

PodKey = tuple[str, str]  # (namespace, name)


@dataclasses.dataclass(frozen=True)
class Placed(Release):
    """A release of the plan mode: a :class:`Release` that also carries the planned node (None: no place, and
    ``unplaced`` says why)."""

    node: str | None = None
    unplaced: str = ""


def _key(pod: Pod) -> PodKey:
    return (pod.namespace, pod.name)


class Releases:
    """See the module docstring. ``retry(pod)``: look at the pod's AppGroup again after :data:`RETRY_SECONDS`."""

    def __init__(self, clock: Callable[[], float], retry: Callable[[Pod], None], affinity: str = REQUIRED) -> None:
        self.clock = clock
        self.retry = retry
        self.affinity = affinity
        # the pod as released, and when its release was answered (None: not yet)
        self.in_flight: dict[PodKey, tuple[Pod, float | None]] = {}
        self.unsure: dict[PodKey, tuple[Release, float]] = {}  # releases whose answer was lost -> when to resend
        self.resent: set[PodKey] = set()  # ... being sent again

    def seen(self, key: PodKey) -> None:
        """The pod is no longer gated (released, by us or anyone) or gone."""
        self.in_flight.pop(key, None)
        self.unsure.pop(key, None)

    def sending(self, pod: Pod) -> bool:
        return _key(pod) in self.in_flight

    def as_sent(self, pod: Pod) -> Pod:
        """``pod`` as the release in flight leaves it (itself when none is)."""
        held = self.in_flight.get(_key(pod))
        return held[0] if held is not None else pod

    def due_again(self, now: float) -> list[Release]:
        """The releases whose answer was lost and whose time to be sent again has come."""
        due = [item for item, when in self.unsure.values() if when <= now]
        for item in due:
            del self.unsure[_key(item.pod)]
        return due

    def expire(self, now: float) -> list[Pod]:
        """Forget the releases answered :data:`IN_FLIGHT_SECONDS` ago or more and not seen back; their pods."""
        expired = [
            pod
            for key, (pod, answered) in self.in_flight.items()
            if answered is not None and now - answered >= IN_FLIGHT_SECONDS and key not in self.unsure
        ]
        for pod in expired:
            del self.in_flight[_key(pod)]
        return expired

    def forget_unanswered(self) -> None:
        """Forget the releases not answered yet (their writes ended with the loop that started them, some before
        they ran): their pods are evaluated afresh; one that did land is seen released by its watch event."""
        self.in_flight = {key: held for key, held in self.in_flight.items() if held[1] is not None}
        self.unsure.clear()
        self.resent.clear()

    def start(self, items: list[Release], now: float) -> None:
        """``items`` are in flight from now on (before they are sent: a plan made meanwhile counts them); a release
        sent again keeps the time of its first answer."""
        for item in items:
            node = item.node if isinstance(item, Placed) else None
            held = self.in_flight.get(_key(item.pod))
            self.in_flight[_key(item.pod)] = (as_released(item.pod, node, self.affinity), held[1] if held else None)

    async def send(self, api: Any, writing: asyncio.Semaphore, item: Release) -> None:
        r"""Send one release (:meth:`start`\ ed); see the module docstring for what its failures do."""
        pod = item.pod
        key = _key(pod)
        node = item.node if isinstance(item, Placed) else None
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        try:
            async with writing:  # cancelled while waiting for a writer: forgotten below, as any other failure
                written = await send_json(api, "PATCH", path, release_patch(pod, node, self.affinity), JSON_PATCH)
        except ApiException as error:
            if error.status in (409, 422):  # changed meanwhile (or released by an earlier attempt): next version
                logger.info("pod %s: gate not removed (%s); looked at again on its next change", pod.key,
                            error.status)  # fmt: skip
                if key not in self.resent:
                    self.in_flight.pop(key, None)
                elif key in self.in_flight:  # an earlier attempt landed: counted from now on, as answered
                    self.in_flight[key] = (self.in_flight[key][0], self.clock())
            else:
                self.in_flight.pop(key, None)
                logger.warning("pod %s: gate not removed (%s); retrying", pod.key, describe(error),
                               extra=about("Pod", pod.namespace, pod.name))  # fmt: skip
                self.retry(pod)
            self.resent.discard(key)
            return
        except TRANSPORT_ERRORS as error:
            logger.warning("pod %s: release not confirmed (%s); sending it again", pod.key, describe(error),
                           extra=about("Pod", pod.namespace, pod.name))  # fmt: skip
            self.unsure[key] = (item, self.clock() + RETRY_SECONDS)
            self.resent.add(key)
            self.retry(pod)
            return
        except BaseException:
            self.in_flight.pop(key, None)
            self.resent.discard(key)
            self.retry(pod)
            raise
        self.resent.discard(key)
        if written is None:
            return  # the pod is gone
        if key in self.in_flight:  # not seen back yet: counted from this answer on
            self.in_flight[key] = (self.in_flight[key][0], self.clock())
        WAIT.labels(item.reason).observe(item.waited)
        if isinstance(item, Placed):
            PLANNED_PODS.labels("placed" if item.node else "unplaceable").inc()
        where = ""
        if isinstance(item, Placed):
            where = f" to {item.node}" if item.node else f": {item.unplaced}" if item.unplaced else ""
        logger.info("pod %s released (%s)%s after %.1f s", pod.key, item.reason, where, item.waited)
        if item.reason == TIMEOUT:
            involved = {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "namespace": pod.namespace, "uid": pod.uid}
            message = (
                f"scheduling gate {keys.TOPOLOGY_ORDER_GATE} removed after {item.waited:.0f} s: the ordered-scheduling "
                f"timeout of AppGroup {pod.labels.get(keys.APPGROUP_LABEL)} passed before the workloads it depends on "
                "were placed"
            )
            await post_event(api, involved, "Normal", "TopologyOrderTimeout", message, COMPONENT)
