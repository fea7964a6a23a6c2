"""What a process holds of the cluster: per kind, the objects as they arrived (trimmed,
:mod:`operators.sources.trim`) and parsed once into the engine's records, with the changes each event makes.

* **Changes** go to listeners as batches of :class:`Change` (a whole list is one batch); an update that
  leaves the trimmed object equal (a node's heartbeat) is no change. A listener on another event loop
  (kopf runs in its own thread) is called on its loop.
* **Snapshots** (:meth:`ClusterStore.snapshot`) are derived per kind, only for the kinds that changed since
  the last one; the objects are shared, never copied.

The store may be read from several threads: its maps change under a lock, and snapshots are immutable. How the
objects arrive (list + watch) is :mod:`operators.sources.cache`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from operators.api.errors import FieldError
from operators.engine.cluster.snapshot import Snapshot, parse_object
from operators.sources.kinds import SLOTS, Kind, union

logger = logging.getLogger("netaware.cache")


@dataclass(frozen=True, slots=True)
class Change:
    """One object's change: ``old`` None for an addition, ``new`` None for a deletion (parsed records)."""

    kind: str
    old: Any
    new: Any


Listener = Callable[[list[Change]], None]


class Mailbox:
    """The changes of every listener on one event loop, coalesced: batches published while one delivery waits for
    the loop join it, so the loop is woken once per wait, not once per event. Each wake from another thread costs a
    write to the loop's self-pipe; a burst of watch events cost one per event per listener (19,000 in a 250-AppGroup
    burst on the emulator, a fifth of the operator's main-thread time). The order of the changes is kept.

    One mailbox serves all the loop's listeners, in the order they subscribed, within one call: a listener never
    hears of a change before those subscribed before it. (A mailbox per listener, each coalescing on its own, let
    a batch published while the first listener's delivery ran reach the second listener first: the gate keeper
    saw a pod bound before the kept index counted it there, and planned other pods into its room.) A batch goes to
    the listeners subscribed when it was published: a later one got the state it includes from :meth:`subscribe`."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.listeners: tuple[Listener, ...] = ()
        self._lock = threading.Lock()
        self._pending: list[tuple[list[Change], tuple[Listener, ...]]] = []

    def add(self, listener: Listener) -> None:
        with self._lock:
            self.listeners = (*self.listeners, listener)

    def post(self, changes: list[Change]) -> None:
        with self._lock:
            waiting = bool(self._pending)
            if waiting and self._pending[-1][1] is self.listeners:
                self._pending[-1][0].extend(changes)
            else:
                self._pending.append((list(changes), self.listeners))
        if waiting:
            return  # a delivery is already scheduled: it takes these too
        try:
            if self.loop is _running_loop():
                self.loop.call_soon(self._deliver)
            else:
                self.loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:  # that loop is closed: its component stopped, nothing is kept for it
            with self._lock:
                self._pending.clear()

    def _deliver(self) -> None:
        with self._lock:
            batches, self._pending = self._pending, []
        for changes, listeners in batches:
            for listener in listeners:
                listener(changes)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


@dataclass
class KindStore:
    """One kind's objects, parsed and as they arrived (trimmed), keyed by (namespace, name)."""

    kind: Kind
    objects: dict[tuple[str, str], Any] = field(default_factory=dict)
    trimmed: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    version: int = 0  # bumped on every change: snapshots of this kind are rebuilt when it moved
    synced: bool = False
    unreadable: dict[tuple[str, str], str] = field(default_factory=dict)


def object_key(raw: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) of an object as sent; None when it has no readable name (it is ignored)."""
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        return None
    namespace = meta.get("namespace")
    return (namespace if isinstance(namespace, str) else "", meta["name"])


class ClusterStore:
    def __init__(self, kinds: Iterable[Kind], namespaces: Iterable[str] = ()) -> None:
        self.kinds = union(kinds)
        self.namespaces = frozenset(namespaces)  # namespaced objects only from these; empty: all
        self._stores = {kind.name: KindStore(kind) for kind in self.kinds}
        self._lock = threading.Lock()
        self._listeners: list[Listener | Mailbox] = []
        self._slots: dict[str, tuple[int, tuple[Any, ...]]] = {}
        self._snapshots: dict[frozenset[str], tuple[tuple[int, ...], Snapshot]] = {}
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

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

    def version(self, kind: Kind) -> int:
        """A number that moves on every change of ``kind``: what a caller derived from :meth:`objects` is current
        while it has not moved."""
        with self._lock:
            return self._stores[kind.name].version

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
            if loop is None:
                self._listeners.append(listener)
            else:
                mailbox = next((held for held in self._listeners if isinstance(held, Mailbox) and held.loop is loop),
                               None)  # fmt: skip
                if mailbox is None:
                    mailbox = Mailbox(loop)
                    self._listeners.append(mailbox)
                mailbox.add(listener)
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

    def _parse(self, store: KindStore, key: tuple[str, str], trimmed: dict[str, Any]) -> Any:
        try:
            parsed = parse_object({"apiVersion": store.kind.api_version, "kind": store.kind.kind, **trimmed})
        except (FieldError, ValueError, TypeError) as error:
            if store.unreadable.get(key) != str(error):
                logger.warning("%s %s ignored: %s", store.kind.kind, "/".join(p for p in key if p), error)
            store.unreadable[key] = str(error)
            return None
        store.unreadable.pop(key, None)
        return parsed[1] if parsed is not None else None

    def _apply(self, store: KindStore, event_type: str, raw: dict[str, Any]) -> Change | None:
        """One watch event; the change it makes (None when the trimmed object is unchanged or unreadable)."""
        key = object_key(raw)
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

    def _replace(self, store: KindStore, items: list[dict[str, Any]], seen: set[tuple[str, str]]) -> list[Change]:
        """One page of a fresh list: what it added or changed (its keys are added to ``seen``)."""
        changes: list[Change] = []
        for raw in items:
            key = object_key(raw)
            if key is not None:
                seen.add(key)
            change = self._apply(store, "MODIFIED", raw)
            if change is not None:
                changes.append(change)
        return changes

    def _drop_unseen(self, store: KindStore, seen: set[tuple[str, str]]) -> list[Change]:
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
        for listener in list(self._listeners):
            if isinstance(listener, Mailbox):
                listener.post(changes)
            else:
                listener(changes)

    def _mark_synced(self, store: KindStore) -> None:
        """(Under the lock.) Wakes whoever waits for the first sync once every kind is listed."""
        store.synced = True
        if self.ready:
            for loop, event in self._waiters:
                with contextlib.suppress(RuntimeError):  # that loop is closed
                    loop.call_soon_threadsafe(event.set)
            self._waiters.clear()

    def unreadable(self, kind: Kind) -> Mapping[tuple[str, str], str]:
        """Objects of ``kind`` that did not parse, with why (they are left out of snapshots)."""
        return dict(self._stores[kind.name].unreadable)
