"""kube-scheduler extender protocol on ``POST /filter`` and ``POST /prioritize`` (aiohttp).

Both ``nodeCacheCapable`` forms are served and answered in the form received: ``NodeNames``
(names of nodes the extender knows from its own cache) or ``Nodes`` (full Node objects, whose
labels and annotations are used as sent). Scores go out on the extender scale 0..10: the weighted
total over the plugins, divided by the weights' sum, over 10. A malformed ExtenderArgs is a 400; a
body over 10 MiB is refused (413); an unknown node name is a ``FailedNodes`` entry.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.api.config.scheduler import NETWORK_OVERHEAD, SchedulerConfig
from operators.engine.cluster.objects import Pod
from operators.engine.scheduling.explain import summary
from operators.engine.scheduling.framework import PodInputs, filter_table, merge_reasons
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.schedule import weighted_totals
from operators.extender.admission import Placer, admission_pod, placement_patch, review_answer
from operators.extender.answers import Candidates, ExtenderState
from operators.extender.args import BadArgs, item_name, parse_args
from operators.extender.plans import ON_PLAN, PlanMetrics
from operators.kube import post_event
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

logger = logging.getLogger("netaware.extender")

PLACER_KEY: web.AppKey[Placer] = web.AppKey("placer", Placer)
MAX_BODY = 32 * 1024 * 1024  # NodeNames bodies are small; full Node objects (nodeCacheCapable: false) are not
MAX_EXTENDER_PRIORITY = 10


@dataclass
class ExtenderMetrics:
    registry: CollectorRegistry
    latency: Histogram
    errors: Counter

    @classmethod
    def create(cls) -> ExtenderMetrics:
        registry = CollectorRegistry()
        errors = Counter(
            "netaware_extender_errors",
            "Calls answered with an error, by verb and HTTP code (400/413: a call that does not parse; 503: the "
            "cluster cache not synced yet). kube-scheduler skips an ignorable extender that errs.",
            ["verb", "code"],
            registry=registry,
        )
        for verb in VERBS:  # every series exists from the start: rate() and alerts see 0, not nothing
            for code in ("400", "413", "503"):
                errors.labels(verb, code)
        return cls(
            registry,
            Histogram(
                "netaware_extender_latency_seconds",
                "Extender request latency.",
                ["verb"],
                registry=registry,
                # up to kube-scheduler's httpTimeout (30 s by default): an alert sees latency near it
                buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1, 2.5, 5, 10, 20, 30),
            ),
            errors,
        )


STATE_KEY: web.AppKey[ExtenderState] = web.AppKey("state", ExtenderState)
NOTIFIER_KEY: web.AppKey[PodNotifier] = web.AppKey("notifier", object)  # type: ignore[arg-type]
COMPONENT = "netaware-extender"
VERBS = ("filter", "prioritize")
METRICS_KEY: web.AppKey[ExtenderMetrics] = web.AppKey("metrics", ExtenderMetrics)


def _json_response(payload: Any, status: int = 200) -> web.Response:
    # orjson: thousands of node names and reasons per answer; the stdlib encoder is several times slower.
    return web.Response(body=orjson.dumps(payload), status=status, content_type="application/json")


@dataclass(frozen=True)
class Call:
    """What both verbs start from: the state, its index, the pod and the candidate nodes as sent."""

    state: ExtenderState
    index: ClusterIndex
    pod: Pod
    names: list[str] | None
    items: list[dict[str, Any]] | None

    @functools.cached_property
    def inputs(self) -> PodInputs:
        return PodInputs.of(self.pod)


async def _call(request: web.Request, verb: str) -> Call | web.Response:
    """Read and check ExtenderArgs: a ``Call``, or the 400/413/503 answer (counted)."""
    state = request.app[STATE_KEY]
    try:
        body = await read_json_body(request, MAX_BODY, oversize_status=413)
        pod, names, items = parse_args(body, state.names_memo)
    except BadBody as error:
        return _error(request, verb, str(error), error.status)
    except BadArgs as error:
        return _error(request, verb, str(error), 400)
    if not state.ready():
        # Never place pods on a partial view of the cluster (its bandwidth would read as free): kube-scheduler
        # skips an ignorable extender that fails, and retries the pod later with one that is not ignorable.
        return _error(request, verb, "cluster cache not synced yet", 503)
    return Call(state, state.index(), pod, names, items)


def _error(request: web.Request, verb: str, message: str, status: int) -> web.Response:
    request.app[METRICS_KEY].errors.labels(verb, str(status)).inc()
    return _json_response({"Error": message}, status=status)


async def filter_handler(request: web.Request) -> web.Response:
    started = time.perf_counter()
    call = await _call(request, "filter")
    if isinstance(call, web.Response):
        return call
    body, nowhere = filter_body(call)
    if nowhere:
        request.app[NOTIFIER_KEY].unschedulable(call.pod, nowhere)
    request.app[METRICS_KEY].latency.labels("filter").observe(time.perf_counter() - started)
    return close_if_draining(request, web.Response(body=body, content_type="application/json"))


def filter_body(call: Call) -> tuple[bytes, tuple[str, ...]]:
    """The encoded ExtenderFilterResult of ``call`` (an answer shared by pods of equal inputs on a NodeNames list,
    but for the pods of plan-ungated AppGroups: each has its own node), and why the pod fits none of the nodes
    (empty when one passes)."""
    group = call.state.follower.group_of(call.pod, call.index.snapshot)
    if group is not None:
        return _planned_filter(call, group)
    candidates = call.state.candidates(call.index, call.names, call.items)

    def compute() -> tuple[bytes, tuple[str, ...]]:
        answer, nowhere = _filter_answer(call, candidates)
        return orjson.dumps(answer), nowhere

    return call.state.answer("filter", candidates, call.inputs, compute) if call.names is not None else compute()


def _filter_answer(
    call: Call, candidates: Candidates, config: SchedulerConfig | None = None
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The ExtenderFilterResult, and why the pod fits none of the nodes (empty when one passes); ``config``: the
    filters to run (default: the extender's)."""
    state = call.state.cycle(call.inputs, call.index)
    by_plugin = filter_table(state, candidates.table, config or call.state.config)
    rejected = merge_reasons(by_plugin)
    failed = {**candidates.failed, **rejected}
    passing = [name for name in candidates.table.names if name not in rejected] if rejected else candidates.table.names
    answer: dict[str, Any] = {"FailedNodes": failed, "FailedAndUnresolvableNodes": {}, "Error": ""}
    if call.names is not None:
        answer.update(NodeNames=passing, Nodes=None)
    else:
        answer.update(
            Nodes={"apiVersion": "v1", "kind": "NodeList", "items": [candidates.raw[name] for name in passing]},
            NodeNames=None,
        )
    nowhere = () if passing or not failed else tuple(summary(by_plugin, len(candidates.table)))
    return answer, nowhere


def _planned_filter(call: Call, group: AppGroup) -> tuple[bytes, tuple[str, ...]]:
    """The filter answer narrowed to the node planned for the pod (:mod:`operators.extender.plans`) when it is a
    candidate and netaware's filters pass it (:func:`_on_plan`); else the answer as for any pod."""
    follower = call.state.follower
    names = call.names if call.names is not None else [item_name(item, n) for n, item in enumerate(call.items or [])]
    node = follower.node_for(call.pod, group, call.state.provisional, call.state.config, names)
    follower.asked(call.pod, node, len(names))
    # Nodes sent as objects are parsed once, for either answer; a NodeNames list is resolved only for any pod's
    sent = call.state.candidates(call.index, None, call.items) if call.names is None else None
    if node is not None:
        narrowed = _on_plan(call, node, sent)
        if narrowed is not None:
            follower.count(ON_PLAN)
            return narrowed, ()
        follower.missed(call.pod, node)
    candidates = sent if sent is not None else call.state.candidates(call.index, call.names, call.items)
    answer, nowhere = _filter_answer(call, candidates)
    return orjson.dumps(answer), nowhere


def _on_plan(call: Call, node: str, sent: Candidates | None) -> bytes | None:
    """The encoded answer with the planned ``node`` alone when it is a candidate and netaware's filters pass it
    there (they run on that node alone, NetworkOverhead's maxNetworkCost aside: the whole-group plan weighed it, as
    for a gated plan's pods), the other candidates neither passed nor named failed; None when not. A pod placed at
    admission is judged without itself: the usage counts it on its node already (``counted_as``), or, while the
    extender's cache does not show it yet, its copy held by its token (kube-scheduler may see it first)."""
    token = call.pod.annotations.get(keys.PLACED_AT_ADMISSION)
    view = call.state.provisional() if token else None
    try:
        if view is not None:
            admitted = call.state.follower.admitted
            copy = admitted.held(token) if admitted is not None and token else None
            call = replace(call, index=view.place([call.pod.on_node(""), *([copy.on_node("")] if copy else [])]))
            sent = call.state.candidates(call.index, None, call.items) if sent is not None else None
        alone = _planned_node(call, node, sent)
        if alone is None:
            return None
        config = call.state.config
        answer, _ = _filter_answer(call, alone, replace(config, filters=tuple(
            name for name in config.filters if name != NETWORK_OVERHEAD)))  # fmt: skip
        # kube-scheduler takes NodeNames as the feasible nodes and reads FailedNodes only to explain a pod that fits
        # nowhere, which this one does not: the other candidates are left out. Named each with the plan's reason,
        # they made the answer 0.5 MB on 5,000 nodes, to encode here and decode there for every pod.
        return None if answer["FailedNodes"] else orjson.dumps(answer)
    finally:
        if view is not None:
            view.close()


def _planned_node(call: Call, node: str, sent: Candidates | None) -> Candidates | None:
    """The planned ``node`` as the only candidate, if it is one of the request's (``sent``: the Nodes sent as
    objects, parsed; None for a NodeNames list); None if not. A NodeNames list is not resolved as a whole for it: a
    pod not nominated yet comes with every node that passed kube-scheduler's filters, and a table of those, new for
    each pod as nodes fill, was most of a planned pod's answer."""
    if sent is not None:
        row = sent.table.row_of.get(node)
        return None if row is None else Candidates(sent.table.rows(np.array([row])), sent.raw, {})
    row = call.index.position.get(node)
    if row is None or call.names is None or node not in call.names:
        return None
    table = call.index.table(call.state.config.bandwidth.default_node_bandwidth)
    return Candidates(table.rows(np.array([row])), {}, {})


class PodNotifier:
    """A Warning Event ``NetworkUnschedulable`` on a pod the extender rejects on every node, with why (one line per
    plugin): once per pod and per change of the reason, never once per retry of kube-scheduler. Without an API
    client (a snapshot) only logged. Bounded memory."""

    def __init__(self, api: Any = None) -> None:
        self.api = api
        self._said: dict[tuple[str, str], str] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def unschedulable(self, pod: Pod, lines: tuple[str, ...]) -> None:
        message = "no node fits: " + " | ".join(lines)
        key = (pod.namespace, pod.name)
        if self._said.get(key) == message:
            return
        if len(self._said) >= 10_000:
            self._said.clear()
        self._said[key] = message
        logger.info("pod %s/%s: %s", pod.namespace, pod.name, message)
        if self.api is None:
            return
        involved = {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "namespace": pod.namespace, "uid": pod.uid}
        task = asyncio.create_task(
            post_event(self.api, involved, "Warning", "NetworkUnschedulable", message, COMPONENT)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def extender_scale(totals: Any, config: SchedulerConfig) -> Any:
    """Weighted totals (an int or an array of them) on the extender's 0..10 scale: divided by the weights' sum,
    over 10."""
    weights = sum(config.weights.values()) or 1
    return totals * MAX_EXTENDER_PRIORITY // (100 * weights)


def extender_scores(totals: Mapping[str, int], config: SchedulerConfig) -> dict[str, int]:
    """A cycle's totals per node on the extender's scale."""
    return {node: extender_scale(total, config) for node, total in totals.items()}


def _host_priorities(call: Call, candidates: Candidates, requested: list[str]) -> bytes:
    """The HostPriorityList of the score half of the cycle (the cycle state is shared with the pod's /filter),
    on the extender's 0..10 scale; nodes the extender could not score get 0."""
    state = call.state.cycle(call.inputs, call.index)
    scaled = extender_scale(weighted_totals(state, candidates.table, call.state.config), call.state.config)
    resolved = call.state.resolved(requested)
    if resolved is not None and resolved.rows is None and scaled.size and 0 <= scaled.min() <= scaled.max() <= 10:
        # the common case (every node known, in the order sent): the list's template with the scores written in
        return resolved.priorities.encode(scaled)
    by_name = dict(zip(candidates.table.names, scaled.tolist(), strict=True))
    return orjson.dumps([{"Host": name, "Score": by_name.get(name, 0)} for name in requested])


def prioritize_body(call: Call) -> bytes:
    """The encoded HostPriorityList of ``call`` (shared by pods of equal inputs on a NodeNames list)."""
    names, items = call.names, call.items
    candidates = call.state.candidates(call.index, names, items)

    def compute() -> tuple[bytes, tuple[str, ...]]:
        requested = (
            names if names is not None else [item_name(item, position) for position, item in enumerate(items or [])]
        )
        return _host_priorities(call, candidates, requested), ()

    return (call.state.answer("prioritize", candidates, call.inputs, compute) if names is not None else compute())[0]


async def prioritize_handler(request: web.Request) -> web.Response:
    started = time.perf_counter()
    call = await _call(request, "prioritize")
    if isinstance(call, web.Response):
        return call
    body = prioritize_body(call)
    request.app[METRICS_KEY].latency.labels("prioritize").observe(time.perf_counter() - started)
    return close_if_draining(request, web.Response(body=body, content_type="application/json"))


async def placement_handler(request: web.Request) -> web.Response:
    """The placement webhook (:mod:`operators.extender.admission`): a pod of a plan-ungated AppGroup placed as it is
    created; any other pod, or one placed nowhere, admitted unchanged."""
    state = request.app[STATE_KEY]
    try:
        body = await read_json_body(request, MAX_BODY, oversize_status=413)
        uid, pod, token = admission_pod(body)
    except BadBody as error:
        return _json_response({"error": str(error)}, status=error.status)
    except (ValueError, TypeError, KeyError) as error:  # FieldError is a ValueError
        return _json_response({"error": str(error)}, status=400)
    follower = state.follower
    if PLACER_KEY not in request.app or not state.ready():
        return review_answer(uid, None)
    group = follower.group_of(pod, state.index().snapshot)
    placer = request.app[PLACER_KEY]
    node = None if group is None else await placer.node_of(pod, group, token)
    if node is not None and (request.transport is None or request.transport.is_closing()):
        placer.admitted.forget(token)  # the caller gave up waiting: the pod is created without this placement
        node = None
    if node is None:
        return review_answer(uid, None)
    return review_answer(uid, placement_patch(pod, node, token))


def build_app(
    state: ExtenderState, notifier: PodNotifier | None = None, supervisor: Supervisor | None = None
) -> web.Application:
    """The extender's application; ``supervisor``: the one its live index's tasks run under (its problem is
    ``/healthz``, its restarts are in ``/metrics``)."""
    tasks = supervisor or Supervisor()
    app = web.Application(client_max_size=MAX_BODY, middlewares=[state.answering.middleware])
    app[SUPERVISOR_KEY] = tasks
    app[STATE_KEY] = state
    app[NOTIFIER_KEY] = notifier or PodNotifier()
    app[METRICS_KEY] = ExtenderMetrics.create()
    state.follower.metrics = PlanMetrics.create(app[METRICS_KEY].registry)
    app.router.add_post("/filter", filter_handler)
    app.router.add_post("/prioritize", prioritize_handler)
    app.router.add_post("/place-pods", placement_handler)
    if state.follower.admitted is not None:
        place = functools.partial(state.follower.place_admitted, provisional=state.provisional, config=state.config)
        app[PLACER_KEY] = Placer(place, state.follower.admitted)
    registries = [app[METRICS_KEY].registry, *([tasks.registry] if tasks.registry is not None else [])]
    ready = lambda: state.ready() and tasks.running()  # noqa: E731
    add_probes(app, ready, "cluster cache not synced yet", *registries, health=tasks.problem)
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
    """Serve the extender ``app`` (``build_app``) until ``stop`` is set (then gracefully: :func:`serve_app`)."""
    await serve_app(app, "extender", "/filter", host, port, tls, stop, reload_interval, shutdown_delay, health_port)
