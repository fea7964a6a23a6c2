"""Serving the HTTP shells (webhook, extender): TLS with certificate reload, start and graceful stop."""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

logger = logging.getLogger("netaware.serving")


class BadBody(ValueError):
    """A request body the shell refuses before reading it: the HTTP status and the message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def read_json_body(request: web.Request, limit: int, oversize_status: int) -> bytes:
    """The raw body of a JSON request; raises ``BadBody`` for another content type or a body over ``limit``."""
    if request.content_type != "application/json":
        raise BadBody(400, f"Content-Type must be application/json, not {request.content_type!r}")
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise BadBody(oversize_status, f"the request body is larger than {limit} bytes") from None


def add_probes(
    app: web.Application,
    ready: Callable[[], bool],
    not_ready: str,
    *registries: CollectorRegistry,
    health: Callable[[], str] = lambda: "",
) -> None:
    """``/healthz`` (503 with ``health()`` when it names a problem), ``/readyz`` (``ready()``, and healthy),
    ``/metrics`` (every registry)."""

    async def healthz(_: web.Request) -> web.Response:
        problem = health()
        return web.Response(text=problem, status=503) if problem else web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        problem = health()
        if problem:
            return web.Response(text=problem, status=503)
        return web.Response(text="ok") if ready() else web.Response(text=not_ready, status=503)

    async def metrics(_: web.Request) -> web.Response:
        body = b"".join(generate_latest(registry) for registry in registries)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)


class ReloadingTLS:
    """An SSL context whose certificate is reloaded when the files change (new connections use it)."""

    def __init__(self, cert_file: str, key_file: str) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._stamp = self._mtimes()
        self.context.load_cert_chain(cert_file, key_file)

    def _mtimes(self) -> tuple[float, float]:
        return os.stat(self.cert_file).st_mtime, os.stat(self.key_file).st_mtime

    def reload_if_changed(self) -> bool:
        stamp = self._mtimes()
        if stamp == self._stamp:
            return False
        self.context.load_cert_chain(self.cert_file, self.key_file)
        self._stamp = stamp
        logger.info("reloaded the TLS certificate from %s", self.cert_file)
        return True

    async def watch(self, interval: float, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), timeout=interval)
            except TimeoutError:
                try:
                    self.reload_if_changed()
                except (OSError, ssl.SSLError) as error:  # a half-written pair: keep the old one, retry later
                    logger.warning("TLS certificate not reloaded: %s", error)


async def serve_app(
    app: web.Application,
    name: str,
    path: str,
    host: str,
    port: int,
    tls: ReloadingTLS | None,
    stop: asyncio.Event,
    reload_interval: float = 10.0,
) -> None:
    """Serve ``app`` until ``stop`` is set (HTTPS, or plain HTTP when ``tls`` is None)."""
    if tls is None:
        logger.warning("%s: serving plain HTTP (--insecure): for local testing only, never for a cluster", name)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=tls.context if tls else None)
    await site.start()
    logger.info("%s listening on %s://%s:%d%s", name, "https" if tls else "http", host, port, path)
    reloader = asyncio.create_task(tls.watch(reload_interval, stop)) if tls else None
    try:
        await stop.wait()
    finally:
        if reloader:
            reloader.cancel()
        await runner.cleanup()
