"""One cluster cache per process: list + watch of the kinds the process's components read, as raw JSON
(orjson over the API client's own aiohttp session: no model classes), trimmed on arrival
(:mod:`operators.sources.trim`) and parsed once into the engine's records.

* **Lists** are paged (``limit``/``continue``); a page whose continue token expired (410) starts the list
  again. A list replaces the kind's objects and reports what changed against what was held before.
* **Watches** resume from the last resourceVersion seen (events and ``BOOKMARK``\\s advance it), so a dropped
  or timed-out watch does not list again; only a ``410 Gone`` (the version was compacted away) does.
* **Changes** go to listeners as batches of :class:`Change` (a whole list is one batch); an update that
  leaves the trimmed object equal (a node's heartbeat) is no change. A listener on another event loop
  (kopf runs in its own thread) is called on its loop.
* **Snapshots** (:meth:`ClusterCache.snapshot`) are derived per kind, only for the kinds that changed since
  the last one; the objects are shared, never copied.

The cache may be read from several threads: its maps change under a lock, and snapshots are immutable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from operators.api.errors import FieldError
from operators.engine.cluster.snapshot import Snapshot, parse_object
from operators.sources.kinds import SLOTS, Kind, selecting, union

logger = logging.getLogger("netaware.cache")

PAGE_SIZE = 500
WATCH_SECONDS = 300  # the API server ends a watch after this; we resume it from its last version
PAUSE = 0.5  # before listing again after an error
MISSING_PAUSE = 30.0  # before asking again for a kind the API server does not serve (its CRD is absent)
MAX_EVENT_LINE = 64 * 1024 * 1024  # a watch event larger than this ends the watch (the object limit is ~1.5 MiB)


@dataclass(frozen=True, slots=True)
class Change:
    """One object's change: ``old`` None for an addition, ``new`` None for a deletion (parsed records)."""

    kind: str
    old: Any
    new: Any


Listener = Callable[[list[Change]], None]


class Expired(Exception):
    """The API server no longer has the version asked for (410 Gone): list again."""


@dataclass
class _Store:
    kind: Kind
    objects: dict[tuple[str, str], Any] = field(default_factory=dict)
    trimmed: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    version: int = 0  # bumped on every change: snapshots of this kind are rebuilt when it moved
    synced: bool = False
    unreadable: dict[tuple[str, str], str] = field(default_factory=dict)


def _key(raw: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) of an object as sent; None when it has no readable name (it is ignored)."""
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        return None
    namespace = meta.get("namespace")
    return (namespace if isinstance(namespace, str) else "", meta["name"])


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    """Wait ``seconds``, or less when ``stop`` is set: a cancellation a library swallowed (turned into an error
    the loop retries after) must not hold a shutdown for the length of a retry pause."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


class ClusterCache:
    def __init__(
        self,
        kinds: Iterable[Kind],
        page_size: int = PAGE_SIZE,
        namespaces: Iterable[str] = (),
        watch_seconds: int = WATCH_SECONDS,
    ) -> None:
        self.kinds = union(kinds)
        self.watch_seconds = watch_seconds
        self.namespaces = frozenset(namespaces)  # namespaced objects only from these; empty: all
        self.page_size = page_size
        self._stores = {kind.name: _Store(kind) for kind in self.kinds}
        self._lock = threading.Lock()
        self._listeners: list[tuple[Listener, asyncio.AbstractEventLoop | None]] = []
        self._slots: dict[str, tuple[int, tuple[Any, ...]]] = {}
        self._snapshots: dict[frozenset[str], tuple[tuple[int, ...], Snapshot]] = {}
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self.lists: Counter[str] = Counter()  # list requests per kind (pages count once)
        self.watches: Counter[str] = Counter()  # watch requests per kind

    # -- reading -----------------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Every kind listed at least once."""
        return all(store.synced for store in self._stores.values())

    def get(self, kind: Kind, namespace: str, name: str) -> Any:
        return self._stores[kind.name].objects.get((namespace, name))

    def raw(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        """The trimmed object as it arrived (what a controller patches against: it keeps the resourceVersion of
        custom resources). Not to be changed."""
        return self._stores[kind.name].trimmed.get((namespace, name))

    def objects(self, kind: Kind) -> tuple[Any, ...]:
        """The parsed records of ``kind`` (a copy, safe to iterate from any thread)."""
        with self._lock:
            return tuple(self._stores[kind.name].objects.values())

    def snapshot(self, without: Iterable[Kind] = ()) -> Snapshot:
        """The followed kinds (but those ``without``: empty) as a snapshot; a kind's slot is rebuilt only when it
        changed since the last call."""
        left_out = frozenset(kind.name for kind in without)
        with self._lock:
            versions = tuple(-1 if name in left_out else store.version for name, store in self._stores.items())
            held_snapshot = self._snapshots.get(left_out)
            if held_snapshot is not None and held_snapshot[0] == versions:
                return held_snapshot[1]
            slots: dict[str, tuple[Any, ...]] = {}
            for name, store in self._stores.items():
                if name in left_out:
                    continue
                held = self._slots.get(name)
                if held is None or held[0] != store.version:
                    held = (store.version, tuple(store.objects[key] for key in sorted(store.objects)))
                    self._slots[name] = held
                slots[SLOTS[name]] = held[1]
            snapshot = Snapshot(**slots)
            self._snapshots[left_out] = (versions, snapshot)
            return snapshot

    def subscribe(self, listener: Listener, loop: asyncio.AbstractEventLoop | None = None) -> list[Change]:
        """Call ``listener`` with every batch of changes from now on (on ``loop`` when given: a listener of
        another thread); returns what is held now, as additions, so that it starts from the same state."""
        with self._lock:
            self._listeners.append((listener, loop))
            return [
                Change(store.kind.name, None, obj) for store in self._stores.values() for obj in store.objects.values()
            ]

    async def wait_synced(self) -> None:
        """Until every kind has been listed once (from any thread's event loop)."""
        event = asyncio.Event()
        with self._lock:
            if self.ready:
                return
            self._waiters.append((asyncio.get_running_loop(), event))
        await event.wait()

    # -- changing ----------------------------------------------------------------------------------

    def _parse(self, store: _Store, key: tuple[str, str], trimmed: dict[str, Any]) -> Any:
        try:
            parsed = parse_object({"apiVersion": store.kind.api_version, "kind": store.kind.kind, **trimmed})
        except (FieldError, ValueError, TypeError) as error:
            if store.unreadable.get(key) != str(error):
                logger.warning("%s %s ignored: %s", store.kind.kind, "/".join(p for p in key if p), error)
            store.unreadable[key] = str(error)
            return None
        store.unreadable.pop(key, None)
        return parsed[1] if parsed is not None else None

    def _apply(self, store: _Store, event_type: str, raw: dict[str, Any]) -> Change | None:
        """One watch event; the change it makes (None when the trimmed object is unchanged or unreadable)."""
        key = _key(raw)
        if key is None:
            logger.warning("%s without a readable metadata.name ignored", store.kind.kind)
            return None
        if key[0] and self.namespaces and key[0] not in self.namespaces:
            return None  # a namespace this process does not follow
        old = store.objects.get(key)
        if event_type == "DELETED":
            store.trimmed.pop(key, None)
            store.unreadable.pop(key, None)
            if old is None:
                return None
            del store.objects[key]
            store.version += 1
            return Change(store.kind.name, old, None)
        trimmed = store.kind.trim(raw)
        if store.trimmed.get(key) == trimmed:
            return None
        store.trimmed[key] = trimmed
        new = self._parse(store, key, trimmed)
        if new is None:
            if old is None:
                return None
            del store.objects[key]
        else:
            store.objects[key] = new
        store.version += 1
        return Change(store.kind.name, old, new)

    def apply(self, kind: Kind, event_type: str, raw: dict[str, Any]) -> Change | None:
        """One watch event (``ADDED``, ``MODIFIED``, ``DELETED``) of ``kind``, as a watch applies it."""
        store = self._stores[kind.name]
        with self._lock:
            change = self._apply(store, event_type, raw)
        if change is not None:
            self._publish([change])
        return change

    def _replace(self, store: _Store, items: list[dict[str, Any]], seen: set[tuple[str, str]]) -> list[Change]:
        """One page of a fresh list: what it added or changed (its keys are added to ``seen``)."""
        changes: list[Change] = []
        for raw in items:
            key = _key(raw)
            if key is not None:
                seen.add(key)
            change = self._apply(store, "MODIFIED", raw)
            if change is not None:
                changes.append(change)
        return changes

    def _drop_unseen(self, store: _Store, seen: set[tuple[str, str]]) -> list[Change]:
        """After the last page: what the list no longer has was deleted meanwhile."""
        changes: list[Change] = []
        for key in [key for key in store.trimmed if key not in seen]:
            change = self._apply(store, "DELETED", {"metadata": {"namespace": key[0], "name": key[1]}})
            if change is not None:
                changes.append(change)
        return changes

    def _publish(self, changes: list[Change]) -> None:
        if not changes:
            return
        for listener, loop in list(self._listeners):
            if loop is None:
                listener(changes)
            else:
                with contextlib.suppress(RuntimeError):  # that loop is closed: its component stopped
                    loop.call_soon_threadsafe(listener, changes)

    def _mark_synced(self, store: _Store) -> None:
        """(Under the lock.) Wakes whoever waits for the first sync once every kind is listed."""
        store.synced = True
        if self.ready:
            for loop, event in self._waiters:
                with contextlib.suppress(RuntimeError):  # that loop is closed
                    loop.call_soon_threadsafe(event.set)
            self._waiters.clear()

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

    async def _follow_one(self, store: _Store, api: client.ApiClient, stop: asyncio.Event) -> None:
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

    async def _list(self, store: _Store, api: client.ApiClient) -> str:
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

    async def _watch(self, store: _Store, api: client.ApiClient, version: str) -> str:
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

    def _event(self, store: _Store, event: Any, version: str) -> str:
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

    def _pause_after(self, store: _Store, error: ApiException) -> float:
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

    def unreadable(self, kind: Kind) -> Mapping[tuple[str, str], str]:
        """Objects of ``kind`` that did not parse, with why (they are left out of snapshots)."""
        return dict(self._stores[kind.name].unreadable)
