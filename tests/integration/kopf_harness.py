"""Run the real kopf operator from ``operators.controllers`` against the emulator, in the test's loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import kopf

from operators.controllers.kube import url_api_client
from operators.controllers.registry import ControllerOptions, build_registry, configure


@contextlib.asynccontextmanager
async def running_operator(
    api_url: str, components: tuple[str, ...] = ("appgroup",), options: ControllerOptions | None = None
) -> AsyncIterator[None]:
    registry = build_registry(components, api_client_factory=url_api_client(api_url), options=options)

    @kopf.on.login(registry=registry)  # type: ignore[arg-type]
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=api_url.rstrip("/"), insecure=True, scheme="Bearer", token="test")

    settings = kopf.OperatorSettings()
    configure(settings)
    settings.posting.enabled = True
    settings.scanning.disabled = True
    stop = asyncio.Event()
    ready = asyncio.Event()
    logging.getLogger("kopf").setLevel(logging.INFO)
    task = asyncio.create_task(
        kopf.operator(
            registry=registry,
            settings=settings,
            clusterwide=True,
            standalone=True,
            stop_flag=stop,
            ready_flag=ready,
        )
    )
    await asyncio.wait_for(ready.wait(), timeout=10)
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=10)
