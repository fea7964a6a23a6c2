"""The extender's placement asked from this webhook: a plan-ungated pod placed in one webhook call, not three.

The extender places a plan-ungated AppGroup's pods as they are created (``netaware extender
--place-at-admission``, ``POST /place-pods``). Registered as a webhook of its own, that placement costs the API
server two calls more per pod: the extender's, and this webhook's again, since the extender changes the pod after
it and this webhook's entries ask to be called again then (``reinvocationPolicy: IfNeeded``). In a 5,000-node burst
each call is an AdmissionReview encoded, sent over TLS and its answer applied, about 1.5 ms of the API server's CPU.
With ``--placement-url`` this webhook asks the extender itself, on a kept connection, with the pod as its own patch
leaves it (the placement counts the bandwidth the namespace's defaults give it), and answers with both patches.

The extender's answer is checked before it is passed on: an allowed review of the same uid whose JSON patch applies
to the pod. Anything else (the extender unreachable, slower than ``--placement-timeout``, an answer that is not
one) admits the pod with this webhook's patch alone, counted and logged: kube-scheduler then sends it to the
extender as any plan-ungated pod, which plans it then. A pod that already carries a placement token is not placed
again (a reinvocation after another webhook).
"""

from __future__ import annotations

import base64
import binascii
import logging
import ssl
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import jsonpatch
import orjson

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.engine.cluster.appgroups import plans_ungated

logger = logging.getLogger("netaware.webhook")

MAX_ANSWER = 256 * 1024  # the placement's answer: a node affinity and three annotations
CONNECTIONS = 64  # kept connections to the extender (the API server holds each creation while it is placed)
LOG_EVERY_SECONDS = 60.0
PLACED_PATHS = ("/metadata/", "/spec/")


@dataclass(frozen=True)
class ToPlace:
    """A pod this webhook admits that the extender places: the review's uid, the namespace, the pod as the API
    server sent it and this webhook's patch of it."""

    uid: str
    namespace: str
    pod: dict[str, Any]
    patch: list[dict[str, Any]]


def placed_at_admission(group: AppGroup | None, pod: dict[str, Any]) -> bool:
    """Whether the extender places ``pod`` (of ``group``) as it is created: its AppGroup plans ungated and the pod
    is neither bound nor placed already."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    spec = pod.get("spec")
    return (
        plans_ungated(group)
        and keys.PLACED_AT_ADMISSION not in annotations
        and not (isinstance(spec, dict) and spec.get("nodeName"))
    )


class PlacementError(Exception):
    """The extender's placement did not come (one line: why)."""


def placement_operations(answer: bytes, uid: str) -> list[dict[str, Any]]:
    """The JSON patch of the extender's AdmissionReview ``answer`` to the review ``uid`` (empty: placed nowhere); a
    :class:`PlacementError` naming the field when it is not an allowed answer to that review."""
    try:
        review = orjson.loads(answer)
    except orjson.JSONDecodeError as error:
        raise PlacementError(f"the answer is not JSON: {error}") from None
    response = review.get("response") if isinstance(review, dict) else None
    if not isinstance(response, dict):
        raise PlacementError("the answer has no response")
    if response.get("uid") != uid:
        raise PlacementError(f"response.uid {response.get('uid')!r} is not the review's {uid!r}")
    if response.get("allowed") is not True:
        raise PlacementError(f"response.allowed is {response.get('allowed')!r}, not true")
    encoded = response.get("patch")
    if encoded is None:
        return []
    if response.get("patchType") != "JSONPatch" or not isinstance(encoded, str):
        raise PlacementError(f"response.patchType {response.get('patchType')!r} is not JSONPatch")
    try:
        operations = orjson.loads(base64.b64decode(encoded, validate=True))
    except (binascii.Error, orjson.JSONDecodeError) as error:
        raise PlacementError(f"response.patch is not base64 JSON: {error}") from None
    if not isinstance(operations, list) or not all(isinstance(item, dict) for item in operations):
        raise PlacementError("response.patch is not a list of operations")
    for operation in operations:  # a placement pins the pod: its affinity and annotations, nothing else
        path = operation.get("path")
        if not isinstance(path, str) or not path.startswith(PLACED_PATHS):
            raise PlacementError(f"response.patch writes {path!r}, not the pod's metadata or spec")
    return operations


@dataclass
class Placement:
    """The extender's ``POST /place-pods`` at ``url``, verified by ``context`` (None: the system's roots), each
    answer awaited ``timeout`` seconds at most."""

    url: str
    timeout: float = 1.0
    context: ssl.SSLContext | None = None
    failures: int = field(default=0, init=False)
    _session: aiohttp.ClientSession | None = field(default=None, init=False, repr=False)
    _logged_at: float = field(default=-LOG_EVERY_SECONDS, init=False, repr=False)

    async def operations(self, asked: ToPlace) -> tuple[list[dict[str, Any]], str]:
        """This webhook's patch of ``asked`` followed by the extender's placement of the patched pod, and the
        outcome: ``placed``, ``unplaced`` (the plan placed it nowhere) or ``failed`` (logged; the patch is this
        webhook's alone)."""
        try:
            # a copy to patch by orjson's round trip: 46 us for a 1 KB pod against 137 us with the deep copy
            # jsonpatch makes, which was 6 % of the webhook's samples in a 5,000-node burst
            pod = jsonpatch.apply_patch(orjson.loads(orjson.dumps(asked.pod)), asked.patch, in_place=True)
            added = await self._ask(asked.uid, asked.namespace, pod)
            jsonpatch.apply_patch(pod, added, in_place=True)  # the API server applies both, in this order
        except PlacementError as error:
            return self._failed(asked, str(error))
        except Exception as error:  # unreachable, late, a patch that does not apply: admitted with this one's patch
            return self._failed(asked, f"{type(error).__name__}: {error}" if str(error) else type(error).__name__)
        return asked.patch + added, "placed" if added else "unplaced"

    async def _ask(self, uid: str, namespace: str, pod: dict[str, Any]) -> list[dict[str, Any]]:
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "request": {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
                              "operation": "CREATE", "namespace": namespace, "object": pod}}  # fmt: skip
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=CONNECTIONS, ssl=self.context if self.context else True)
            self._session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(self.timeout))
        async with self._session.post(
            self.url, data=orjson.dumps(review), headers={"Content-Type": "application/json"}
        ) as response:
            if response.status != 200:
                raise PlacementError(f"the extender answered HTTP {response.status}")
            body = bytearray()
            async for chunk in response.content.iter_any():  # the whole answer, however it arrives, bounded
                body += chunk
                if len(body) > MAX_ANSWER:
                    raise PlacementError(f"the answer is over {MAX_ANSWER} bytes")
        return placement_operations(bytes(body), uid)

    def _failed(self, asked: ToPlace, why: str) -> tuple[list[dict[str, Any]], str]:
        self.failures += 1
        now = time.monotonic()
        if now - self._logged_at >= LOG_EVERY_SECONDS:  # one line a minute, whatever the burst
            self._logged_at = now
            logger.warning("placement at admission from %s failed (%s placements failed so far): %s; the pod is "
                           "admitted unplaced", self.url, self.failures, why)  # fmt: skip
        return asked.patch, "failed"

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
