"""Slow or half-open clients cannot hold the servers' connections (issue 14, point 11)."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from operators import serving
from operators.api.config.scheduler import SchedulerConfig
from operators.engine.cluster.snapshot import Snapshot
from operators.extender.answers import ExtenderState
from operators.extender.server import build_app
from tests.webhooks.conftest import example_view
from webhooks.configuration import PATH as WEBHOOK_PATH
from webhooks.server import build_app as webhook_app

IDLE = 3.0  # the idle timeout in these tests (the head's and the body's: 0.5 s)
HEALTH = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.fixture
async def port(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[int]:
    monkeypatch.setattr(serving, "HEADER_TIMEOUT", 0.5)
    monkeypatch.setattr(serving, "BODY_TIMEOUT", 0.5)
    monkeypatch.setattr(serving, "IDLE_TIMEOUT", IDLE)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    stop = asyncio.Event()
    app: web.Application = build_app(ExtenderState(Snapshot, serving_config()))
    task = asyncio.create_task(serving.serve_app(app, "extender", "/filter", "127.0.0.1", free, None, stop))
    await asyncio.sleep(0.2)
    yield free
    stop.set()
    await task


def serving_config() -> SchedulerConfig:
    return SchedulerConfig()


async def read_all(reader: asyncio.StreamReader, within: float) -> bytes:
    return await asyncio.wait_for(reader.read(), timeout=within)


async def test_a_request_head_that_never_completes_is_closed(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")  # no blank line
    await writer.drain()
    assert await read_all(reader, within=5) == b""  # closed by the server, no answer
    writer.close()


async def test_a_body_sent_byte_by_byte_too_slowly_is_a_408(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(4096), timeout=5)  # the answer, before any lingering close
    assert answer.startswith(b"HTTP/1.1 408"), answer[:80]
    if b"did not arrive within" not in answer:
        answer += await asyncio.wait_for(reader.read(4096), timeout=5)
    assert b"did not arrive within" in answer
    writer.close()


async def test_a_prompt_request_is_served(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    await writer.drain()
    assert (await read_all(reader, within=5)).startswith(b"HTTP/1.1 200")
    writer.close()


async def answer_on(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
    writer.write(HEALTH)
    await writer.drain()
    return await asyncio.wait_for(reader.readuntil(b"ok"), timeout=5)


async def test_an_idle_connection_is_kept_past_the_head_timeout_until_the_idle_timeout(port: int) -> None:
    """The caller (Go's http.Transport: 90 s) closes an idle connection before the server (IDLE_TIMEOUT, 120 s): a
    server closing it first races the caller's next request on it, which fails reset."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    assert (await answer_on(reader, writer)).startswith(b"HTTP/1.1 200")
    await asyncio.sleep(1.0)  # idle twice the head's timeout
    assert (await answer_on(reader, writer)).startswith(b"HTTP/1.1 200")  # the same connection serves
    await asyncio.sleep(IDLE + 0.5)
    assert await read_all(reader, within=5) == b""  # closed once idle longer than IDLE_TIMEOUT
    writer.close()


async def test_a_head_begun_on_a_kept_connection_must_end_within_the_head_timeout(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    assert (await answer_on(reader, writer)).startswith(b"HTTP/1.1 200")
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # the next head, never ended
    await writer.drain()
    started = asyncio.get_running_loop().time()
    assert await read_all(reader, within=5) == b""
    assert asyncio.get_running_loop().time() - started < IDLE - 1  # the head's timeout (0.5 s), not the idle one
    writer.close()


@pytest.fixture(params=["extender", "webhook"])
async def either_server(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[int, str]]:
    """The port and the POST path of the extender or of the webhook, both reading their bodies through serving."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    stop = asyncio.Event()
    if request.param == "extender":
        app, path = build_app(ExtenderState(Snapshot, serving_config())), "/filter"
    else:
        app, path = webhook_app(example_view()), WEBHOOK_PATH
    task = asyncio.create_task(serving.serve_app(app, request.param, path, "127.0.0.1", free, None, stop))
    await asyncio.sleep(0.2)
    yield free, path
    stop.set()
    await task


async def test_a_client_that_goes_away_mid_body_leaves_no_traceback_and_the_server_serves_on(
    either_server: tuple[int, str], caplog: pytest.LogCaptureFixture
) -> None:
    """The API server killed while it sends an AdmissionReview (the chaos test): the read fails with the connection
    lost. Nobody is left to answer, and it is not the server's error: no 500, no traceback in the log."""
    port, path = either_server
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n".encode()
                 + b"Content-Length: 100\r\n\r\n{")  # fmt: skip
    await writer.drain()
    await asyncio.sleep(0.1)  # the handler is reading the body
    writer.close()
    await asyncio.sleep(0.2)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    assert (await answer_on(reader, writer)).startswith(b"HTTP/1.1 200")
    writer.close()
    errors = [record for record in caplog.records if record.levelno >= logging.ERROR or record.exc_info]
    assert errors == [], [record.getMessage() for record in errors]
