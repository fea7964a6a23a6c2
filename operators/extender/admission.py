"""Plan-ungated pods placed when they are created: the extender's placement webhook.

A nomination written after a pod's creation races kube-scheduler's queue through the API server: in a 5,000-node
burst, half the pods were taken before their nomination reached kube-scheduler, and each was filtered on every
node. A pod placed at admission carries its node from its first version: the webhook plans it with its AppGroup's
pods placed before it, and answers with a required node affinity for the planned node (``matchFields metadata.name
In [node]``), the ``netaware.io/planned-node`` annotation and a token (``netaware.io/placed-at-admission``).
kube-scheduler narrows such a pod to that node before any filter runs (NodeAffinity's PreFilter), so it costs one
node's filters, and its filters are still the judge: a pod whose node no longer fits stays pending with
kube-scheduler's own message.

A pod has no name while admitted (``generateName``), so until the cache holds it the extender keeps it, on its node,
by its token (:class:`AdmittedPods`), counted in the kept index's usage as a pod of the cache is; then the cluster's
usage counts it on its node until it is bound or gone (:func:`~operators.engine.cluster.usage.counted_as`), as every
index does. A pod the plan places nowhere, or admitted before the cache is synced, is admitted unchanged: it is
planned when kube-scheduler asks, as without this.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from aiohttp import web

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.api.errors import FieldError
from operators.engine.admission.review import review_response
from operators.engine.cluster.objects import Pod
from operators.engine.planning.release import gathering_due, pin_operations
from operators.sources.kinds import PODS
from operators.sources.store import Change

logger = logging.getLogger("netaware.extender")

# The pods of one AppGroup being admitted are gathered and planned together: its gathering closes once none of its
# pods arrived for QUIET_SECONDS, and at the latest GATHER_SECONDS after its first (the API server holds each
# creation meanwhile). In a 5,000-node burst an AppGroup's pods reached the webhook over 100-200 ms (each after
# netaware's main webhook): a fixed 10 ms window split each AppGroup into three plans, 776 for 250 AppGroups; this
# made 572-674, with lower costs per edge. (Under load the pieces still come more than 30 ms apart; a 100 ms quiet
# time made 499 plans with no clear gain in pace, and each creation waits that long.)
QUIET_SECONDS = 0.03
GATHER_SECONDS = 0.25
UNSEEN_SECONDS = 30.0  # an admitted pod the cache never shows (refused by a later webhook, its create failed)
MAX_REVIEW = 3 * 1024 * 1024  # an AdmissionReview of one pod


class AdmittedPods:
    """The pods placed at admission that the cache does not hold yet (see the module docstring), each counted on its
    node by ``count`` (the kept index's :meth:`~operators.sources.live_index.LiveIndex.count`) from its placement
    until the cache shows it; then the usage counts it on its node until it is bound
    (:func:`~operators.engine.cluster.usage.counted_as`)."""

    def __init__(self, count: Callable[[Pod | None, Pod | None], None], clock: Callable[[], float] = time.time) -> None:
        self.count = count
        self.clock = clock
        self.unseen: dict[str, tuple[Pod, float]] = {}  # token -> (the pod on its node, when admitted)

    def admitted(self, token: str, pod: Pod) -> None:
        self.expire()
        self.forget(token)  # a token is new for each review; were one given twice, its first copy goes
        # held under a name no pod can have ('@'): a pod created with its name comes into the cache under it, and
        # the usage keeps its members by name; sharing it, the cache's version would replace the held copy and be
        # removed with it (in a burst of named pods, later plans no longer saw the earlier ones: 1 % of the pairs
        # went above maxNetworkCost)
        held = replace(pod, name=f"{pod.name}@{token}")
        self.unseen[token] = (held, self.clock())
        self.count(None, held)

    def on_changes(self, changes: Iterable[Change]) -> None:
        if not self.unseen:  # the common case once the cache shows them: nothing to look for
            return
        self.expire()  # a pod never created (refused after this webhook) is not counted past its time
        for change in changes:
            if change.kind != PODS.name:
                continue
            pod = change.new if change.new is not None else change.old
            token = pod.annotations.get(keys.PLACED_AT_ADMISSION) if isinstance(pod, Pod) else None
            if token:
                self.forget(token)

    def held(self, token: str) -> Pod | None:
        """The pod admitted with ``token`` as it is counted, while the cache does not show it."""
        entry = self.unseen.get(token)
        return entry[0] if entry is not None else None

    def expire(self) -> None:
        """Forget the pods admitted too long ago that the cache never showed (:data:`UNSEEN_SECONDS`)."""
        now = self.clock()
        for token in [token for token, (_, at) in self.unseen.items() if now - at >= UNSEEN_SECONDS]:
            self.forget(token)

    def forget(self, token: str) -> None:
        """The pod admitted with ``token`` no longer counted: the cache shows it, its time passed, or its admission
        gave up on the answer (it is created without this placement)."""
        entry = self.unseen.pop(token, None)
        if entry is not None:
            self.count(entry[0], None)


@dataclass
class Gathering:
    """The pods of one AppGroup being admitted, not planned yet."""

    group: AppGroup  # as the last pod found it
    first: float  # when its first pod arrived (the loop's clock)
    last: float
    entries: list[tuple[Pod, str, asyncio.Future[str | None]]] = field(default_factory=list)


class Placer:
    """Gathers the pods of each AppGroup as they are admitted and places them with one plan (see
    :data:`QUIET_SECONDS`): a ReplicaSet or a burst of ``kubectl apply`` creates an application's pods together, and
    one plan of them all places each where the others go (planned one by one, each would be planned on its own, at
    a whole plan's cost). ``place``: the pods of one AppGroup, and the AppGroup, to the nodes planned for them (pod
    key -> node); each placed pod is held in ``admitted`` at once, so that the next plan counts it."""

    def __init__(
        self,
        place: Callable[[list[Pod], AppGroup], dict[str, str]],
        admitted: AdmittedPods,
        quiet: float = QUIET_SECONDS,
        most: float = GATHER_SECONDS,
    ) -> None:
        self.place = place
        self.admitted = admitted
        self.quiet, self.most = quiet, most
        self._gathered: dict[tuple[str, str], Gathering] = {}  # AppGroup (namespace, name) -> its gathering

    async def node_of(self, pod: Pod, group: AppGroup, token: str) -> str | None:
        """The node planned for ``pod`` of ``group`` (admitted with ``token``); None when the plan places it
        nowhere."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str | None] = loop.create_future()
        key = (group.metadata.namespace or "", group.metadata.name)
        gathering = self._gathered.get(key)
        if gathering is None:
            now = loop.time()
            gathering = self._gathered[key] = Gathering(group, now, now)
            loop.call_at(gathering_due(now, now, self.quiet, self.most), self._due, key)
        gathering.group, gathering.last = group, loop.time()
        gathering.entries.append((pod, token, future))
        return await future

    def _due(self, key: tuple[str, str]) -> None:
        """Plan the gathering of ``key`` if it is quiet or has waited its most; else look again when it may be."""
        gathering = self._gathered.get(key)
        if gathering is None:
            return
        loop = asyncio.get_running_loop()
        at = gathering_due(gathering.first, gathering.last, self.quiet, self.most)
        if loop.time() < at:
            loop.call_at(at, self._due, key)
            return
        del self._gathered[key]
        try:
            places = self.place([pod for pod, _, _ in gathering.entries], gathering.group)
        except Exception as error:  # the pods are admitted unplaced (as any pod), the error logged
            logger.exception("pods placed at admission: the plan failed: %s", error)
            places = {}
        for pod, token, future in gathering.entries:
            node = places.get(pod.key)
            if future.cancelled():  # its caller gave up waiting (the handler cancelled): created without this place
                continue
            if node is not None:
                self.admitted.admitted(token, pod.on_node(node))
            if not future.done():
                future.set_result(node)


def admission_pod(body: bytes) -> tuple[str, Pod, str]:
    """The uid of the AdmissionReview in ``body``, its pod (named by a new token when it has no name yet), and the
    token; a :class:`FieldError` naming what is wrong."""
    if len(body) > MAX_REVIEW:
        raise FieldError("request", f"{len(body)} bytes", f"an AdmissionReview of one pod is at most {MAX_REVIEW}")
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise FieldError("request", None, f"not JSON: {error}") from None
    if not isinstance(review, dict) or not isinstance(review.get("request"), dict):
        raise FieldError("request", None, "expected an AdmissionReview request")
    request = review["request"]
    uid, raw = request.get("uid"), request.get("object")
    if not isinstance(uid, str) or not isinstance(raw, dict):
        raise FieldError("request.object", None, "expected a uid and a Pod object")
    token = uuid.uuid4().hex
    meta = dict(raw.get("metadata") or {})
    if not meta.get("name"):
        meta["name"] = f"{meta.get('generateName') or 'pod-'}{token[:12]}"
    meta.setdefault("namespace", request.get("namespace") or "")
    return uid, Pod.parse({**raw, "metadata": meta}), token


def placement_patch(pod: Pod, node: str, token: str) -> list[dict[str, Any]]:
    """The pod's node affinity for ``node``, its planned-node annotation and its admission token."""
    return pin_operations(pod, node, annotations={keys.PLACED_AT_ADMISSION: token})


def review_answer(uid: str, patch: list[dict[str, Any]] | None) -> web.Response:
    """The review allowed, with ``patch`` when there is one."""
    return web.Response(body=orjson.dumps(review_response(uid, True, patch)), content_type="application/json")
