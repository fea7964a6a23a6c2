"""Run the real kopf operator from ``operators.controllers`` against the emulator (kopf in its own thread)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from operators.api.config.controllers import ControllerOptions
from operators.runtime import RunOptions, kopf_operator


@contextlib.asynccontextmanager
async def running_operator(
    api_url: str, components: tuple[str, ...] = ("appgroup",), options: ControllerOptions | None = None
) -> AsyncIterator[None]:
    logging.getLogger("kopf").setLevel(logging.INFO)
    run_options = RunOptions(components, server=api_url, controllers=options or ControllerOptions())
    async with kopf_operator(components, run_options, asyncio.Event()):
        yield
