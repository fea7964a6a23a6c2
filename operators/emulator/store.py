"""The emulator's object store: objects by key, one cluster-wide ``resourceVersion`` counter, the event history
per resource that watches replay (compacted past ``history_limit``), and the condition watches wait on."""

from __future__ import annotations

import asyncio
import bisect
import collections
import copy
import datetime
import itertools
import json
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import kmock
import orjson

from operators.api.errors import FieldError
from operators.api.selectors import EVERYTHING, Selector, parse_selector
from operators.emulator.errors import bad_request, status_error

ObjectKey = tuple[str, str | None, str]  # (resource "group/version/plural", namespace, name)
FieldTerms = list[tuple[str, bool, str]]  # (field path, equal?, value)
HISTORY_LIMIT = 10_000  # watch events kept per resource before older versions are "compacted"
MAX_OBJECT_BYTES = 1_572_864  # etcd's default --max-request-bytes (1.5 MiB)
# Every successful write: (monotonic time, verb, plural, namespace, name, subresource), for assertions.
Write = tuple[float, str, str, str | None, str, str | None]


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def resource_key(resource: kmock.resource) -> str:
    return f"{resource.group}/{resource.version}/{resource.plural}"


def check_size(obj: Mapping[str, Any]) -> None:
    """etcd refuses an object above 1.5 MiB, and the API server answers 413."""
    size = len(json.dumps(obj, separators=(",", ":")))
    if size > MAX_OBJECT_BYTES:
        raise status_error(413, "RequestEntityTooLarge", f"etcdserver: request is too large ({size} bytes)")


def clone(obj: Any) -> Any:
    """A deep copy of a JSON object (orjson: ten times ``copy.deepcopy``'s speed, which made a paged list of
    100,000 pods take a minute); anything orjson cannot carry is deep-copied."""
    try:
        return orjson.loads(orjson.dumps(obj))
    except (TypeError, orjson.JSONEncodeError):
        return copy.deepcopy(obj)


@dataclass
class Event:
    rv: int
    type: str
    obj: dict[str, Any]


@dataclass
class ObjectStore:
    objects: dict[ObjectKey, dict[str, Any]] = field(default_factory=dict)
    history: dict[str, collections.deque[Event]] = field(default_factory=dict)
    compacted: dict[str, int] = field(default_factory=dict)  # resource -> the oldest version still replayable
    last_rv: int = 999
    watch_epoch: int = 0  # bumped to end every open watch
    history_limit: int = HISTORY_LIMIT
    writes: list[Write] = field(default_factory=list)
    _rv: Iterator[int] = field(default_factory=lambda: itertools.count(1000))
    _next_write: asyncio.Future[None] | None = None
    # resource -> its keys in (namespace, name) order, kept until a key comes or goes: a paged list of 100,000
    # pods reads it once per page instead of sorting every object of every resource
    _order: dict[str, list[ObjectKey]] = field(default_factory=dict)

    def next_write(self) -> asyncio.Future[None]:
        """A future that completes at the next write. Taken before reading the history, it misses no write; a
        watch waits on it with a timeout that leaves it intact (``asyncio.wait``), where ``wait_for`` around a
        ``Condition.wait`` could leave the condition's lock released under cancellation and hang the loop's
        shutdown (Python 3.11)."""
        loop = asyncio.get_running_loop()
        future = self._next_write
        if future is None or future.done() or future.get_loop() is not loop:
            future = self._next_write = loop.create_future()
        return future

    def next_rv(self) -> str:
        self.last_rv = next(self._rv)
        return str(self.last_rv)

    def stamp_new(self, obj: dict[str, Any]) -> None:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", now())
        meta.setdefault("generation", 1)
        meta["resourceVersion"] = self.next_rv()

    def put(
        self, resource: kmock.resource, key: ObjectKey, obj: dict[str, Any], event: str, sub: str | None = None
    ) -> None:
        """Store ``obj`` (already carrying its new resourceVersion) and record the event."""
        if key not in self.objects:
            self._order.pop(key[0], None)
        self.objects[key] = obj
        self.record(resource, event, obj, sub)

    def delete(self, resource: kmock.resource, key: ObjectKey, gone: dict[str, Any]) -> None:
        del self.objects[key]
        self._order.pop(key[0], None)
        self.record(resource, "DELETED", gone)

    def record(self, resource: kmock.resource, event: str, obj: dict[str, Any], sub: str | None = None) -> None:
        meta = obj.get("metadata", {})
        stamp = asyncio.get_running_loop().time() if _has_loop() else 0.0
        self.writes.append((stamp, event, resource.plural or "", meta.get("namespace"), meta.get("name", ""), sub))
        key = resource_key(resource)
        events = self.history.setdefault(key, collections.deque())
        events.append(Event(int(obj["metadata"]["resourceVersion"]), event, clone(obj)))
        while len(events) > self.history_limit:
            self.compacted[key] = events.popleft().rv

    async def notify(self) -> None:
        """Wake every watch waiting for a write."""
        future = self._next_write
        if future is not None and not future.done():
            future.set_result(None)

    def compact(self) -> None:
        """Forget the event history: resuming a watch from any older version now gets 410 Gone."""
        for key, events in self.history.items():
            events.clear()
            self.compacted[key] = self.last_rv

    def matching(self, key: str, namespace: str | None, labels: Selector, fields: FieldTerms) -> list[dict[str, Any]]:
        """The objects of resource ``key`` (in ``namespace`` unless None) that the selectors select, in
        (namespace, name) order."""
        return self.page(key, namespace, labels, fields)[0]

    def page(
        self,
        key: str,
        namespace: str | None,
        labels: Selector,
        fields: FieldTerms,
        after: tuple[str, str] | None = None,
        limit: int | None = None,
    ) -> tuple[list[dict[str, Any]], tuple[str, str] | None]:
        """Like :meth:`matching`, from the first object past ``after`` ((namespace, name)) and at most ``limit``
        of them; and the (namespace, name) to continue after when more are left."""
        order = self._order.get(key)
        if order is None:
            order = self._order[key] = sorted(
                (stored for stored in self.objects if stored[0] == key), key=lambda k: (k[1] or "", k[2])
            )
        start = 0 if after is None else bisect.bisect_right(order, after, key=lambda k: (k[1] or "", k[2]))
        found: list[dict[str, Any]] = []
        for position in range(start, len(order)):
            stored = order[position]
            obj = self.objects[stored]
            if (namespace is None or stored[1] == namespace) and selected(obj, labels, fields):
                if limit is not None and len(found) == limit:
                    previous = order[position - 1]
                    return found, (previous[1] or "", previous[2])
                found.append(obj)
        return found, None


def label_selector(params: Mapping[str, str]) -> Selector:
    text = params.get("labelSelector")
    if not text:
        return EVERYTHING
    try:
        return parse_selector(text)
    except FieldError as error:
        raise bad_request(str(error)) from None


def field_selector(params: Mapping[str, str]) -> FieldTerms:
    text = params.get("fieldSelector") or ""
    result = []
    for term in filter(None, (part.strip() for part in text.split(","))):
        if "!=" in term:
            field_path, value = term.split("!=", 1)
            result.append((field_path.strip(), False, value.strip()))
        elif "=" in term:
            field_path, value = term.replace("==", "=").split("=", 1)
            result.append((field_path.strip(), True, value.strip()))
        else:
            raise bad_request(f"invalid field selector: {term!r}")
    return result


def selected(obj: Mapping[str, Any], labels: Selector, fields: FieldTerms) -> bool:
    if not labels.matches((obj.get("metadata") or {}).get("labels") or {}):
        return False
    return all((_field_value(obj, path) == value) == equal for path, equal, value in fields)


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return "" if node is None else str(node)


def _store_order(item: tuple[ObjectKey, Any]) -> tuple[str, str, str]:
    (resource, namespace, name), _ = item
    return resource, namespace or "", name


def _has_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
