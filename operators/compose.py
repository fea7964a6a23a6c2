"""The composition root: each live component assembled from its settings, in one place.

``netaware webhook``, ``netaware extender`` and ``netaware run`` (the CLI) and ``netaware demo`` build their
components here and nowhere else: where a component reads the cluster from (a snapshot, or watches through an
API client), what it keeps, and the application it serves. The CLI only parses flags; the demo only drives.

Each live component's long-running tasks (its watches, the extender's index follower, the probe's and the agent's
loops) run under one :class:`~operators.supervision.Supervisor` per component, whose problem is its ``/healthz``
and whose restarts are counted in its ``/metrics``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from operators.agent.enforce import Backend
from operators.agent.kernel import Kernel
from operators.agent.live import Agent, AgentMetrics, AgentOptions, agent_kinds
from operators.api.config.scheduler import SchedulerConfig
from operators.engine.cluster.bandwidth import Accounting
from operators.engine.cluster.snapshot import Snapshot
from operators.extender.admission import AdmittedPods
from operators.extender.ahead import PlansAhead
from operators.extender.answers import ExtenderState
from operators.extender.live import KINDS as LIVE_INDEX_KINDS
from operators.extender.live import LIVE_KEY, LiveIndex
from operators.extender.nominations import PodNominator
from operators.extender.server import PodNotifier
from operators.extender.server import build_app as extender_app
from operators.kube import api_client_factory
from operators.probe import ProbeMetrics, ProbeOptions, Prober, probe_cache, serve_endpoint
from operators.runtime import RunOptions, run
from operators.serving import Runner, add_probes
from operators.sources.cache import ClusterCache
from operators.sources.kinds import Kind
from operators.supervision import Supervisor
from webhooks.placement import Placement
from webhooks.server import METRICS_KEY as WEBHOOK_METRICS_KEY
from webhooks.server import NamespaceNotifier
from webhooks.server import build_app as webhook_app
from webhooks.view import ClusterView


@dataclass(frozen=True)
class ClusterSource:
    """Where a component reads the cluster: a fixed ``snapshot`` (``-f``), else watches through the API server at
    ``server`` (plain HTTP: the emulator) or the one the kubeconfig (or in-cluster credentials) names."""

    snapshot: Snapshot | None = None
    server: str | None = None
    kubeconfig: str | None = None


@contextlib.asynccontextmanager
async def webhook(
    source: ClusterSource,
    gate_by_default: bool = False,
    resources: Accounting | None = None,
    scheduler_name: str = "",
    plans_keep_scheduler: bool = False,
    placement: Placement | None = None,
) -> AsyncIterator[web.Application]:
    """The mutating webhook's application; with a live source, its AppGroups and Namespaces are watched (and
    Events posted) while inside. ``gate_by_default``: every AppGroup's pods get the topology-order gate unless
    the AppGroup opts out; ``resources``: pods request their bandwidth as that mode's extended resources;
    ``scheduler_name``: the scheduler AppGroups' pods are sent to (but the pods of AppGroups released by plan, with
    ``plans_keep_scheduler``); ``placement``: the extender's, asked for plan-ungated pods."""
    if source.snapshot is not None:
        yield webhook_app(
            ClusterView.from_snapshot(source.snapshot),
            gate_by_default=gate_by_default,
            resources=resources,
            scheduler_name=scheduler_name,
            plans_keep_scheduler=plans_keep_scheduler,
            placement=placement,
        )
        return
    view = ClusterView()
    tasks = Supervisor(CollectorRegistry())
    async with following(source, view.follow, tasks) as api:
        app = webhook_app(
            view,
            notifier=NamespaceNotifier(api),
            gate_by_default=gate_by_default,
            resources=resources,
            supervisor=tasks,
            scheduler_name=scheduler_name,
            plans_keep_scheduler=plans_keep_scheduler,
            placement=placement,
        )
        view.on_namespace_deleted(app[WEBHOOK_METRICS_KEY].forget_namespace)
        yield app


@contextlib.asynccontextmanager
async def extender(
    source: ClusterSource, config: SchedulerConfig, nominate_from_nodes: int = 0, place_at_admission: bool = False
) -> AsyncIterator[web.Application]:
    """The scheduler extender's application; with a live source, the kinds its plugins read are watched, and the
    pods of plan-ungated plans nominated to their planned nodes on clusters of ``nominate_from_nodes`` nodes or
    more (0: never)."""
    if source.snapshot is not None:
        snapshot = source.snapshot
        yield extender_app(ExtenderState(lambda: snapshot, config))
        return
    cache = ClusterCache(LIVE_INDEX_KINDS)
    live = LiveIndex(cache, config.bandwidth.default_node_bandwidth)
    tasks = Supervisor(CollectorRegistry())
    index = in_background(lambda stop: tasks.run("extender-index", lambda: live.follow(stop), stop.is_set))
    async with following(source, cache.follow, tasks) as api, index:
        state = ExtenderState(cache.snapshot, config, lambda: live.ready, indexes=live.current, live=live)
        if place_at_admission:  # before the application: it serves the placement webhook only then
            state.follower.admitted = AdmittedPods(live.count)
            cache.subscribe(state.follower.admitted.on_changes)
        app = extender_app(state, PodNotifier(api), supervisor=tasks)
        app[LIVE_KEY] = live
        async with contextlib.AsyncExitStack() as nominating:
            if nominate_from_nodes:
                nominator = PodNominator(api, tasks.registry)
                state.follower.nominate, state.follower.nominate_from_nodes = nominator.nominate, nominate_from_nodes
                nominating.push_async_callback(nominator.close)  # after the planning below has stopped
                ahead = PlansAhead(state)
                cache.subscribe(ahead.on_changes)
                await nominating.enter_async_context(
                    in_background(lambda stop: tasks.run("extender-plans-ahead", lambda: ahead.run(stop), stop.is_set))
                )
            yield app


@contextlib.asynccontextmanager
async def operator(options: RunOptions) -> AsyncIterator[asyncio.Task[None]]:
    """``netaware run``'s components (controllers, descheduler) running in the background while inside."""
    async with in_background(lambda stop: run(options, stop)) as task:
        yield task


@contextlib.asynccontextmanager
async def in_background(
    start: Callable[[asyncio.Event], Coroutine[Any, Any, None]],
) -> AsyncIterator[asyncio.Task[None]]:
    """``start(stop)`` as a task while inside; on leaving, ``stop`` is set and the task awaited."""
    stop = asyncio.Event()
    task = asyncio.create_task(start(stop))
    try:
        yield task
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def following(source: ClusterSource, follow: Any, supervisor: Supervisor | None = None) -> AsyncIterator[Any]:
    """An API client for ``source`` and ``follow(api, stop)`` running on it while inside (under ``supervisor``)."""
    api = await api_client_factory(source.server, source.kubeconfig)()
    tasks = supervisor or Supervisor()
    try:
        async with in_background(lambda stop: tasks.run("watch", lambda: follow(api, stop), stop.is_set)):
            yield api
    finally:
        await api.close()


@contextlib.asynccontextmanager
async def health_endpoints(
    ready: Callable[[], bool], not_ready: str, tasks: Supervisor, address: str, port: int
) -> AsyncIterator[None]:
    """``/healthz`` (``tasks``' problem), ``/readyz`` (``ready()`` and every task running, else ``not_ready``) and
    ``/metrics`` of ``tasks``' registry on ``address:port`` while inside (port 0: none)."""
    app = web.Application()
    registries = [tasks.registry] if tasks.registry is not None else []
    add_probes(app, lambda: ready() and tasks.running(), not_ready, *registries, health=tasks.problem)
    runner = Runner(app)
    await runner.setup()
    try:
        if port:
            await web.TCPSite(runner, address, port).start()
        yield
    finally:
        await runner.cleanup()


async def probe(source: ClusterSource, options: ProbeOptions, health_port: int, stop: asyncio.Event) -> None:
    """`netaware probe` until ``stop``: the endpoint, the measurer and publisher, and ``/healthz``, ``/readyz``
    (peers listed) and ``/metrics`` on ``health_port`` (0: none)."""
    cache = probe_cache(options)
    metrics = ProbeMetrics()
    tasks = Supervisor(metrics.registry)
    endpoint = await serve_endpoint(options.listen_address, options.port, options.delay)
    ready = lambda: cache.ready  # noqa: E731
    health = health_endpoints(ready, "peers not listed yet", tasks, options.listen_address, health_port)
    try:
        async with health, following(source, cache.follow, tasks) as api:
            await Prober(options, cache, metrics).run(api, stop, tasks)
    finally:
        endpoint.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(endpoint.wait_closed(), 2.0)


async def agent(
    source: ClusterSource,
    kernel: Kernel,
    backend: Backend,
    options: AgentOptions,
    health_port: int,
    address: str,
    stop: asyncio.Event,
) -> None:
    """`netaware agent` until ``stop``: the enforcement loop, and ``/healthz``, ``/readyz`` (listed and one pass
    made) and ``/metrics`` on ``health_port`` (0: none)."""
    cache = ClusterCache(agent_kinds(options.node))
    metrics = AgentMetrics()
    tasks = Supervisor(metrics.registry)
    worker = Agent(kernel, backend, cache, options, metrics)
    async with (
        health_endpoints(lambda: worker.ready, "not listed or enforced yet", tasks, address, health_port),
        following(source, cache.follow, tasks) as api,
    ):
        await worker.run(api, stop, tasks)


async def snapshot_of(source: ClusterSource, kinds: tuple[Kind, ...]) -> Snapshot:
    """The cluster as one snapshot: ``kinds`` listed once through the same cache the live components use (the
    fixed snapshot of ``source`` when it has one). The caller bounds the time (``asyncio.timeout``)."""
    if source.snapshot is not None:
        return source.snapshot
    cache = ClusterCache(kinds)
    async with following(source, cache.follow):
        await cache.wait_synced()
        return cache.snapshot()
