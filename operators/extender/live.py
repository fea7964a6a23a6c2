"""Where the extender's web application keeps its :class:`~operators.sources.live_index.LiveIndex`."""

from __future__ import annotations

from aiohttp import web

from operators.sources.live_index import KINDS, LiveIndex

__all__ = ["KINDS", "LIVE_KEY", "LiveIndex"]

LIVE_KEY: web.AppKey[LiveIndex] = web.AppKey("live_index", LiveIndex)
