"""Watch streams: the initial ADDED events (no ``resourceVersion``) or a replay from a version still in the
history (410 Gone once compacted away), then every matching event as it happens, until ``timeoutSeconds``,
a dropped-watches epoch, or the client going away."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

from kmock._internal import rendering

from operators.api.selectors import Selector
from operators.emulator.errors import watch_error
from operators.emulator.store import Event, FieldTerms, ObjectStore, clone, selected


async def stream(
    store: ObjectStore,
    request: rendering.Request,
    key: str,
    labels: Selector,
    fields: FieldTerms,
    epoch: int,
) -> AsyncIterator[Any]:
    """The events of resource ``key`` for ``request`` (its namespace, ``resourceVersion``, ``timeoutSeconds``), until
    the store's watch epoch moves past ``epoch`` (the one of the request's arrival)."""
    since_text = request.params.get("resourceVersion") or ""
    limit_seconds = float(request.params.get("timeoutSeconds") or 0) or None
    yield b""  # send the headers now, as the apiserver does
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_seconds if limit_seconds else None
    if since_text in ("", "0"):
        last = store.last_rv
        for obj in store.matching(key, request.namespace, labels, fields):
            yield {"type": "ADDED", "object": clone(obj)}
    else:
        try:
            last = int(since_text)
        except ValueError:
            yield watch_error(f"invalid resourceVersion {since_text!r}", 400)
            return
        if last < store.compacted.get(key, 0):
            yield watch_error(f"too old resource version: {last} ({store.compacted.get(key, 0)})", 410)
            return
    bookmarks = request.params.get("allowWatchBookmarks") in ("true", "1")
    while True:
        written = store.next_write()  # before reading the history: a write from now on completes it
        horizon = store.last_rv  # every event of this resource up to here is in the history read below
        for event in _since(store.history.get(key, ()), last):
            if store.watch_epoch != epoch:  # dropped: nothing more goes out on it, as on a closed connection
                return
            last = event.rv
            namespace = event.obj.get("metadata", {}).get("namespace")
            if request.namespace is not None and namespace != request.namespace:
                continue
            if selected(event.obj, labels, fields):
                yield {"type": event.type, "object": clone(event.obj)}
        last = max(last, horizon)
        if store.watch_epoch != epoch:
            return
        remaining = None if deadline is None else deadline - loop.time()
        if remaining is not None and remaining <= 0:
            if bookmarks:  # as the API server does before it ends a watch: where to resume from
                yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(last)}}}
            return
        # Wake up at least every second to notice a client that went away: aiohttp does not cancel the
        # handler on disconnect, and a stream parked waiting for a write would hold the server's shutdown.
        raw = request._raw_request
        transport = raw.transport if raw is not None else None
        if transport is None or transport.is_closing():
            return
        await asyncio.wait({written}, timeout=min(remaining or 1.0, 1.0))


def _since(history: Iterable[Event], last: int) -> list[Event]:
    """The events after version ``last``, read from the end: a write costs each watch the events it missed,
    not the whole history (200,000 pod events in the live benchmarks)."""
    newer: list[Event] = []
    for event in reversed(history):  # type: ignore[call-overload]
        if event.rv <= last:
            break
        newer.append(event)
    newer.reverse()
    return newer
