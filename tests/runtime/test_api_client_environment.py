"""The API client reads its environment once: a proxy from HTTPS_PROXY / NO_PROXY when made, no ``.netrc`` and no
worker thread on each request."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio import client

from operators.kube import TimedApiClient, read_json


def made(host: str) -> TimedApiClient:
    return TimedApiClient(client.Configuration(host=host))


async def test_a_proxy_from_the_environment_is_taken_when_the_client_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://user:secret@proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    api = made("https://api.example:6443")
    bypassed = made("https://kube.internal.example:6443")
    try:
        assert api.rest_client.proxy == "http://proxy.example:3128"
        assert api.rest_client.proxy_headers == {"Proxy-Authorization": "Basic dXNlcjpzZWNyZXQ="}  # user:secret
        assert not bypassed.rest_client.proxy
        assert api.rest_client.pool_manager.trust_env is False
    finally:
        await api.close()
        await bypassed.close()


async def test_requests_read_no_netrc_and_hop_to_no_thread(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".netrc").write_text("machine 127.0.0.1 login someone password leaked\n")
    (tmp_path / ".netrc").chmod(0o600)
    monkeypatch.setenv("NETRC", str(tmp_path / ".netrc"))
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    seen: list[str | None] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.json_response({"kind": "Pod", "metadata": {"name": "p"}})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/team/pods/p", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    loop = asyncio.get_running_loop()
    hops: list[Any] = []
    real = loop.run_in_executor

    def counted(executor: Any, func: Any, *args: Any) -> Any:
        hops.append(func)
        return real(executor, func, *args)

    monkeypatch.setattr(loop, "run_in_executor", counted)
    api = made(f"http://127.0.0.1:{port}")
    try:
        for _ in range(3):
            assert (await read_json(api, "/api/v1/namespaces/team/pods/p") or {})["metadata"]["name"] == "p"
    finally:
        await api.close()
        await runner.cleanup()
    assert seen == [None, None, None]  # the .netrc's password never sent
    assert hops == []
