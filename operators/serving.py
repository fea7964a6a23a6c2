"""Serving the HTTP shells (webhook, extender): TLS with certificate reload, start and graceful stop."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import ssl
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from operators.supervision import Supervisor, cancel

logger = logging.getLogger("netaware.serving")

# The supervisor of an application's long-running tasks (its /healthz): the certificate reloader runs under it too.
SUPERVISOR_KEY: web.AppKey[Supervisor] = web.AppKey("supervisor", Supervisor)

# A request head that has begun must be complete within HEADER_TIMEOUT seconds, and its body within BODY_TIMEOUT
# once the head is in: slow clients cannot hold connections. A connection idle between requests (or opened and
# silent) is closed after IDLE_TIMEOUT, longer than the callers' own idle timeout (90 s, Go's http.Transport in the
# API server and kube-scheduler), so that the caller closes an idle connection first: a server that closes one
# races the caller's next request on it, which then fails reset (a POST is not retried; the API server admits the
# pod unmutated, which a CI run met with aiohttp's one keep-alive timer at 15 s).
HEADER_TIMEOUT = 15.0
BODY_TIMEOUT = 10.0
IDLE_TIMEOUT = 120.0
# Once the listener is closed, requests in flight get this long to finish (the webhook's timeout is 2 s, the
# extender's httpTimeout 5 s by default); then the process exits.
SHUTDOWN_TIMEOUT = 10.0
# After its shutdown delay a stopping server goes on serving while requests still come: every answer while stopping
# closes its connection, so a request then came over a connection the Service opened to this replica, which it
# does until kube-proxy has removed the endpoint (after the EndpointSlice controller and kube-proxy's own sync, later
# still on a busy node; with a fixed delay, a connection sent here after it is refused and the call fails). It stops
# listening once no request came for DRAIN_QUIET seconds, or DRAIN_EXTRA seconds after the delay (the chart's grace
# period, the delay + 30 s, leaves SHUTDOWN_TIMEOUT after that).
DRAIN_QUIET = 1.0
DRAIN_EXTRA = 15.0


@dataclass(frozen=True)
class Probes:
    """What an application's ``/healthz``, ``/readyz`` and ``/metrics`` answer from (:func:`add_probes`), kept so
    that a health-only server can answer the same (:func:`serve_app`'s ``health_port``)."""

    ready: Callable[[], bool]
    not_ready: str
    registries: tuple[CollectorRegistry, ...]
    health: Callable[[], str]


AnyResponse = TypeVar("AnyResponse", bound=web.StreamResponse)
PROBES_KEY: web.AppKey[Probes] = web.AppKey("probes", Probes)
# Set when the process is stopping and still serves (:func:`serve_app`'s ``shutdown_delay``): ``/readyz`` answers
# 503 and answers close their connections (:func:`close_if_draining`).
DRAINING_KEY: web.AppKey[asyncio.Event] = web.AppKey("draining", asyncio.Event)


@dataclass
class LastAnswer:
    """When the data path last answered while the process was stopping (``time.monotonic()``; 0: not yet)."""

    at: float = 0.0


LAST_ANSWER_KEY: web.AppKey[LastAnswer] = web.AppKey("last-answer-while-draining", LastAnswer)


def close_if_draining(request: web.Request, response: AnyResponse) -> AnyResponse:
    """``response``, closing its connection when the process is stopping: a client that keeps connections (the API
    server, kube-scheduler) opens its next one where the Service sends it then, not to this replica. Its time is
    kept: the listener stays open while answers go on (:data:`DRAIN_QUIET`)."""
    draining = request.app.get(DRAINING_KEY)
    if draining is not None and draining.is_set():
        response.force_close()
        if LAST_ANSWER_KEY in request.app:
            request.app[LAST_ANSWER_KEY].at = time.monotonic()
    return response


async def until_quiet(last: LastAnswer, quiet: float, deadline: float) -> None:
    """Until no answer for ``quiet`` seconds, or ``deadline`` (``time.monotonic()``)."""
    while True:  # (not an Event: the answers only stamp a time, the wait is the clock's)
        now = time.monotonic()
        wait = min(quiet - (now - last.at), deadline - now)
        if wait <= 0:
            return
        await asyncio.sleep(wait)


class BadBody(ValueError):
    """A request body the shell refuses before reading it: the HTTP status and the message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ClientGone(web.HTTPException):
    """The client closed its connection before its body arrived (the API server restarted mid-call): nobody is left
    to answer, and it is not the server's error. aiohttp writes nothing to the closed connection and logs nothing for
    an ``HTTPException`` (any other exception would be a 500 with a traceback); the call is not counted as one
    answered. 499: the status proxies log for a request its client closed."""

    status_code = 499


async def read_json_body(request: web.Request, limit: int, oversize_status: int) -> bytes:
    """The raw body of a JSON request; raises ``BadBody`` for another content type or a body over ``limit``,
    ``ClientGone`` when the connection is lost while the body is read."""
    if request.content_type != "application/json":
        raise BadBody(400, f"Content-Type must be application/json, not {request.content_type!r}")
    try:
        async with asyncio.timeout(BODY_TIMEOUT):  # not wait_for: that wraps the read in a task of its own per request
            return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise BadBody(oversize_status, f"the request body is larger than {limit} bytes") from None
    except TimeoutError:
        raise BadBody(408, f"the request body did not arrive within {BODY_TIMEOUT:g} s") from None
    except ConnectionResetError:
        raise ClientGone() from None


def add_probes(
    app: web.Application,
    ready: Callable[[], bool],
    not_ready: str,
    *registries: CollectorRegistry,
    health: Callable[[], str] = lambda: "",
    stopping: asyncio.Event | None = None,
) -> None:
    """``/healthz`` (500 with ``health()`` when it names a problem, as controller-runtime's checks answer),
    ``/readyz`` (503 unless ``ready()`` and healthy, and while stopping), ``/metrics`` (every registry)."""
    app[PROBES_KEY] = Probes(ready, not_ready, registries, health)
    draining = app[DRAINING_KEY] = stopping or asyncio.Event()
    app[LAST_ANSWER_KEY] = LastAnswer()

    async def healthz(_: web.Request) -> web.Response:
        problem = health()
        return web.Response(text=problem, status=500) if problem else web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        problem = health()
        if problem:
            return web.Response(text=problem, status=503)
        if draining.is_set():
            return web.Response(text="shutting down", status=503)
        return web.Response(text="ok") if ready() else web.Response(text=not_ready, status=503)

    async def metrics(_: web.Request) -> web.Response:
        body = b"".join(generate_latest(registry) for registry in registries)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)


class ReloadingTLS:
    """An SSL context whose certificate is reloaded when the files change (new connections use it).

    A change is taken only once the certificate and the key on disk load together: both files are read
    once, the pair is tried in a fresh context, and only a pair that loaded is put into the served
    context. While a new certificate sits next to the old key (a rotation half-way), the last valid pair
    keeps serving, and the check is repeated at the next interval.
    """

    def __init__(self, cert_file: str, key_file: str) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._stamp = self._mtimes()
        self.context.load_cert_chain(cert_file, key_file)

    def _mtimes(self) -> tuple[float, float, int, int]:
        cert, key = os.stat(self.cert_file), os.stat(self.key_file)
        return cert.st_mtime, key.st_mtime, cert.st_size, key.st_size

    def reload_if_changed(self) -> bool:
        """True when a new pair was taken; raises ``ssl.SSLError``/``OSError`` (the old pair stays) when the
        files on disk do not form a valid pair."""
        stamp = self._mtimes()
        if stamp == self._stamp:
            return False
        with open(self.cert_file, "rb") as cert, open(self.key_file, "rb") as key:
            cert_pem, key_pem = cert.read(), key.read()
        with tempfile.TemporaryDirectory(prefix="netaware-tls-") as folder:
            cert_copy, key_copy = os.path.join(folder, "tls.crt"), os.path.join(folder, "tls.key")
            for path, data in ((cert_copy, cert_pem), (key_copy, key_pem)):
                with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as handle:
                    handle.write(data)
            trial = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            trial.load_cert_chain(cert_copy, key_copy)  # raises for a mismatched or half-written pair
            self.context.load_cert_chain(cert_copy, key_copy)  # the same bytes: it loads
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


class _Connection(RequestHandler):
    """aiohttp's connection with Go's two read timeouts instead of one: :data:`IDLE_TIMEOUT` between requests (aiohttp's
    keep-alive timer) and :data:`HEADER_TIMEOUT` from a head's first bytes to its end."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None

    def data_received(self, data: bytes) -> None:
        heads = self._request_count
        super().data_received(data)
        if self._request_count != heads:  # a head completed
            self._forget_head_deadline()
        elif self._head_deadline is None and not self._request_in_progress:  # (bytes while serving are its body)
            self._head_deadline = self._loop.call_later(HEADER_TIMEOUT, self._head_late, heads)

    def _head_late(self, heads: int) -> None:
        self._head_deadline = None
        if self._request_count == heads and not self._request_in_progress:
            self.force_close()

    def _forget_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def connection_lost(self, exc: BaseException | None) -> None:
        self._forget_head_deadline()
        super().connection_lost(exc)


class _Server(web.Server):
    def __call__(self) -> RequestHandler:
        return _Connection(self, loop=self._loop, **self._kwargs)


class Runner(web.AppRunner):
    """``web.AppRunner`` whose connections have both read timeouts (:class:`_Connection`), without an access log."""

    def __init__(self, app: web.Application, **kwargs: Any) -> None:
        super().__init__(app, access_log=None, keepalive_timeout=IDLE_TIMEOUT, **kwargs)

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _Server  # (the application's own server, as aiohttp made it, making our connections)
        return server


async def serve_app(
    app: web.Application,
    name: str,
    path: str,
    host: str,
    port: int,
    tls: ReloadingTLS | None,
    stop: asyncio.Event,
    reload_interval: float = 10.0,
    shutdown_delay: float = 0.0,
    health_port: int = 0,
    health_address: str = "0.0.0.0",
    quiet: float = DRAIN_QUIET,
    extra: float = DRAIN_EXTRA,
) -> None:
    """Serve ``app`` until ``stop`` is set (HTTPS, or plain HTTP when ``tls`` is None), then stop gracefully:

    1. for ``shutdown_delay`` seconds keep serving, answering ``/readyz`` 503 and closing each answer's connection
       (the endpoint leaves the Service, and the clients' pools, meanwhile), and after it while answers go on, until
       none for ``quiet`` seconds (``extra`` seconds more at most: :data:`DRAIN_QUIET`);
    2. close the listener; the requests in flight get :data:`SHUTDOWN_TIMEOUT` to finish.

    ``health_port``: ``/healthz``, ``/readyz`` and ``/metrics`` also on ``health_address:health_port`` over plain
    HTTP (where the kubelet probes a server that listens on loopback only)."""
    if tls is None and not _loopback(host):
        logger.warning("%s: serving plain HTTP (--insecure): for local testing only, never for a cluster", name)
    runner = Runner(app, shutdown_timeout=SHUTDOWN_TIMEOUT)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=tls.context if tls else None)
    await site.start()
    logger.info("%s listening on %s://%s:%d%s", name, "https" if tls else "http", host, port, path)
    health = await _health_server(app, health_address, health_port) if health_port else None
    tasks = app.get(SUPERVISOR_KEY) or Supervisor()
    reloader = tasks.start("tls-reload", lambda: tls.watch(reload_interval, stop), stop.is_set) if tls else None
    try:
        await stop.wait()
        if shutdown_delay > 0 and DRAINING_KEY in app:
            app[DRAINING_KEY].set()
            logger.info("%s: stopping; serving %g s more, not ready, closing connections", name, shutdown_delay)
            await asyncio.sleep(shutdown_delay)
            delayed = time.monotonic()
            await until_quiet(app[LAST_ANSWER_KEY], quiet, delayed + extra)
            if (longer := time.monotonic() - delayed) >= 0.05:
                logger.info("%s: requests still came after the delay: served %.1f s more", name, longer)
    finally:
        await cancel([reloader])
        await runner.cleanup()
        if health is not None:
            await health.cleanup()


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


async def _health_server(app: web.Application, address: str, port: int) -> web.AppRunner:
    """The probes and metrics of ``app`` (:data:`PROBES_KEY`) served alone on ``address:port``."""
    probes = app[PROBES_KEY]
    health = web.Application(client_max_size=1024)
    add_probes(health, probes.ready, probes.not_ready, *probes.registries, health=probes.health,
               stopping=app[DRAINING_KEY])  # fmt: skip
    runner = Runner(health)
    await runner.setup()
    await web.TCPSite(runner, address, port).start()
    logger.info("probes and metrics on http://%s:%d/metrics", address, port)
    return runner


@contextlib.asynccontextmanager
async def listening(app: web.Application, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Serve ``app`` over plain HTTP on a free port of ``host`` while inside; yields its base URL."""
    runner = Runner(app)
    await runner.setup()
    site = web.TCPSite(runner, host, 0)
    await site.start()
    try:
        bound_host, bound_port = runner.addresses[0][:2]
        yield f"http://{bound_host}:{bound_port}"
    finally:
        await runner.cleanup()
