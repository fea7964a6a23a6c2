"""``netaware run``: the chosen components in one process, until a stop flag is set.

kopf runs the CRD controllers (appgroup, networktopology, nodeslo); the descheduler is its own
task with its own watches. Credentials: in-cluster, else the kubeconfig, or ``server`` for a
plain-HTTP API server (the embedded emulator). Probes and metrics are served on ``health_port``.

Every long-running task is supervised (:mod:`operators.supervision`): the controllers' loops (status writer,
gate keeper, NetworkTopology loops, work queues) and the descheduler are restarted with backoff when they fail, and
one that keeps failing makes ``/healthz`` answer 500 naming it, so the kubelet restarts the pod. kopf itself is a
component: when it ends or fails before the stop flag is set (it gives up after its API retries), ``/healthz``
answers 500 naming it, the other components stop, the Lease is released and :func:`run` raises
:class:`ComponentFailed`, so the process exits non-zero, Kubernetes restarts it and a follower takes over. A
process that keeps its Lease while doing nothing (a zombie) is the failure this prevents.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import kopf
from aiohttp import web
from prometheus_client import CollectorRegistry, Gauge

from operators.api.config.controllers import ControllerOptions
from operators.api.config.descheduler import DeschedulerPolicy
from operators.controllers import metrics as controller_metrics
from operators.controllers.descheduler import followed_kinds, run_descheduler
from operators.controllers.descheduler_metrics import DeschedulerMetrics
from operators.controllers.registry import CACHED_KINDS, COMPONENTS, PLAN_KINDS, build_registry, configure
from operators.election import LeaderElectionOptions, as_leader
from operators.kube import REQUEST_TIMEOUT, ApiClientFactory, api_client_factory, read_json
from operators.serving import Runner, add_probes
from operators.sources.cache import ClusterCache
from operators.sources.kinds import Kind
from operators.supervision import Supervisor

logger = logging.getLogger("netaware.run")

DESCHEDULER = "descheduler"
ALL_COMPONENTS = (*COMPONENTS, DESCHEDULER)
# nodebandwidth is chosen with the bandwidth guarantee (the chart's bandwidth.guarantee: resources), not by default
DEFAULT_COMPONENTS = tuple(name for name in COMPONENTS if name != "nodebandwidth")
FAILURE_LINGER = 2.0  # seconds /healthz keeps reporting a failed component before the process exits


class ComponentFailed(RuntimeError):
    """A component ended or failed while it should have been running."""


@dataclass
class Health:
    """What ``/healthz`` reports: "" while every component runs, else why the process is going down."""

    problem: str = ""


@dataclass
class RunOptions:
    components: tuple[str, ...] = DEFAULT_COMPONENTS
    server: str | None = None  # a plain-HTTP API server (the emulator); None: in-cluster or kubeconfig
    policy: DeschedulerPolicy | None = None
    controllers: ControllerOptions = field(default_factory=ControllerOptions)
    health_address: str = "0.0.0.0"
    health_port: int | None = None  # None: no probe/metrics server
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    leader_election: LeaderElectionOptions | None = None  # None: run the components at once (one replica)
    # With leader election: followers list and watch the cluster too, so a new leader decides from a synced cache
    # within seconds of taking the Lease (False: the cache is built after the Lease is won, as before 0.2.0).
    warm_standby: bool = True
    signals: bool = False  # the process's SIGTERM/SIGINT set the stop flag (the CLI), not kopf's own
    namespaces: tuple[str, ...] = ()  # namespaced objects only from these (cluster-scoped ones always); (): all
    api_error_backoffs: tuple[float, ...] | None = None  # kopf's retry delays for API errors; None: kopf's own
    health: Health = field(default_factory=Health)

    kubeconfig: str | None = None  # None: in-cluster, else $KUBECONFIG or ~/.kube/config

    def api_client_factory(self) -> ApiClientFactory:
        return api_client_factory(self.server, self.kubeconfig)

    @functools.cached_property
    def supervisor(self) -> Supervisor:
        """The process's one supervisor (its restarts counted in ``registry``)."""
        return Supervisor(self.registry)

    def problem(self) -> str:
        """Why the process is unhealthy ("" when it is not): a component gone, or tasks that keep failing."""
        return self.health.problem or self.supervisor.problem()


def cached_kinds(
    components: tuple[str, ...], policy: DeschedulerPolicy | None, plans: bool = False
) -> tuple[Kind, ...]:
    """What the process's cluster cache follows: the union of what its components read (with ``plans``, the
    AppGroup controller's plans read every pod and the NetworkTopologies)."""
    kinds = [kind for name in components for kind in CACHED_KINDS.get(name, ())]
    if DESCHEDULER in components and policy is not None:
        kinds.extend(followed_kinds(policy))
    if plans and "appgroup" in components:
        kinds.extend(PLAN_KINDS)
    return tuple(kinds)


@contextlib.asynccontextmanager
async def cluster_cache(options: RunOptions, components: tuple[str, ...]) -> AsyncIterator[ClusterCache]:
    """The process's one cluster cache, following the cluster while inside (on this event loop)."""
    kinds = cached_kinds(components, options.policy, options.controllers.appgroup.plans)
    cache = ClusterCache(kinds, namespaces=options.namespaces)
    api = await options.api_client_factory()()
    stop = asyncio.Event()
    task = options.supervisor.start("watch", lambda: cache.follow(api, stop), stop.is_set)
    try:
        yield cache
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await api.close()


@contextlib.asynccontextmanager
async def kopf_operator(
    components: tuple[str, ...], options: RunOptions, stop: asyncio.Event, cache: ClusterCache | None = None
) -> AsyncIterator[asyncio.Future[None]]:
    """kopf with our controllers, started and ready inside the block, stopped when it ends; they read pods and
    nodes from ``cache`` (one of their own when None).

    kopf runs in a thread with its own event loop, as its documentation asks: when it exits it cancels
    every task of its loop, and in ours that would include the supervisor and the leader election.
    The future completes when kopf ends (its exception, if it failed)."""
    if cache is None:
        async with cluster_cache(options, components) as own, kopf_operator(components, options, stop, own) as task:
            yield task
        return
    registry = build_registry(
        cache,
        components,
        api_client_factory=options.api_client_factory(),
        options=options.controllers,
        supervisor=options.supervisor,
    )
    if options.server:
        server = options.server.rstrip("/")

        @kopf.on.login(registry=registry)
        def login(**_: Any) -> kopf.ConnectionInfo:
            return kopf.ConnectionInfo(server=server, insecure=True, scheme="Bearer", token="emulator")

    else:
        # A registry of our own gets none of kopf's fallback logins (only its global registry does): without
        # these, kopf has no credentials on a real cluster. In-cluster first, then $KUBECONFIG (--kubeconfig).
        kopf.on.login(id="service_account", registry=registry)(kopf.login_with_service_account)
        kopf.on.login(id="kubeconfig", registry=registry)(kopf.login_with_kubeconfig)

    settings = kopf.OperatorSettings()
    configure(settings)
    settings.networking.request_timeout = REQUEST_TIMEOUT.total  # kopf's own default is 5 minutes
    settings.networking.connect_timeout = REQUEST_TIMEOUT.sock_connect
    if options.api_error_backoffs is not None:
        settings.networking.error_backoffs = options.api_error_backoffs
    settings.posting.enabled = True
    settings.scanning.disabled = True  # the CRDs are installed with the chart, not discovered at runtime
    ready = threading.Event()  # kopf only sets it: no thread waits on it
    # The stop flag lives in kopf's own loop: kopf waits for a threading flag in an executor thread, which
    # would keep that loop from ever closing once kopf has failed on its own.
    kopf_loop: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def operate_in_own_loop() -> None:
        own_stop = asyncio.Event()
        kopf_loop.append((asyncio.get_running_loop(), own_stop))
        await kopf.operator(
            registry=registry,
            settings=settings,
            clusterwide=not options.namespaces,
            namespaces=list(options.namespaces),
            standalone=True,
            stop_flag=own_stop,
            ready_flag=ready,
        )

    def operate() -> None:
        asyncio.run(operate_in_own_loop())

    def stop_kopf() -> None:
        for loop, own_stop in kopf_loop:
            with contextlib.suppress(RuntimeError):  # its loop is already closed
                loop.call_soon_threadsafe(own_stop.set)

    task = asyncio.ensure_future(asyncio.to_thread(operate))
    try:
        deadline = time.monotonic() + 30
        while not ready.is_set() and not task.done() and not stop.is_set():
            if time.monotonic() > deadline:
                raise TimeoutError("the controllers did not start within 30 s")
            await asyncio.sleep(0.05)
        yield task
    finally:
        stop_kopf()
        with contextlib.suppress(Exception):  # its failure is the supervisor's to report
            await asyncio.wait_for(asyncio.shield(task), timeout=30)


async def run(options: RunOptions, stop: asyncio.Event, started: asyncio.Event | None = None) -> None:
    """Run until ``stop`` is set; ``started`` is set once every component is up (on the leader, with
    leader election). Losing the lease stops everything, as controller-runtime does: the pod restarts
    as a follower. A component that ends on its own raises ``ComponentFailed`` (after the Lease is
    released)."""
    unknown = sorted(set(options.components) - set(ALL_COMPONENTS))
    if unknown:
        raise ValueError(f"unknown components {', '.join(unknown)}; expected some of {', '.join(ALL_COMPONENTS)}")
    if DESCHEDULER in options.components and options.policy is None:
        raise ValueError("the descheduler needs a policy")
    if options.signals:  # before anything starts: a SIGTERM during start-up stops us too
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
    await _check_credentials(options)
    components_up = asyncio.Event()
    async with contextlib.AsyncExitStack() as stack:
        warm = options.leader_election is not None and options.warm_standby
        cache = await stack.enter_async_context(cluster_cache(options, options.components)) if warm else None
        if options.health_port is not None:
            # A follower is ready once its cache has synced (a rollout replaces the leader only by a warm follower);
            # the leader once its components are up and run.
            def ready() -> bool:
                if not options.supervisor.running():
                    return False
                if components_up.is_set():
                    return True
                return options.leader_election is not None and (cache is None or cache.ready)

            runner = Runner(_probe_app(options, ready))
            await runner.setup()
            stack.push_async_callback(runner.cleanup)
            await web.TCPSite(runner, options.health_address, options.health_port).start()
            logger.info("probes and metrics on http://%s:%d/metrics", options.health_address, options.health_port)
        if options.leader_election is None:
            await _components(options, stop, components_up, started)
        else:
            leading = Gauge(
                "leader_election_master_status",
                "1 while this replica holds the Lease named (and runs the components), else 0; as client-go's.",
                ["name"],
                registry=options.registry,
            ).labels(options.leader_election.name)
            leading.set(0)
            await as_leader(
                options.api_client_factory(),
                options.leader_election,
                stop,
                lambda still_leader: _components(options, stop, components_up, started, still_leader, cache),
                leading.set,
            )
        if options.health.problem and options.health_port is not None:
            await asyncio.sleep(FAILURE_LINGER)  # the Lease is free already; probes and scrapes see why
    if options.health.problem:
        raise ComponentFailed(options.health.problem)


async def _check_credentials(options: RunOptions) -> None:
    """Fail fast, in one line, without credentials or without an API server (before kopf would retry forever)."""
    api = await options.api_client_factory()()
    try:
        await read_json(api, "/version")
    finally:
        await api.close()


async def _components(
    options: RunOptions,
    stop: asyncio.Event,
    up: asyncio.Event,
    started: asyncio.Event | None,
    still_leader: Callable[[], bool] = lambda: True,
    warm: ClusterCache | None = None,
) -> None:
    """Start the components (on ``warm``, the cache a follower kept, else a cache of their own), then wait for
    ``stop`` or for one of them to end (a failure: see ``Health``)."""
    kopf_components = tuple(name for name in options.components if name in COMPONENTS)
    tasks: dict[str, asyncio.Future[None]] = {}
    async with contextlib.AsyncExitStack() as stack:
        if warm is not None:
            cache = warm
            logger.info("leading from the cache kept as a follower (%s)", "synced" if warm.ready else "syncing")
        else:
            cache = await stack.enter_async_context(cluster_cache(options, options.components))
        if kopf_components:
            tasks["controllers"] = await stack.enter_async_context(kopf_operator(kopf_components, options, stop, cache))
        if DESCHEDULER in options.components and options.policy is not None:
            metrics = DeschedulerMetrics.create(options.registry)
            may_evict = lambda: still_leader() and not stop.is_set()  # noqa: E731
            tasks[DESCHEDULER] = asyncio.create_task(
                run_descheduler(
                    options.api_client_factory(),
                    options.policy,
                    cache,
                    stop,
                    metrics,
                    may_evict,
                    options.controllers.appgroup.plan_config,
                    options.supervisor,
                )
            )
        logger.info("running %s", ", ".join(options.components))
        up.set()
        if started is not None:
            started.set()
        stopping = asyncio.create_task(stop.wait())
        watched: list[asyncio.Future[Any]] = [stopping, *tasks.values()]
        await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        ended = [(name, task) for name, task in tasks.items() if task.done()]
        if ended and not stop.is_set():
            name, task = ended[0]
            error = None if task.cancelled() else task.exception()
            why = f"failed: {type(error).__name__}: {str(error)[:300]}" if error else "ended"
            options.health.problem = f"component {name} {why}; exiting"
            logger.error("%s (the Lease is released and the process exits non-zero)", options.health.problem)
            stop.set()
        for name, task in tasks.items():  # the controllers stop as the stack closes (kopf_operator)
            if name != "controllers":
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait_for(task, timeout=30)


def _probe_app(options: RunOptions, ready: Any) -> web.Application:
    app = web.Application(client_max_size=1024)
    add_probes(
        app,
        ready,
        "components starting, or a task waiting to be restarted",
        options.registry,
        controller_metrics.REGISTRY,
        health=options.problem,
    )
    return app
