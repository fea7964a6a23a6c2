"""``netaware run``: the chosen components in one process, until a stop flag is set.

kopf runs the CRD controllers (appgroup, networktopology, nodeslo); the descheduler is its own
task with its own watches. Credentials: in-cluster, else the kubeconfig, or ``server`` for a
plain-HTTP API server (the embedded emulator). Probes and metrics are served on ``health_port``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import kopf
from aiohttp import web
from prometheus_client import CollectorRegistry

from operators.controllers.descheduler import DeschedulerMetrics, run_descheduler
from operators.controllers.kube import ApiClientFactory, cluster_api_client, url_api_client
from operators.controllers.registry import COMPONENTS, ControllerOptions, build_registry, configure
from operators.engine.descheduler_policy import DeschedulerPolicy
from operators.serving import add_probes

logger = logging.getLogger("netaware.run")

DESCHEDULER = "descheduler"
ALL_COMPONENTS = (*COMPONENTS, DESCHEDULER)
DEFAULT_COMPONENTS = tuple(COMPONENTS)


@dataclass
class RunOptions:
    components: tuple[str, ...] = DEFAULT_COMPONENTS
    server: str | None = None  # a plain-HTTP API server (the emulator); None: in-cluster or kubeconfig
    policy: DeschedulerPolicy | None = None
    controllers: ControllerOptions = field(default_factory=ControllerOptions)
    health_address: str = "0.0.0.0"
    health_port: int | None = None  # None: no probe/metrics server
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

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
            clusterwide=True,
            standalone=True,
            stop_flag=own_stop,
            ready_flag=ready,
        )
    )
    relay = asyncio.create_task(_relay(stop, own_stop))
    try:
        await asyncio.wait_for(ready.wait(), timeout=30)
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
    """Run until ``stop`` is set; ``started`` is set once every component is up."""
    unknown = sorted(set(options.components) - set(ALL_COMPONENTS))
    if unknown:
        raise ValueError(f"unknown components {', '.join(unknown)}; expected some of {', '.join(ALL_COMPONENTS)}")
    kopf_components = tuple(name for name in options.components if name in COMPONENTS)
    tasks: list[asyncio.Task[None]] = []
    ready = {"kopf": not kopf_components}
    async with contextlib.AsyncExitStack() as stack:
        if options.health_port is not None:
            runner = web.AppRunner(_probe_app(options, lambda: all(ready.values())), access_log=None)
            await runner.setup()
            stack.push_async_callback(runner.cleanup)
            await web.TCPSite(runner, options.health_address, options.health_port).start()
            logger.info("probes and metrics on http://%s:%d/metrics", options.health_address, options.health_port)
        if kopf_components:
            tasks.append(await stack.enter_async_context(kopf_operator(kopf_components, options, stop)))
            ready["kopf"] = True
        if DESCHEDULER in options.components:
            if options.policy is None:
                raise ValueError("the descheduler needs a policy")
            metrics = DeschedulerMetrics.create(options.registry)
            tasks.append(
                asyncio.create_task(run_descheduler(options.api_client_factory(), options.policy, stop, metrics))
            )
        logger.info("running %s", ", ".join(options.components))
        if started is not None:
            started.set()
        await stop.wait()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _probe_app(options: RunOptions, ready: Any) -> web.Application:
    app = web.Application(client_max_size=1024)
    add_probes(app, ready, "components starting", options.registry)
    return app
