"""Transport faults through FaultyProxy: connections reset before or after the server applied a write, responses
stalled past a client's timeout, connections refused, a watch cut by a killed server. Clients see aiohttp's own
errors (kubernetes-asyncio does not wrap them in ApiException), which is what a loop must survive."""

from __future__ import annotations

import asyncio
import gc
import json
import ssl
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
import trustme
from aiohttp import web
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import watch
from kubernetes_asyncio.client.exceptions import ApiException

from operators.emulator import ApiEmulator
from operators.emulator.transport import FaultyProxy
from operators.kube import read_json, send_json, url_api_client
from tests.integration.conftest import Api

pytestmark = pytest.mark.integration

CM = "/api/v1/namespaces/default/configmaps"
MERGE = "application/merge-patch+json"
Patch = Callable[[FaultyProxy, str, dict[str, Any]], Awaitable[Any]]


@pytest.fixture
async def proxy(emulator: ApiEmulator) -> AsyncIterator[FaultyProxy]:
    upstream = urllib.parse.urlsplit(emulator.base_url)
    assert upstream.hostname and upstream.port
    async with FaultyProxy(upstream.hostname, upstream.port) as faulty:
        yield faulty


@pytest.fixture
async def configmap(api: Api) -> str:
    status, _ = await api.call("POST", CM, {"metadata": {"name": "a"}, "data": {"k": "1"}})
    assert status == 201
    return CM + "/a"


def data_of(emulator: ApiEmulator, name: str = "a") -> dict[str, str]:
    return dict((emulator.get_object("v1/configmaps", "default", name) or {}).get("data") or {})


async def patch_with_api_client(proxy: FaultyProxy, path: str, body: dict[str, Any]) -> Any:
    """kubernetes-asyncio, as operators.kube calls it."""
    api = await url_api_client(proxy.url)()
    try:
        return await send_json(api, "PATCH", path, body, MERGE)
    finally:
        await api.close()


async def patch_with_session(proxy: FaultyProxy, path: str, body: dict[str, Any]) -> Any:
    async with (
        aiohttp.ClientSession() as session,
        session.patch(proxy.url + path, json=body, headers={"Content-Type": MERGE}) as response,
    ):
        response.raise_for_status()
        return await response.json()


CLIENTS = pytest.mark.parametrize("patch", [patch_with_api_client, patch_with_session], ids=["api_client", "session"])


def assert_transport_error(error: BaseException) -> None:
    assert isinstance(error, aiohttp.ClientError), repr(error)
    assert not isinstance(error, ApiException), repr(error)


@CLIENTS
async def test_reset_once_the_answer_began_loses_the_answer_of_an_applied_write(
    emulator: ApiEmulator, proxy: FaultyProxy, configmap: str, patch: Patch
) -> None:
    proxy.reset_next(method="PATCH", when="response")
    with pytest.raises(aiohttp.ClientError) as caught:
        await patch(proxy, configmap, {"data": {"k": "2"}})
    assert_transport_error(caught.value)
    assert isinstance(caught.value, aiohttp.ClientPayloadError), repr(caught.value)  # head came, body cut
    assert data_of(emulator) == {"k": "2"}  # applied; only the answer was lost
    assert proxy.applied == {"reset_response": 1}

    patched = await patch(proxy, configmap, {"data": {"k": "3"}})
    assert patched["data"] == {"k": "3"}
    assert data_of(emulator) == {"k": "3"}


@CLIENTS
async def test_reset_before_the_request_reaches_the_server_applies_nothing(
    emulator: ApiEmulator, proxy: FaultyProxy, configmap: str, patch: Patch
) -> None:
    proxy.reset_next(when="request")
    with pytest.raises(aiohttp.ClientError) as caught:
        await patch(proxy, configmap, {"data": {"k": "2"}})
    assert_transport_error(caught.value)
    assert data_of(emulator) == {"k": "1"}
    assert proxy.applied == {"reset_request": 1}

    assert (await patch(proxy, configmap, {"data": {"k": "2"}}))["data"] == {"k": "2"}


async def test_a_stalled_response_outlasts_a_short_client_timeout(proxy: FaultyProxy, configmap: str) -> None:
    proxy.stall_next(2.0, times=2, method="GET")
    api = await url_api_client(proxy.url)()
    try:
        core = k8s.CoreV1Api(api)
        started = time.monotonic()
        with pytest.raises(TimeoutError) as caught:
            await core.read_namespaced_config_map("a", "default", _request_timeout=0.5)
        assert 0.4 < time.monotonic() - started < 1.5
        assert not isinstance(caught.value, ApiException)

        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=0.5)) as session:
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                async with session.get(proxy.url + configmap) as response:
                    await response.read()
            assert 0.4 < time.monotonic() - started < 1.5
            assert proxy.applied == {"stall": 2}

            async with session.get(proxy.url + configmap) as response:  # no fault left: at once
                assert response.status == 200
        assert (await core.read_namespaced_config_map("a", "default", _request_timeout=0.5)).data == {"k": "1"}
    finally:
        await api.close()


async def test_refused_connections_until_the_proxy_listens_again(proxy: FaultyProxy, configmap: str) -> None:
    api = await url_api_client(proxy.url)()
    try:
        assert await read_json(api, configmap)  # a pooled connection, reset by the refusal
        port = proxy.port
        await proxy.refuse(1.0)
        assert not proxy.listening
        with pytest.raises(aiohttp.ClientConnectorError):
            await read_json(api, configmap)
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ClientConnectorError):
                await session.get(proxy.url + configmap)
            await asyncio.sleep(1.2)
            assert proxy.listening and proxy.port == port
            async with session.get(proxy.url + configmap) as response:
                assert response.status == 200
        assert (await read_json(api, configmap) or {})["data"] == {"k": "1"}
        assert proxy.applied["refuse"] == 1
    finally:
        await api.close()


async def test_reset_all_ends_watches_with_a_transport_error(proxy: FaultyProxy, configmap: str) -> None:
    api = await url_api_client(proxy.url)()
    seen: list[str] = []

    async def watch_with_api_client() -> None:
        async with watch.Watch() as stream:
            async for event in stream.stream(
                k8s.CoreV1Api(api).list_namespaced_config_map, "default", timeout_seconds=30
            ):
                seen.append(f"api_client {event['type']}")

    async def watch_with_session(session: aiohttp.ClientSession) -> None:
        async with session.get(proxy.url + CM, params={"watch": "true", "timeoutSeconds": "30"}) as response:
            async for line in response.content:
                seen.append(f"session {json.loads(line)['type']}")

    try:
        async with aiohttp.ClientSession() as session:
            watches = [asyncio.create_task(watch_with_api_client()), asyncio.create_task(watch_with_session(session))]
            for _ in range(100):
                if len(seen) == 2:
                    break
                await asyncio.sleep(0.02)
            assert sorted(seen) == ["api_client ADDED", "session ADDED"]
            proxy.reset_all()
            results = await asyncio.wait_for(asyncio.gather(*watches, return_exceptions=True), 5)
        for result in results:
            assert isinstance(result, BaseException), result
            assert_transport_error(result)
        assert proxy.applied["reset_all"] == 2
    finally:
        await api.close()


async def test_a_reset_watch_response_delivers_its_first_event_then_breaks(
    api: Api, proxy: FaultyProxy, configmap: str
) -> None:
    await api.call("POST", CM, {"metadata": {"name": "b"}})
    proxy.reset_next(method="GET", path="watch=true")
    seen: list[str] = []
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientPayloadError):
            async with session.get(proxy.url + CM, params={"watch": "true", "timeoutSeconds": "30"}) as response:
                async for line in response.content:
                    seen.append(json.loads(line)["object"]["metadata"]["name"])
    assert seen == ["a"]  # the first chunk, not the second


async def test_filters_leave_other_requests_alone_and_hit_the_next_match(
    emulator: ApiEmulator, api: Api, proxy: FaultyProxy, configmap: str
) -> None:
    await api.call("POST", CM, {"metadata": {"name": "b"}, "data": {"k": "1"}})
    proxy.reset_next(method="patch", path="/configmaps/b", when="request")
    client = await url_api_client(proxy.url)()
    try:
        assert await read_json(client, CM + "/b")  # the path matches, the method does not
        assert (await send_json(client, "PATCH", configmap, {"data": {"k": "2"}}, MERGE) or {})["data"] == {"k": "2"}
        assert await send_json(client, "POST", CM, {"metadata": {"name": "c"}})  # a body in between
        assert proxy.applied == {}
        with pytest.raises(aiohttp.ClientError) as caught:
            await send_json(client, "PATCH", CM + "/b", {"data": {"k": "2"}}, MERGE)
        assert_transport_error(caught.value)
        assert proxy.applied == {"reset_request": 1}
        assert data_of(emulator, "b") == {"k": "1"} and data_of(emulator) == {"k": "2"}
        assert await send_json(client, "PATCH", CM + "/b", {"data": {"k": "2"}}, MERGE)  # spent
    finally:
        await client.close()


async def test_aiohttp_retries_an_idempotent_request_reset_before_its_answer_once(
    proxy: FaultyProxy, configmap: str
) -> None:
    """aiohttp resends a GET, PUT or DELETE once on a fresh connection when the first breaks before the response
    head: one reset is invisible to such a request, two are not. PATCH and POST are never resent."""
    async with aiohttp.ClientSession() as session:
        proxy.reset_next(method="GET", when="request")
        async with session.get(proxy.url + configmap) as response:
            assert response.status == 200
        assert proxy.applied == {"reset_request": 1}

        proxy.reset_next(times=2, method="GET", when="request")
        with pytest.raises(aiohttp.ClientError) as caught:
            await session.get(proxy.url + configmap)
        assert_transport_error(caught.value)
        assert proxy.applied == {"reset_request": 3}


@pytest.fixture
async def tiny() -> AsyncIterator[tuple[int, list[str]]]:
    """A tiny aiohttp server that records what it received (method, path, body length); huge heads allowed."""
    seen: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        body = await request.read()
        seen.append(f"{request.method} {request.path_qs} {len(body)}")
        return web.Response(text="x" * 1000)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, max_field_size=4 << 20, max_line_size=4 << 20)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1], seen  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


async def test_chunked_bodies_are_followed_and_a_huge_head_is_forwarded_unmatched(
    tiny: tuple[int, list[str]],
) -> None:
    port, seen = tiny

    async def chunks() -> AsyncIterator[bytes]:
        for piece in (b"GET /x HTTP/1.1\r\n\r\n", b"a" * 70_000, b"\r\n0\r\n\r\n"):  # looks like framing; is not
            yield piece

    async with FaultyProxy("127.0.0.1", port) as proxy, aiohttp.ClientSession() as session:
        proxy.reset_next(path="/x", when="request")
        async with session.post(proxy.url + "/upload", data=chunks()) as response:  # chunked, one connection
            assert response.status == 200 and len(await response.read()) == 1000
        with pytest.raises(aiohttp.ClientError):
            await session.post(proxy.url + "/x", data=b"y")
        assert proxy.applied == {"reset_request": 1}
        assert seen == ["POST /upload 70026"]

        proxy.reset_next(path="/x", when="request")
        huge = {"X-Huge": "h" * (1 << 20)}
        async with session.get(proxy.url + "/x", headers=huge) as response:  # over 1 MiB: forwarded, not matched
            assert response.status == 200
        assert seen[-1] == "GET /x 0" and proxy.applied == {"reset_request": 1}
        async with aiohttp.ClientSession() as fresh:  # the huge head's connection stays opaque; a new one is not
            with pytest.raises(aiohttp.ClientError):
                await fresh.post(proxy.url + "/x", data=b"y")
    assert proxy.applied == {"reset_request": 2}
    assert proxy.connections >= 3


async def test_tls_upstream_only_unfiltered_faults_apply(tmp_path: Any) -> None:
    """With TLS the proxy sees only encrypted bytes: filters never match; an unfiltered reset hits the next write,
    reset_all and refuse work as in plain HTTP."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)

    async def handle(request: web.Request) -> web.Response:
        return web.Response(text="secret " * 100)

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with (
            FaultyProxy("127.0.0.1", port) as proxy,
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_context)) as session,
        ):
            url = f"https://127.0.0.1:{proxy.port}/api/v1/pods"
            proxy.reset_next(method="GET", path="/pods")
            async with session.get(url) as response:
                assert response.status == 200 and "secret" in await response.text()
            assert proxy.applied == {}

            proxy.reset_next(when="request")
            with pytest.raises(aiohttp.ClientError) as caught:
                await session.post(url, data=b"x")  # not resent by aiohttp: the error shows
            assert_transport_error(caught.value)
            assert proxy.applied == {"reset_request": 1}

            async with session.get(url) as response:
                assert response.status == 200
            proxy.reset_next(when="response")
            with pytest.raises(aiohttp.ClientError):
                async with session.post(url, data=b"x") as response:
                    await response.read()
            assert proxy.applied["reset_response"] == 1

            async with session.get(url) as response:
                assert response.status == 200
            proxy.reset_all()
            assert proxy.applied["reset_all"] == 1
            async with session.get(url) as response:  # the pooled connection is dead; a GET is resent
                assert response.status == 200
    finally:
        await runner.cleanup()


def proxy_tasks(since: set[asyncio.Task[Any]]) -> list[asyncio.Task[Any]]:
    return [task for task in asyncio.all_tasks() - since if not task.done() and "FaultyProxy" in repr(task.get_coro())]


async def test_exit_leaves_no_task_pending(
    proxy: FaultyProxy, configmap: str, caplog: pytest.LogCaptureFixture
) -> None:
    before = asyncio.all_tasks()
    async with (
        FaultyProxy("127.0.0.1", proxy.port) as outer,  # in front of the other proxy: they chain
        aiohttp.ClientSession() as idle,
        aiohttp.ClientSession() as session,
    ):
        async with idle.get(outer.url + configmap) as response:  # an idle pooled connection
            assert response.status == 200
        watching = asyncio.create_task(session.get(outer.url + CM, params={"watch": "true"}))
        await asyncio.sleep(0.1)
        outer.stall_next(30)
        stalled = asyncio.create_task(session.get(outer.url + configmap))
        await asyncio.sleep(0.2)
        assert outer.open_connections >= 3 and proxy.open_connections >= 3
        await outer.refuse(30)  # a reopening pending too
        assert proxy_tasks(before)
    assert outer.open_connections == 0
    for task in (watching, stalled):
        if not task.done():
            task.cancel()
    await asyncio.gather(watching, stalled, return_exceptions=True)
    assert not proxy_tasks(before)
    gc.collect()
    await asyncio.sleep(0)
    assert not [record.getMessage() for record in caplog.records if "pending" in record.getMessage()]
