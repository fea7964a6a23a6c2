from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import kmock
import pytest

from operators.emulator import ApiEmulator

pytestmark = pytest.mark.integration


class Api:
    """A small HTTP client for the emulator that returns (status, JSON body)."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session = session
        self.url = url

    async def call(
        self, method: str, path: str, body: Any = None, content_type: str | None = None, **params: str
    ) -> tuple[int, Any]:
        headers = {"Content-Type": content_type} if content_type else {}
        async with self.session.request(method, self.url + path, json=body, headers=headers, params=params) as response:
            return response.status, await response.json(content_type=None)


@pytest.fixture
async def emulator() -> AsyncIterator[ApiEmulator]:
    async with ApiEmulator() as emu, kmock.Server(emu) as server:
        emu.base_url = str(server.url).rstrip("/")
        yield emu


@pytest.fixture
async def api(emulator: ApiEmulator) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        yield Api(session, emulator.base_url)


async def start_run(
    emulator: ApiEmulator, *args: str, output: Any = None, server: str | None = None
) -> asyncio.subprocess.Process:
    """`netaware run --server <emulator> ARGS...` in its own process (stdout and stderr to ``output``); ``server``:
    another URL to reach the emulator by (a proxy in front of it)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "operators.cli",
        "run",
        "--server",
        server or emulator.base_url,
        *args,
        stdout=output if output is not None else asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.STDOUT,
    )


@contextlib.asynccontextmanager
async def following(emulator: ApiEmulator, source: Any) -> AsyncIterator[Any]:
    """``source.follow(client, stop)`` (a LiveSnapshot or the webhook's ClusterView) running against the
    emulator inside the block, as the composition root runs a component's watches; the API client is yielded."""
    from operators import compose

    async with compose.following(compose.ClusterSource(server=emulator.base_url), source.follow) as client:
        yield client


async def stop_replicas(*processes: asyncio.subprocess.Process) -> None:
    """SIGTERM every replica still running and wait for them (their exit codes are the caller's to check); one that
    SIGTERM does not end within 20 s is killed, so a failed test leaves no process behind, and the wait fails."""
    for process in processes:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(asyncio.gather(*(process.wait() for process in processes)), timeout=20)
    except TimeoutError:
        for process in processes:
            if process.returncode is None:
                process.kill()
                await process.wait()
        raise
