"""``netaware run``: the chosen components in one process, until a stop flag is set.

kopf runs the CRD controllers (appgroup, networktopology, nodeslo); the descheduler is its own
task with its own watches. Credentials: in-cluster, else the kubeconfig, or ``server`` for a
plain-HTTP API server (the embedded emulator). Probes and metrics are served on ``health_port``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import kopf
from aiohttp import web
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.leaderelection.electionconfig import Config
from kubernetes_asyncio.leaderelection.leaderelection import LeaderElection
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock
from prometheus_client import CollectorRegistry

from operators.controllers import metrics as controller_metrics
from operators.controllers.descheduler import DeschedulerMetrics, run_descheduler
from operators.controllers.kube import ApiClientFactory, cluster_api_client, send_json, url_api_client
from operators.controllers.registry import COMPONENTS, ControllerOptions, build_registry, configure
from operators.engine.descheduler_policy import DeschedulerPolicy
from operators.serving import add_probes

logger = logging.getLogger("netaware.run")

DESCHEDULER = "descheduler"
ALL_COMPONENTS = (*COMPONENTS, DESCHEDULER)
DEFAULT_COMPONENTS = tuple(COMPONENTS)


@dataclass(frozen=True)
class LeaderElectionOptions:
    """A coordination.k8s.io/v1 Lease; only its holder runs the components."""

    namespace: str = "default"
    name: str = "netaware"
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}")
    lease_duration: int = 15  # whole seconds: the Lease's leaseDurationSeconds
    renew_deadline: float = 10.0
    retry_period: float = 2.0


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
    signals: bool = False  # the process's SIGTERM/SIGINT set the stop flag (the CLI), not kopf's own
    namespaces: tuple[str, ...] = ()  # namespaced objects only from these (cluster-scoped ones always); (): all

    def api_client_factory(self) -> ApiClientFactory:
        return url_api_client(self.server) if self.server else cluster_api_client


@contextlib.asynccontextmanager
async def kopf_operator(
    components: tuple[str, ...], options: RunOptions, stop: asyncio.Event
) -> AsyncIterator[asyncio.Task[None]]:
    """kopf with our controllers, started and ready inside the block, stopped when it ends."""
    registry = build_registry(components, api_client_factory=options.api_client_factory(), options=options.controllers)
    if options.server:
        server = options.server.rstrip("/")

        @kopf.on.login(registry=registry)
        def login(**_: Any) -> kopf.ConnectionInfo:
            return kopf.ConnectionInfo(server=server, insecure=True, scheme="Bearer", token="emulator")

    settings = kopf.OperatorSettings()
    configure(settings)
    settings.posting.enabled = True
    settings.scanning.disabled = True  # the CRDs are installed with the chart, not discovered at runtime
    ready = asyncio.Event()
    own_stop = asyncio.Event()
    task = asyncio.create_task(
        kopf.operator(
            registry=registry,
            settings=settings,
            clusterwide=not options.namespaces,
            namespaces=list(options.namespaces),
            standalone=True,
            stop_flag=own_stop,
            ready_flag=ready,
        )
    )
    relay = asyncio.create_task(_relay(stop, own_stop))
    try:
        await asyncio.wait_for(ready.wait(), timeout=30)
        if options.signals:  # kopf took SIGTERM/SIGINT for itself; the process's stop flag is ours
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, stop.set)
        yield task
    finally:
        own_stop.set()
        relay.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=30)


async def _relay(source: asyncio.Event, target: asyncio.Event) -> None:
    await source.wait()
    target.set()


async def run(options: RunOptions, stop: asyncio.Event, started: asyncio.Event | None = None) -> None:
    """Run until ``stop`` is set; ``started`` is set once every component is up (on the leader, with
    leader election). Losing the lease stops everything, as controller-runtime does: the pod restarts
    as a follower."""
    unknown = sorted(set(options.components) - set(ALL_COMPONENTS))
    if unknown:
        raise ValueError(f"unknown components {', '.join(unknown)}; expected some of {', '.join(ALL_COMPONENTS)}")
    if DESCHEDULER in options.components and options.policy is None:
        raise ValueError("the descheduler needs a policy")
    components_up = asyncio.Event()
    async with contextlib.AsyncExitStack() as stack:
        if options.health_port is not None:
            # Followers are ready too (they only wait for the lease); the leader once its components are up.
            ready = (lambda: True) if options.leader_election else components_up.is_set
            runner = web.AppRunner(_probe_app(options, ready), access_log=None)
            await runner.setup()
            stack.push_async_callback(runner.cleanup)
            await web.TCPSite(runner, options.health_address, options.health_port).start()
            logger.info("probes and metrics on http://%s:%d/metrics", options.health_address, options.health_port)
        if options.leader_election is None:
            await _components(options, stop, components_up, started)
        else:
            await _as_leader(options, options.leader_election, stop, components_up, started)


async def _components(
    options: RunOptions, stop: asyncio.Event, up: asyncio.Event, started: asyncio.Event | None
) -> None:
    kopf_components = tuple(name for name in options.components if name in COMPONENTS)
    tasks: list[asyncio.Task[None]] = []
    async with contextlib.AsyncExitStack() as stack:
        if kopf_components:
            tasks.append(await stack.enter_async_context(kopf_operator(kopf_components, options, stop)))
        if DESCHEDULER in options.components and options.policy is not None:
            metrics = DeschedulerMetrics.create(options.registry)
            tasks.append(
                asyncio.create_task(run_descheduler(options.api_client_factory(), options.policy, stop, metrics))
            )
        logger.info("running %s", ", ".join(options.components))
        up.set()
        if started is not None:
            started.set()
        await stop.wait()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _as_leader(
    options: RunOptions,
    election: LeaderElectionOptions,
    stop: asyncio.Event,
    up: asyncio.Event,
    started: asyncio.Event | None,
) -> None:
    """Wait for the Lease, run the components while holding it; on SIGTERM stop them, then release it."""
    api = await options.api_client_factory()()
    lock = LeaseLock(election.name, election.namespace, election.identity, api)
    leading = asyncio.Event()  # the components were started (they stop when ``stop`` is set)
    finished = asyncio.Event()  # ... and have stopped, in-flight writes done
    lost = asyncio.Event()

    async def lead() -> None:
        logger.info("%s acquired the lease %s/%s", election.identity, election.namespace, election.name)
        leading.set()
        try:
            await _components(options, stop, up, started)
        finally:
            finished.set()

    async def on_lost() -> None:
        if not stop.is_set():
            logger.error("%s lost the lease %s/%s: stopping", election.identity, election.namespace, election.name)
            lost.set()
            stop.set()

    config = Config(
        lock,
        lease_duration=election.lease_duration,
        renew_deadline=election.renew_deadline,
        retry_period=election.retry_period,
        onstarted_leading=lead,
        onstopped_leading=on_lost,
    )
    candidate = asyncio.create_task(LeaderElection(config).run())
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait((candidate, stopping), return_when=asyncio.FIRST_COMPLETED)
        if candidate.done() and not candidate.cancelled() and candidate.exception() is not None:
            stop.set()
            raise RuntimeError(f"leader election failed: {candidate.exception()}")
        await stop.wait()
        if leading.is_set() and not lost.is_set():
            await finished.wait()
    finally:
        stopping.cancel()
        candidate.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await candidate
        if leading.is_set() and not lost.is_set():
            await _release(api, election)
        await api.close()


async def _release(api: Any, election: LeaderElectionOptions) -> None:
    """Hand the lease back (expired, no holder) so a follower takes over at its next retry."""
    past = "1970-01-01T00:00:00.000000Z"
    body = {"spec": {"holderIdentity": "", "renewTime": past, "acquireTime": past, "leaseDurationSeconds": 1}}
    path = f"/apis/coordination.k8s.io/v1/namespaces/{election.namespace}/leases/{election.name}"
    try:
        await send_json(api, "PATCH", path, body, "application/merge-patch+json")
        logger.info("released the lease %s/%s", election.namespace, election.name)
    except ApiException as error:  # the follower takes over when the lease expires anyway
        logger.warning("could not release the lease: %s", error.status)


def _probe_app(options: RunOptions, ready: Any) -> web.Application:
    app = web.Application(client_max_size=1024)
    add_probes(app, ready, "components starting", options.registry, controller_metrics.REGISTRY)
    return app
