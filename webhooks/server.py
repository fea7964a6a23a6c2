"""The bandwidth mutating webhook: AdmissionReview v1 over HTTPS (aiohttp), decisions from the engine.

Routes: ``POST /mutate-pods``, ``GET /healthz``, ``GET /readyz`` (ready once the cluster view is
synced), ``GET /metrics``. Bad input never yields a 5xx: a malformed AdmissionReview, a wrong
content type or a body over 3 MiB is a 400; an invalid pod is ``allowed: false`` with a message
naming the annotation and the value. TLS certificates are reloaded when their files change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from operators.api import keys
from operators.api.meta import DEFAULT_NAMESPACE
from operators.engine.admission.pod_bandwidth import Denied, admit_pod, json_patch, resource_patch
from operators.engine.admission.review import review_response
from operators.engine.admission.scheduler_name import scheduler_choice
from operators.engine.admission.scheduling_gate import gate_patch, needs_gate
from operators.engine.cluster.appgroups import pod_appgroup
from operators.engine.cluster.bandwidth import Accounting
from operators.kube import post_event
from operators.logs import about
from operators.serving import (
    SUPERVISOR_KEY,
    BadBody,
    ReloadingTLS,
    add_probes,
    close_if_draining,
    read_json_body,
    serve_app,
)
from operators.supervision import Supervisor
from webhooks.configuration import PATH, asks_for_bandwidth
from webhooks.placement import Placement, ToPlace, placed_at_admission
from webhooks.view import ClusterView

logger = logging.getLogger("netaware.webhook")

MAX_BODY = 3 * 1024 * 1024
WEBHOOK = "mutate-pods"
VIEW_KEY: web.AppKey[ClusterView] = web.AppKey("view", ClusterView)
METRICS_KEY: web.AppKey[WebhookMetrics] = web.AppKey("metrics", object)  # type: ignore[arg-type]
NOTIFIER_KEY: web.AppKey[NamespaceNotifier] = web.AppKey("notifier", object)  # type: ignore[arg-type]
GATE_BY_DEFAULT_KEY: web.AppKey[bool] = web.AppKey("gate_by_default", bool)
RESOURCES_KEY: web.AppKey[Accounting | None] = web.AppKey("bandwidth_resources")
SCHEDULER_KEY: web.AppKey[str] = web.AppKey("scheduler_name", str)
PLANS_KEEP_SCHEDULER_KEY: web.AppKey[bool] = web.AppKey("plans_keep_scheduler", bool)
PLACEMENT_KEY: web.AppKey[Placement | None] = web.AppKey("placement")


@dataclass
class WebhookMetrics:
    registry: CollectorRegistry
    requests: Counter
    latency: Histogram
    in_flight: Gauge
    namespace_default_errors: Counter
    placements: Counter

    def __post_init__(self) -> None:
        # the children every admission touches, looked up once (a labels() call takes a lock and a dict lookup)
        self.in_flight_webhook = self.in_flight.labels(WEBHOOK)
        self.latency_webhook = self.latency.labels(WEBHOOK)
        self.ok = self.requests.labels(WEBHOOK, "200")

    def forget_namespace(self, namespace: str) -> None:
        """A namespace deleted: its series goes with it."""
        with contextlib.suppress(KeyError):
            self.namespace_default_errors.remove(namespace)

    @classmethod
    def create(cls) -> WebhookMetrics:
        registry = CollectorRegistry()
        return cls(
            registry,
            Counter(
                "controller_runtime_webhook_requests",
                "Admission requests by HTTP code.",
                ["webhook", "code"],
                registry=registry,
            ),
            Histogram(
                "controller_runtime_webhook_latency_seconds",
                "Admission latency.",
                ["webhook"],
                registry=registry,
                # up to kube-apiserver's timeout for the call (webhook.timeoutSeconds, 2 s): alerts see it near
                buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 1.5, 2),
            ),
            Gauge(
                "controller_runtime_webhook_requests_in_flight",
                "Admissions being served.",
                ["webhook"],
                registry=registry,
            ),
            Counter(
                "netaware_webhook_namespace_default_errors",
                "Admissions that skipped a namespace default bandwidth annotation that is not a bandwidth.",
                ["namespace"],
                registry=registry,
            ),
            Counter(
                "netaware_webhook_placements",
                "Pods of plan-ungated AppGroups the extender was asked to place (--placement-url), by result: placed, "
                "unplaced (its plan placed it nowhere), failed (admitted without it).",
                ["result"],
                registry=registry,
            ),
        )


class NamespaceNotifier:
    """Tells the namespace's users that one of its default annotations is broken: a Warning Event on the
    Namespace, at most once per namespace and message every ``interval`` seconds (no Event storm); and an
    AppGroup's users that one of its pods keeps another scheduler. Without an API client (``-f`` snapshot mode)
    the problem is only logged."""

    def __init__(self, api: Any = None, interval: float = 600.0) -> None:
        self.api = api
        self.interval = interval
        self._last: dict[tuple[str, str], float] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def namespace_problem(self, namespace: str, message: str) -> None:
        if not self._due((namespace, message)):
            return
        logger.warning("namespace %s: %s", namespace, message, extra=about("Namespace", name=namespace))
        self._post({"apiVersion": "v1", "kind": "Namespace", "name": namespace}, "InvalidDefaultBandwidth", message)

    def appgroup_problem(self, namespace: str, name: str, message: str) -> None:
        """A Warning Event ``SchedulerNotNetaware`` on the AppGroup, at most once per AppGroup and message every
        ``interval`` seconds."""
        if not self._due((f"{namespace}/{name}", message)):
            return
        logger.warning("AppGroup %s/%s: %s", namespace, name, message, extra=about("AppGroup", namespace, name))
        involved = {"apiVersion": f"{keys.APPGROUP_GROUP}/{keys.V1ALPHA1}", "kind": "AppGroup", "name": name,
                    "namespace": namespace}  # fmt: skip
        self._post(involved, "SchedulerNotNetaware", message)

    def _due(self, key: tuple[str, str]) -> bool:
        now = time.monotonic()
        if now - self._last.get(key, -self.interval) < self.interval:
            return False
        if len(self._last) > 10_000:  # bounded memory whatever the namespaces
            self._last.clear()
        self._last[key] = now
        return True

    def _post(self, involved: dict[str, str], reason: str, message: str) -> None:
        if self.api is not None:
            task = asyncio.create_task(post_event(self.api, involved, "Warning", reason, message, "netaware-webhook"))
            self._tasks.add(task)  # kept until done, so it is not collected half-way
            task.add_done_callback(self._tasks.discard)


def _bad_request(message: str) -> web.Response:
    return web.json_response({"error": message}, status=400)


@dataclass(frozen=True)
class Admission:
    """The AdmissionReview answer, and what its warnings are about: the namespace's defaults, or (``appgroup``:
    namespace, name) a pod of that AppGroup that keeps a scheduler other than netaware's; ``to_place``: the pod of
    a plan-ungated AppGroup, for the extender's placement (``--placement-url``), and its warnings."""

    answer: dict[str, Any]
    namespace_problems: tuple[str, ...] = ()
    appgroup: tuple[str, str] | None = None
    scheduler_conflict: str = ""
    to_place: ToPlace | None = None
    warnings: tuple[str, ...] = ()


def decide(
    review: Any,
    view: ClusterView,
    gate_by_default: bool = False,
    resources: Accounting | None = None,
    scheduler_name: str = "",
    plans_keep_scheduler: bool = False,
) -> dict[str, Any]:
    """The AdmissionReview answer (:func:`admit`)."""
    return admit(review, view, gate_by_default, resources, scheduler_name, plans_keep_scheduler).answer


def admit(
    review: Any,
    view: ClusterView,
    gate_by_default: bool = False,
    resources: Accounting | None = None,
    scheduler_name: str = "",
    plans_keep_scheduler: bool = False,
) -> Admission:
    """The AdmissionReview answer; raises ``ValueError`` for a malformed review (a 400). Problems with the
    namespace's defaults come back as ``warnings`` (kubectl prints them); the pod is still admitted. A pod of an
    AppGroup that asks for ordered scheduling (or of any AppGroup, ``gate_by_default``) gets the topology-order
    scheduling gate. With ``resources`` (the bandwidth guarantee), the pod requests its bandwidth as that
    accounting mode's extended resources. With ``scheduler_name`` (or its AppGroup's annotation), a pod of an
    AppGroup is sent to that scheduler (:mod:`~operators.engine.admission.scheduler_name`; with
    ``plans_keep_scheduler``, but for the pods of AppGroups released by plan). With ``resources``, a pod
    that asks for bandwidth (:func:`~webhooks.configuration.asks_for_bandwidth`) is admitted marked
    ``netaware.io/admitted``, which the retry entry's matchCondition reads."""
    if (
        not isinstance(review, dict)
        or review.get("kind") != "AdmissionReview"
        or review.get("apiVersion") != "admission.k8s.io/v1"
    ):
        raise ValueError("expected an admission.k8s.io/v1 AdmissionReview")
    request = review.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str) or not request["uid"]:
        raise ValueError("AdmissionReview.request.uid is missing")
    uid = request["uid"]
    kind = request.get("kind") or {}
    if (
        not isinstance(kind, dict)
        or kind.get("kind") != "Pod"
        or request.get("operation") != "CREATE"
        or request.get("subResource")
    ):
        return Admission(review_response(uid, True))  # not ours: let it through unchanged
    pod = request.get("object")
    if not isinstance(pod, dict):
        raise ValueError("AdmissionReview.request.object must be a Pod object")
    raw_meta = pod.get("metadata")
    if raw_meta is not None and not isinstance(raw_meta, dict):
        return Admission(review_response(uid, False, message="metadata must be an object"))
    meta: dict[str, Any] = raw_meta or {}
    for name in ("annotations", "labels"):
        value = meta.get(name)
        if value is not None and not (
            isinstance(value, dict)
            and all(isinstance(key, str) and isinstance(item, str) for key, item in value.items())
        ):
            return Admission(review_response(uid, False, message=f"metadata.{name} must map strings to strings"))
    annotations: dict[str, str] = meta.get("annotations") or {}
    namespace_name = meta.get("namespace") or request.get("namespace") or DEFAULT_NAMESPACE
    if not isinstance(namespace_name, str):
        raise ValueError("the namespace must be a string")
    pod = {**pod, "metadata": {**meta, "namespace": namespace_name}}
    # the pod's AppGroup, found once for both rules (each would otherwise scan every AppGroup)
    label = (meta.get("labels") or {}).get(keys.APPGROUP_LABEL)
    owner = pod_appgroup(label, namespace_name, view.app_groups_named(label)) if label else None
    groups = (owner,) if owner is not None else ()
    try:
        admission = admit_pod(pod, groups, view.namespaces.get(namespace_name))
    except Denied as denial:
        return Admission(review_response(uid, False, message=str(denial)))
    added = admission.annotations(annotations)
    if (
        resources is not None
        and keys.ADMITTED not in annotations
        and asks_for_bandwidth(annotations, meta.get("labels") or {})
    ):
        added = {**added, keys.ADMITTED: "true"}
    patch = json_patch(request["object"], added)
    if resources is not None:
        patch += resource_patch(pod, {**annotations, **added}, resources)
    if needs_gate(pod, namespace_name, groups, gate_by_default):
        patch += gate_patch(pod)
    scheduler = scheduler_choice(pod, owner, scheduler_name, plans_keep_scheduler)
    patch += scheduler.patch
    warnings = [*admission.namespace_problems, *([scheduler.conflict] if scheduler.conflict else [])]
    return Admission(
        review_response(uid, True, patch, warnings=warnings),
        tuple(admission.namespace_problems),
        (owner.metadata.namespace, owner.metadata.name) if owner is not None and scheduler.conflict else None,
        scheduler.conflict,
        ToPlace(uid, namespace_name, request["object"], patch) if placed_at_admission(owner, pod) else None,
        tuple(warnings),
    )


async def mutate_pods(request: web.Request) -> web.Response:
    metrics = request.app[METRICS_KEY]
    started = time.perf_counter()
    in_flight = metrics.in_flight_webhook
    in_flight.inc()
    try:
        response = await _mutate(request)
    finally:
        in_flight.dec()
    (metrics.ok if response.status == 200 else metrics.requests.labels(WEBHOOK, str(response.status))).inc()
    metrics.latency_webhook.observe(time.perf_counter() - started)
    return close_if_draining(request, response)


async def _mutate(request: web.Request) -> web.Response:
    try:
        body = await read_json_body(request, MAX_BODY, oversize_status=400)
    except BadBody as error:
        return _bad_request(str(error))
    app = request.app
    try:
        review = orjson.loads(body)
        admitted = admit(
            review,
            app[VIEW_KEY],
            app[GATE_BY_DEFAULT_KEY],
            app[RESOURCES_KEY],
            app[SCHEDULER_KEY],
            app[PLANS_KEEP_SCHEDULER_KEY],
        )
    except (ValueError, RecursionError) as error:
        return _bad_request(f"not a valid AdmissionReview: {error}")
    if admitted.namespace_problems:
        namespace = str(review["request"].get("namespace") or DEFAULT_NAMESPACE)
        app[METRICS_KEY].namespace_default_errors.labels(namespace).inc()
        app[NOTIFIER_KEY].namespace_problem(namespace, "; ".join(admitted.namespace_problems))
    if admitted.appgroup is not None:
        app[NOTIFIER_KEY].appgroup_problem(*admitted.appgroup, admitted.scheduler_conflict)
    answer, placement = admitted.answer, app[PLACEMENT_KEY]
    if placement is not None and admitted.to_place is not None:
        asked = admitted.to_place
        patch, outcome = await placement.operations(asked)
        app[METRICS_KEY].placements.labels(outcome).inc()
        answer = review_response(asked.uid, True, patch, warnings=list(admitted.warnings))
    return web.Response(body=orjson.dumps(answer), content_type="application/json")


def build_app(
    view: ClusterView,
    metrics: WebhookMetrics | None = None,
    notifier: NamespaceNotifier | None = None,
    gate_by_default: bool = False,
    resources: Accounting | None = None,
    supervisor: Supervisor | None = None,
    scheduler_name: str = "",
    plans_keep_scheduler: bool = False,
    placement: Placement | None = None,
) -> web.Application:
    """The webhook's application; ``supervisor``: the one its live view's watches run under (its problem is
    ``/healthz``, its restarts are in ``/metrics``); ``scheduler_name``: where AppGroups' pods are sent;
    ``placement``: the extender's, asked for the pods of plan-ungated AppGroups (closed with the application)."""
    tasks = supervisor or Supervisor()
    app = web.Application(client_max_size=MAX_BODY)
    app[SUPERVISOR_KEY] = tasks
    app[VIEW_KEY] = view
    app[GATE_BY_DEFAULT_KEY] = gate_by_default
    app[RESOURCES_KEY] = resources
    app[SCHEDULER_KEY] = scheduler_name
    app[PLANS_KEEP_SCHEDULER_KEY] = plans_keep_scheduler
    app[PLACEMENT_KEY] = placement
    if placement is not None:
        app.on_cleanup.append(lambda _: placement.close())
    app[METRICS_KEY] = metrics or WebhookMetrics.create()
    app[NOTIFIER_KEY] = notifier or NamespaceNotifier()
    app.router.add_post(PATH, mutate_pods)
    registries = [app[METRICS_KEY].registry, *([tasks.registry] if tasks.registry is not None else [])]
    ready = lambda: view.ready and tasks.running()  # noqa: E731
    add_probes(app, ready, "cluster view not synced yet", *registries, health=tasks.problem)
    return app


async def serve(
    app: web.Application,
    host: str,
    port: int,
    tls: ReloadingTLS | None,
    stop: asyncio.Event,
    reload_interval: float = 10.0,
    shutdown_delay: float = 0.0,
    health_port: int = 0,
) -> None:
    """Serve the webhook ``app`` (``build_app``) until ``stop`` is set (then gracefully: :func:`serve_app`)."""
    await serve_app(app, "webhook", PATH, host, port, tls, stop, reload_interval, shutdown_delay, health_port)
