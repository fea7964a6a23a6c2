"""One cluster cache per process: list + watch of the kinds the process's components read, as raw JSON
(orjson over the API client's own aiohttp session: no model classes), into a :class:`ClusterStore`
(:mod:`operators.sources.store`: trimming, parsing, changes, snapshots).

* **Lists** are paged (``limit``/``continue``); a page whose continue token expired (410) starts the list
  again. A list replaces the kind's objects and reports what changed against what was held before.
* **Watches** resume from the last resourceVersion seen (events and ``BOOKMARK``\\s advance it), so a dropped
  or timed-out watch does not list again; only a ``410 Gone`` (the version was compacted away) does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Iterable
from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from operators.sources.kinds import Kind, selecting
from operators.sources.store import Change, ClusterStore, KindStore

logger = logging.getLogger("netaware.cache")

PAGE_SIZE = 500
WATCH_SECONDS = 300  # the API server ends a watch after this; we resume it from its last version
PAUSE = 0.5  # before listing again after an error
MISSING_PAUSE = 30.0  # before asking again for a kind the API server does not serve (its CRD is absent)
MAX_EVENT_LINE = 64 * 1024 * 1024  # a watch event larger than this ends the watch (the object limit is ~1.5 MiB)


class Expired(Exception):
    """The API server no longer has the version asked for (410 Gone): list again."""


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    """Wait ``seconds``, or less when ``stop`` is set: a cancellation a library swallowed (turned into an error
    the loop retries after) must not hold a shutdown for the length of a retry pause."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


class ClusterCache(ClusterStore):
    def __init__(
        self,
        kinds: Iterable[Kind],
        page_size: int = PAGE_SIZE,
        namespaces: Iterable[str] = (),
        watch_seconds: int = WATCH_SECONDS,
    ) -> None:
        super().__init__(kinds, namespaces)
        self.watch_seconds = watch_seconds
        self.page_size = page_size
        self.lists: Counter[str] = Counter()  # list requests per kind (pages count once)
        self.watches: Counter[str] = Counter()  # watch requests per kind

    # -- following ---------------------------------------------------------------------------------

    async def follow(self, api: client.ApiClient, stop: asyncio.Event) -> None:
        """List and watch every kind until ``stop`` is set."""
        tasks = [asyncio.create_task(self._follow_one(store, api, stop)) for store in self._stores.values()]
        try:
            await stop.wait()
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _follow_one(self, store: KindStore, api: client.ApiClient, stop: asyncio.Event) -> None:
        version: str | None = None
        while not stop.is_set():
            if version is None:
                try:
                    version = await self._list(store, api)
                except asyncio.CancelledError:
                    raise
                except ApiException as error:
                    await _pause(stop, self._pause_after(store, error))
                    continue
                except (aiohttp.ClientError, TimeoutError, ValueError, OSError) as error:
                    logger.info("listing %s failed (%s); listing again", store.kind.name, error or type(error).__name__)
                    await _pause(stop, PAUSE)
                    continue
                except Exception:  # a bug must not end the following of a kind for good: log it, list again
                    logger.exception("listing %s failed; listing again", store.kind.name)
                    await _pause(stop, MISSING_PAUSE)
                    continue
            try:
                version = await self._watch(store, api, version)
            except asyncio.CancelledError:
                raise
            except Expired:
                logger.info("watch of %s: its version is gone (410); listing again", store.kind.name)
                version = None
            except (ApiException, aiohttp.ClientError, TimeoutError, ValueError, OSError) as error:
                # a dropped or refused watch: resume from the last version seen, without listing
                logger.info("watch of %s ended (%s); resuming", store.kind.name, error or type(error).__name__)
                await _pause(stop, PAUSE)
            except Exception:  # a bug must not end the following of a kind for good: log it, list again
                logger.exception("watch of %s failed; listing again", store.kind.name)
                await _pause(stop, PAUSE)
                version = None

    async def _request(self, api: client.ApiClient, path: str, params: dict[str, str], seconds: float) -> Any:
        """A GET as the raw aiohttp response (the API client's session, TLS and credentials)."""
        response = await api.call_api(
            path,
            "GET",
            query_params=list(params.items()),
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(total=seconds, sock_connect=10),
        )
        if response.status == 410 and params.get("watch"):
            response.release()
            raise Expired(path)
        if response.status != 200:
            body = await response.read()
            response.release()
            error = ApiException(status=response.status, reason=body[:300].decode(errors="replace"))
            error.headers = response.headers
            raise error
        return response

    async def _list(self, store: KindStore, api: client.ApiClient) -> str:
        """List the kind page by page, each page trimmed as it arrives (a list of 100,000 pods is never held
        whole); what the list lacks is deleted; the list's resourceVersion."""
        first = {"limit": str(self.page_size), **selecting(store.kind)}
        params = dict(first)
        seen: set[tuple[str, str]] = set()
        changes: list[Change] = []
        self.lists[store.kind.name] += 1
        fetching = asyncio.ensure_future(self._page(api, store.kind.path, params, first))
        try:
            while True:
                page, params = await fetching
                meta = page.get("metadata") or {}
                if meta.get("continue"):  # the next page is fetched while this one is trimmed
                    params = {**first, "continue": str(meta["continue"])}
                    fetching = asyncio.ensure_future(self._page(api, store.kind.path, params, first))
                with self._lock:
                    changes += self._replace(store, page.get("items") or [], seen)
                del page
                if not meta.get("continue"):
                    break
        finally:
            fetching.cancel()
        with self._lock:
            changes += self._drop_unseen(store, seen)
            self._mark_synced(store)
        self._publish(changes)
        return str(meta.get("resourceVersion") or "")

    async def _page(
        self, api: client.ApiClient, path: str, params: dict[str, str], first: dict[str, str]
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """One page of a list, and the parameters it was asked with; a continue token that expired (410) starts
        the list over (the caller sees the first page again, and its keys again: nothing is lost)."""
        try:
            response = await self._request(api, path, params, seconds=120)
        except ApiException as error:
            if error.status != 410 or "continue" not in params:
                raise
            params = dict(first)
            response = await self._request(api, path, params, seconds=120)
        page = orjson.loads(await response.read())
        response.release()
        return page, params

    async def _watch(self, store: KindStore, api: client.ApiClient, version: str) -> str:
        """Watch from ``version`` until the server ends the watch; the last version seen. ``Expired`` on 410."""
        params = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": version,
            "timeoutSeconds": str(self.watch_seconds),
            **selecting(store.kind),
        }
        self.watches[store.kind.name] += 1
        response = await self._request(api, store.kind.path, params, seconds=self.watch_seconds + 30)
        try:
            buffer = b""
            async for chunk in response.content.iter_any():
                buffer += chunk
                if len(buffer) > MAX_EVENT_LINE:
                    raise ValueError(f"a watch event of {store.kind.name} over {MAX_EVENT_LINE} bytes")
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        version = self._event(store, orjson.loads(line), version)
        finally:
            response.release()
        return version

    def _event(self, store: KindStore, event: Any, version: str) -> str:
        if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
            logger.warning("watch of %s: an event that is not an object ignored", store.kind.name)
            return version
        kind, raw = event.get("type"), event["object"]
        if kind == "ERROR":
            if raw.get("code") == 410:
                raise Expired(raw.get("message"))
            raise ApiException(status=raw.get("code") or 500, reason=str(raw.get("message")))
        meta = raw.get("metadata")
        version = str((meta.get("resourceVersion") if isinstance(meta, dict) else None) or version)
        if kind != "BOOKMARK":
            self.apply(store.kind, str(kind), raw)
        return version

    def _pause_after(self, store: KindStore, error: ApiException) -> float:
        """A kind the API server does not serve (its CRD is not installed) counts as empty and is asked for again
        every 30 s; a 429 waits its Retry-After; anything else a short pause."""
        if error.status == 404:
            if not store.synced:
                logger.warning(
                    "%s are not served (is the CRD installed?): treated as none, retrying every 30 s", store.kind.name
                )
            with self._lock:
                changes = self._drop_unseen(store, set())
                self._mark_synced(store)
            self._publish(changes)
            return MISSING_PAUSE
        logger.info("listing %s failed (%s %s); listing again", store.kind.name, error.status, error.reason)
        headers: Any = error.headers or {}
        retry_after = headers.get("Retry-After")
        try:
            return min(max(float(retry_after), PAUSE), MISSING_PAUSE) if retry_after else PAUSE
        except ValueError:
            return PAUSE
