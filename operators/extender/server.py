"""kube-scheduler extender protocol on ``POST /filter`` and ``POST /prioritize`` (aiohttp).

Both ``nodeCacheCapable`` forms are served and answered in the form received: ``NodeNames``
(names of nodes the extender knows from its own cache) or ``Nodes`` (full Node objects, whose
labels and annotations are used as sent). Scores go out on the extender scale 0..10: the weighted
total over the plugins, divided by the weights' sum, over 10. A malformed ExtenderArgs is a 400; a
body over 10 MiB is refused (413); an unknown node name is a ``FailedNodes`` entry.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry, Histogram

from operators.api.config.scheduler import RESOURCES_FIT, SchedulerConfig
from operators.engine.cluster.objects import Node, Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.scheduling.explain import summary
from operators.engine.scheduling.framework import CycleState, PodInputs, filter_table, merge_reasons
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.schedule import weighted_totals
from operators.engine.scheduling.table import Ints, NodeTable
from operators.extender.wire import NameListMemo, PriorityTemplate
from operators.kube import post_event
from operators.serving import BadBody, ReloadingTLS, add_probes, read_json_body, serve_app

logger = logging.getLogger("netaware.extender")

MAX_BODY = 32 * 1024 * 1024  # NodeNames bodies are small; full Node objects (nodeCacheCapable: false) are not
MAX_NODES = 50_000  # per request: above the largest clusters run (Kubernetes supports 5,000 nodes)
MAX_EXTENDER_PRIORITY = 10


@dataclass(frozen=True, eq=False)  # by identity: the answers given on it are kept per object
class Candidates:
    """The nodes of one request as a table, the objects as sent (``Nodes`` form), and the nodes that failed
    before any plugin ran (unknown to the extender, or unreadable)."""

    table: NodeTable
    raw: dict[str, dict[str, Any]]
    failed: dict[str, str]


ANSWERS_KEPT = 256


@dataclass
class ExtenderState:
    """Where the cluster comes from and the config: a fixed snapshot (``source``), or a live index kept by delta
    (``indexes``: :class:`operators.extender.live.LiveIndex`). Holds the current index, the cycle state of the
    last pod (its /filter and /prioritize share it), the table of the last NodeNames list (kube-scheduler sends
    the same list pod after pod) and the answers given on them: a Deployment's replicas are the same pod to
    every plugin, so the next replica's answer is the encoded bytes of the first's."""

    source: Callable[[], Snapshot]
    config: SchedulerConfig
    ready: Callable[[], bool] = lambda: True
    indexes: Callable[[], ClusterIndex] | None = None
    _index: tuple[Snapshot | None, ClusterIndex] | None = None
    _cycle: tuple[PodInputs, ClusterIndex, CycleState] | None = None
    _last_names: tuple[ClusterIndex, list[str], Candidates] | None = None
    _resolved: tuple[dict[str, int], list[str], Resolved] | None = None
    _answers: dict[tuple[str, Candidates, PodInputs], bytes] = field(default_factory=dict)
    _nowhere: dict[tuple[str, Candidates, PodInputs], tuple[str, ...]] = field(default_factory=dict)  # why, per answer
    names_memo: NameListMemo = field(default_factory=NameListMemo)
    answers_reused: int = 0

    def __post_init__(self) -> None:
        # kube-scheduler runs its own NodeResourcesFit before it calls an extender: the extender answers for
        # netaware's plugins only, whatever the configuration says of the in-tree filter
        self.config = replace(self.config, filters=tuple(f for f in self.config.filters if f != RESOURCES_FIT))

    def index(self) -> ClusterIndex:
        if self.indexes is not None:
            index = self.indexes()
            if self._index is None or self._index[1] is not index:
                self._index = (None, index)
                self._forget()
            return index
        snapshot = self.source()
        # Held, not compared by id(): a freed snapshot's id can be reused by the next one.
        if self._index is None or self._index[0] is not snapshot:
            self._index = (snapshot, ClusterIndex.build(snapshot))
            self._forget()
        return self._index[1]

    def _forget(self) -> None:
        self._cycle = None
        self._answers.clear()

    def answer(
        self,
        verb: str,
        candidates: Candidates,
        inputs: PodInputs,
        compute: Callable[[], tuple[bytes, tuple[str, ...]]],
    ) -> tuple[bytes, tuple[str, ...]]:
        """The encoded answer of ``verb`` for a pod on ``candidates`` (a NodeNames list of the current index),
        computed once per :class:`PodInputs` (all the plugins read of a pod); with it, why the pod fits no node
        (empty when one fits)."""
        key = (verb, candidates, inputs)
        found = self._answers.get(key)
        if found is not None:
            self.answers_reused += 1
            return found, self._nowhere.get(key, ())
        if len(self._answers) >= ANSWERS_KEPT:
            self._answers.clear()
            self._nowhere.clear()
        body, nowhere = compute()
        self._answers[key] = body
        if nowhere:
            self._nowhere[key] = nowhere
        return body, nowhere

    def candidates(
        self, index: ClusterIndex, names: list[str] | None, items: list[dict[str, Any]] | None
    ) -> Candidates:
        if names is None:
            return _object_candidates(index, items or [], self.config)
        last = self._last_names
        if last is not None and last[0] is index and (last[1] is names or last[1] == names):
            self._last_names = (index, names, last[2])  # held by this very list from now on
            if self._resolved is not None:
                self._resolved = (self._resolved[0], names, self._resolved[2])
            return last[2]
        # The rows of a name list hold while the nodes do (an index derived by a pod change keeps them).
        position = index.position
        if self._resolved is None or self._resolved[0] is not position or self._resolved[1] != names:
            self._resolved = (position, names, Resolved.of(index, names))
        else:
            self._resolved = (position, names, self._resolved[2])
        self._last_names = (index, names, self._resolved[2].candidates(index, self.config))
        return self._last_names[2]

    def resolved(self, names: list[str]) -> Resolved | None:
        """The resolution of this very name list, if it is the last one resolved."""
        held = self._resolved
        return held[2] if held is not None and held[1] is names else None

    def cycle(self, inputs: PodInputs, index: ClusterIndex) -> CycleState:
        """The cycle state of a pod with these inputs, shared by its /filter and /prioritize calls on the same
        snapshot."""
        if self._cycle is None or self._cycle[0] != inputs or self._cycle[1] is not index:
            self._cycle = (inputs, index, CycleState.of_inputs(inputs, index, self.config))
        return self._cycle[2]


@dataclass
class ExtenderMetrics:
    registry: CollectorRegistry
    latency: Histogram

    @classmethod
    def create(cls) -> ExtenderMetrics:
        registry = CollectorRegistry()
        return cls(
            registry,
            Histogram(
                "netaware_extender_latency_seconds",
                "Extender request latency.",
                ["verb"],
                registry=registry,
                buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1),
            ),
        )


STATE_KEY: web.AppKey[ExtenderState] = web.AppKey("state", ExtenderState)
NOTIFIER_KEY: web.AppKey[PodNotifier] = web.AppKey("notifier", object)  # type: ignore[arg-type]
COMPONENT = "netaware-extender"
METRICS_KEY: web.AppKey[ExtenderMetrics] = web.AppKey("metrics", ExtenderMetrics)


class BadArgs(ValueError):
    pass


def _json_response(payload: Any, status: int = 200) -> web.Response:
    # orjson: thousands of node names and reasons per answer; the stdlib encoder is several times slower.
    return web.Response(body=orjson.dumps(payload), status=status, content_type="application/json")


def _decode(body: bytes, memo: NameListMemo) -> tuple[Any, list[str] | None]:
    """The ExtenderArgs document, and the memo's names when the body ends with them."""
    split = memo.split(body)
    if split is not None:
        with contextlib.suppress(orjson.JSONDecodeError, RecursionError):
            head = orjson.loads(split[0])
            if isinstance(head, dict) and head:
                return head, split[1]
    try:
        return orjson.loads(body), None
    except (orjson.JSONDecodeError, RecursionError) as error:
        raise BadArgs(f"not JSON: {error}") from None


def _parse_args(
    body: bytes, memo: NameListMemo | None = None
) -> tuple[Pod, list[str] | None, list[dict[str, Any]] | None]:
    """ExtenderArgs: the pod, and the candidates as names or as Node objects; ``BadArgs`` names the field."""
    memo = memo if memo is not None else NameListMemo()
    args, known = _decode(body, memo)
    if isinstance(args, dict):
        args = _go_fields(args, EXTENDER_ARGS_FIELDS)
    if not isinstance(args, dict) or not isinstance(args.get("Pod"), dict):
        raise BadArgs("ExtenderArgs.Pod must be a Pod object")
    try:
        pod = Pod.parse(args["Pod"])
    except (ValueError, TypeError, AttributeError, OverflowError) as error:
        raise BadArgs(f"ExtenderArgs.Pod: {error}") from None
    if known is not None:
        return pod, known, None
    names, nodes = args.get("NodeNames"), args.get("Nodes")
    if names is not None:
        if not isinstance(names, list) or not set(map(type, names)) <= {str}:
            raise BadArgs("ExtenderArgs.NodeNames must be a list of names")
        if len(names) > MAX_NODES:
            raise BadArgs(f"ExtenderArgs.NodeNames: {len(names)} nodes, more than the {MAX_NODES} allowed")
        memo.learn(body, names)
        return pod, names, None
    if not isinstance(nodes, dict):
        raise BadArgs("ExtenderArgs needs NodeNames (nodeCacheCapable) or Nodes (a NodeList)")
    items = _go_fields(nodes, ("items",)).get("items")
    if items is None:  # Go marshals an empty slice of a NodeList as null
        items = []
    if not isinstance(items, list):
        raise BadArgs("ExtenderArgs.Nodes.items must be a list of Node objects")
    if len(items) > MAX_NODES:
        raise BadArgs(f"ExtenderArgs.Nodes.items: {len(items)} nodes, more than the {MAX_NODES} allowed")
    return pod, None, items


EXTENDER_ARGS_FIELDS = ("Pod", "Nodes", "NodeNames")  # the Go struct's field names (it has no json tags)


def _go_fields(document: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """``document`` with its keys as Go's ``encoding/json`` matches them to ``fields``: case-insensitively (Unicode
    case folding), the last of several matching keys winning; other keys are dropped, as Go ignores them."""
    by_fold = {name.casefold(): name for name in fields}
    matched: dict[str, Any] = {}
    for key, value in document.items():
        name = by_fold.get(key.casefold())
        if name is not None:
            matched[name] = value
    return matched


def _item_name(item: Any, position: int) -> str:
    """The name of a Node object as sent, whatever shape it has (``#position`` when it has none)."""
    meta = item.get("metadata") if isinstance(item, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name else f"#{position}"


@dataclass(frozen=True)
class Resolved:
    """A ``NodeNames`` list resolved against the extender's nodes: the rows of the known ones (None: all of the
    table, in its order) and the unknown ones with why."""

    names: list[str]
    rows: Ints | None
    failed: dict[str, str]

    @functools.cached_property
    def priorities(self) -> PriorityTemplate:
        """The /prioritize answer's template for these names, encoded once per list."""
        return PriorityTemplate(self.names)

    @classmethod
    def of(cls, index: ClusterIndex, names: list[str]) -> Resolved:
        position = index.position
        known = [name for name in names if name in position]
        failed = {name: f"node {name} is not known to the extender" for name in names if name not in position}
        everything = len(known) == len(index.nodes) and known == [node.name for node in index.nodes]
        return cls(names, None if everything else index.rows_of(known), failed)

    def candidates(self, index: ClusterIndex, config: SchedulerConfig) -> Candidates:
        table = index.table(config.bandwidth.default_node_bandwidth)
        return Candidates(table if self.rows is None else table.rows(self.rows), {}, self.failed)


def _object_candidates(index: ClusterIndex, items: list[Any], config: SchedulerConfig) -> Candidates:
    """``Nodes``: a table of the objects as sent; an unreadable one fails with the reason."""
    failed: dict[str, str] = {}
    nodes: list[Node] = []
    raw: dict[str, dict[str, Any]] = {}
    for position, item in enumerate(items):
        try:
            if not isinstance(item, dict):
                raise TypeError("expected a Node object")
            node = Node.parse(item)
        except (ValueError, TypeError, AttributeError, OverflowError) as error:
            failed[_item_name(item, position)] = f"unreadable Node: {error}"
            continue
        nodes.append(node)
        raw[node.name] = item
    return Candidates(index.table_of(nodes, config.bandwidth.default_node_bandwidth), raw, failed)


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


async def _call(request: web.Request) -> Call | web.Response:
    """Read and check ExtenderArgs: a ``Call``, or the 400/413 answer."""
    state = request.app[STATE_KEY]
    try:
        body = await read_json_body(request, MAX_BODY, oversize_status=413)
        pod, names, items = _parse_args(body, state.names_memo)
    except BadBody as error:
        return _json_response({"Error": str(error)}, status=error.status)
    except BadArgs as error:
        return _json_response({"Error": str(error)}, status=400)
    if not state.ready():
        # Never place pods on a partial view of the cluster (its bandwidth would read as free): kube-scheduler
        # skips an ignorable extender that fails, and retries the pod later with one that is not ignorable.
        return _json_response({"Error": "cluster cache not synced yet"}, status=503)
    return Call(state, state.index(), pod, names, items)


async def filter_handler(request: web.Request) -> web.Response:
    started = time.perf_counter()
    call = await _call(request)
    if isinstance(call, web.Response):
        return call
    body, nowhere = filter_body(call)
    if nowhere:
        request.app[NOTIFIER_KEY].unschedulable(call.pod, nowhere)
    request.app[METRICS_KEY].latency.labels("filter").observe(time.perf_counter() - started)
    return web.Response(body=body, content_type="application/json")


def filter_body(call: Call) -> tuple[bytes, tuple[str, ...]]:
    """The encoded ExtenderFilterResult of ``call`` (an answer shared by pods of equal inputs on a NodeNames list),
    and why the pod fits none of the nodes (empty when one passes)."""
    candidates = call.state.candidates(call.index, call.names, call.items)

    def compute() -> tuple[bytes, tuple[str, ...]]:
        answer, nowhere = _filter_answer(call, candidates)
        return orjson.dumps(answer), nowhere

    return call.state.answer("filter", candidates, call.inputs, compute) if call.names is not None else compute()


def _filter_answer(call: Call, candidates: Candidates) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The ExtenderFilterResult, and why the pod fits none of the nodes (empty when one passes)."""
    state = call.state.cycle(call.inputs, call.index)
    by_plugin = filter_table(state, candidates.table, call.state.config)
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
            names if names is not None else [_item_name(item, position) for position, item in enumerate(items or [])]
        )
        return _host_priorities(call, candidates, requested), ()

    return (call.state.answer("prioritize", candidates, call.inputs, compute) if names is not None else compute())[0]


async def prioritize_handler(request: web.Request) -> web.Response:
    started = time.perf_counter()
    call = await _call(request)
    if isinstance(call, web.Response):
        return call
    body = prioritize_body(call)
    request.app[METRICS_KEY].latency.labels("prioritize").observe(time.perf_counter() - started)
    return web.Response(body=body, content_type="application/json")


def build_app(state: ExtenderState, notifier: PodNotifier | None = None) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY)
    app[STATE_KEY] = state
    app[NOTIFIER_KEY] = notifier or PodNotifier()
    app[METRICS_KEY] = ExtenderMetrics.create()
    app.router.add_post("/filter", filter_handler)
    app.router.add_post("/prioritize", prioritize_handler)
    add_probes(app, state.ready, "cluster cache not synced yet", app[METRICS_KEY].registry)
    return app


async def serve(
    app: web.Application,
    host: str,
    port: int,
    tls: ReloadingTLS | None,
    stop: asyncio.Event,
    reload_interval: float = 10.0,
) -> None:
    """Serve the extender ``app`` (``build_app``) until ``stop`` is set."""
    # Answers allocate thousands of small objects per request: a larger first generation keeps the collector
    # from running several times a request. Set once, for the process, never on the request path.
    gc.set_threshold(50_000, 20, 20)
    await serve_app(app, "extender", "/filter", host, port, tls, stop, reload_interval)
