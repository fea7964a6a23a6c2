"""Serving the HTTP shells (webhook, extender): TLS with certificate reload, start and graceful stop."""

from __future__ import annotations

import asyncio
import logging
import os
import ssl

from aiohttp import web

logger = logging.getLogger("netaware.serving")


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
