"""A snapshot kept current by list + watch (kubernetes-asyncio), for the long-running HTTP shells.

Each followed kind is listed, then watched from the list's resourceVersion; a dropped or expired
watch lists again. Objects are kept as raw dicts; ``snapshot()`` rebuilds the typed snapshot only
when something changed since the last call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from operators.api import keys
from operators.engine.cluster.snapshot import Snapshot, SnapshotBuilder

logger = logging.getLogger("netaware.live")


@dataclass(frozen=True)
class Followed:
    """A kind to follow: how to list it, and its apiVersion/kind to complete list items."""

    name: str
    api_version: str
    kind: str
    lister: Callable[[client.ApiClient], Callable[..., Awaitable[Any]]]
    args: tuple[str, ...] = ()


def _custom(api: client.ApiClient) -> Callable[..., Awaitable[Any]]:
    return client.CustomObjectsApi(api).list_cluster_custom_object


NODES = Followed("nodes", "v1", "Node", lambda api: client.CoreV1Api(api).list_node)
PODS = Followed("pods", "v1", "Pod", lambda api: client.CoreV1Api(api).list_pod_for_all_namespaces)
NAMESPACES = Followed("namespaces", "v1", "Namespace", lambda api: client.CoreV1Api(api).list_namespace)


def _custom_kind(plural: str, group: str, kind: str) -> Followed:
    return Followed(plural, f"{group}/{keys.V1ALPHA1}", kind, _custom, (group, keys.V1ALPHA1, plural))


APPGROUPS = _custom_kind("appgroups", keys.APPGROUP_GROUP, "AppGroup")
NETWORKTOPOLOGIES = _custom_kind("networktopologies", keys.NETWORKTOPOLOGY_GROUP, "NetworkTopology")
NODESLOS = _custom_kind("nodeslos", keys.SLO_GROUP, "NodeSLO")
NODEMETRICS = _custom_kind("nodemetrics", keys.SLO_GROUP, "NodeMetric")


class LiveSnapshot:
    def __init__(self, kinds: tuple[Followed, ...]) -> None:
        self.kinds = kinds
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {kind.name: {} for kind in kinds}
        self.synced: dict[str, bool] = dict.fromkeys(self.objects, False)
        self.version = 0
        self._built: tuple[int, Snapshot] | None = None

    @property
    def ready(self) -> bool:
        return all(self.synced.values())

    def snapshot(self) -> Snapshot:
        if self._built is None or self._built[0] != self.version:
            builder = SnapshotBuilder()
            for kind in self.kinds:
                for raw in self.objects[kind.name].values():
                    try:
                        builder.add({"apiVersion": kind.api_version, "kind": kind.kind, **raw})
                    except ValueError as error:  # one unreadable object must not hide the others
                        logger.warning("%s %s ignored: %s", kind.kind, (raw.get("metadata") or {}).get("name"), error)
            self._built = (self.version, builder.build())
        return self._built[1]

    def _apply(self, kind: str, event_type: str, raw: dict[str, Any]) -> None:
        meta = raw.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        if event_type == "DELETED":
            self.objects[kind].pop(key, None)
        else:
            self.objects[kind][key] = raw
        self.version += 1

    async def follow(self, api: client.ApiClient, stop: asyncio.Event) -> None:
        """List and watch every kind until ``stop`` is set."""
        tasks = [asyncio.create_task(self._follow_one(kind, api, stop)) for kind in self.kinds]
        await stop.wait()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _follow_one(self, kind: Followed, api: client.ApiClient, stop: asyncio.Event) -> None:
        lister = kind.lister(api)
        while not stop.is_set():
            try:
                listing = api.sanitize_for_serialization(await lister(*kind.args))
                self.objects[kind.name].clear()
                for item in listing.get("items") or []:
                    self._apply(kind.name, "ADDED", item)
                self.synced[kind.name] = True
                self.version += 1
                version = (listing.get("metadata") or {}).get("resourceVersion")
                async with watch.Watch().stream(
                    lister, *kind.args, resource_version=version, timeout_seconds=300
                ) as events:
                    async for event in events:
                        raw = event.get("raw_object") or api.sanitize_for_serialization(event["object"])
                        self._apply(kind.name, event["type"], raw)
            except asyncio.CancelledError:
                raise
            except ApiException as error:
                await asyncio.sleep(self._pause_after(kind, error))
            except Exception as error:  # a dropped or expired watch: list again after a pause
                logger.info("watch of %s ended (%s); listing again", kind.name, error)
                await asyncio.sleep(0.5)

    def _pause_after(self, kind: Followed, error: ApiException) -> float:
        """How long to wait before listing again: a kind the API server does not serve (its CRD is not installed)
        counts as empty and is asked for again every 30 s; a 429 waits its Retry-After."""
        if error.status == 404:
            if not self.synced[kind.name]:
                logger.warning(
                    "%s are not served (is the CRD installed?): treated as none, retrying every 30 s", kind.name
                )
            self.objects[kind.name].clear()
            self.synced[kind.name] = True
            self.version += 1
            return 30.0
        headers: Any = error.headers or {}
        retry_after = headers.get("Retry-After")
        logger.info("watch of %s ended (%s %s); listing again", kind.name, error.status, error.reason)
        try:
            return min(max(float(retry_after), 0.5), 30.0) if retry_after else 0.5
        except ValueError:
            return 0.5
