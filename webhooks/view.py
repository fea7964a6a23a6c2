"""What the webhook knows about the cluster: AppGroups and Namespaces, in memory.

Admissions read this view and never wait on the API server. It is filled once from a snapshot
(``-f PATH``), or kept current by list + watch through kubernetes-asyncio (re-listing after a
dropped or expired watch).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pydantic
from kubernetes_asyncio import client, watch

from operators.api.appgroup import AppGroup
from operators.engine.snapshot import Namespace, Snapshot

logger = logging.getLogger("netaware.webhook")

APPGROUPS = ("appgroup.diktyo.x-k8s.io", "v1alpha1", "appgroups")


class ClusterView:
    def __init__(self) -> None:
        self.app_groups: dict[tuple[str, str], AppGroup] = {}
        self.namespaces: dict[str, Namespace] = {}
        self._synced = {"appgroups": False, "namespaces": False}
        self.changed = asyncio.Event()

    @property
    def ready(self) -> bool:
        return all(self._synced.values())

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> ClusterView:
        view = cls()
        for group in snapshot.app_groups:
            view.app_groups[(group.metadata.namespace or "default", group.metadata.name)] = group
        view.namespaces = {namespace.name: namespace for namespace in snapshot.namespaces}
        view._synced = dict.fromkeys(view._synced, True)
        return view

    # -- live ----------------------------------------------------------------------------------------

    def _apply_appgroup(self, event_type: str, raw: dict[str, Any]) -> None:
        meta = raw.get("metadata") or {}
        key = (meta.get("namespace") or "default", meta.get("name") or "")
        if event_type == "DELETED":
            self.app_groups.pop(key, None)
            return
        try:
            self.app_groups[key] = AppGroup.model_validate(raw)
        except pydantic.ValidationError as error:
            logger.warning("AppGroup %s/%s ignored: %s", key[0], key[1], error.errors()[0]["msg"])
            self.app_groups.pop(key, None)

    def _apply_namespace(self, event_type: str, raw: dict[str, Any]) -> None:
        name = (raw.get("metadata") or {}).get("name") or ""
        if event_type == "DELETED":
            self.namespaces.pop(name, None)
        else:
            self.namespaces[name] = Namespace.parse(raw)

    async def follow(self, api: client.ApiClient, stop: asyncio.Event) -> None:
        """List and watch AppGroups and Namespaces until ``stop`` is set."""
        custom = client.CustomObjectsApi(api)
        core = client.CoreV1Api(api)

        async def list_appgroups(**kwargs: Any) -> Any:
            return await custom.list_cluster_custom_object(*APPGROUPS, **kwargs)

        async def list_namespaces(**kwargs: Any) -> Any:
            return await core.list_namespace(**kwargs)

        tasks = [
            asyncio.create_task(
                self._follow_one(
                    "appgroups",
                    list_appgroups,
                    custom.list_cluster_custom_object,
                    APPGROUPS,
                    self._apply_appgroup,
                    api,
                    stop,
                )
            ),
            asyncio.create_task(
                self._follow_one(
                    "namespaces", list_namespaces, core.list_namespace, (), self._apply_namespace, api, stop
                )
            ),
        ]
        await stop.wait()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _follow_one(
        self,
        kind: str,
        lister: Callable[..., Awaitable[Any]],
        watched: Any,
        args: tuple[str, ...],
        apply: Callable[[str, dict[str, Any]], None],
        api: client.ApiClient,
        stop: asyncio.Event,
    ) -> None:
        while not stop.is_set():
            try:
                listing = api.sanitize_for_serialization(await lister())
                items = listing.get("items") or []
                if kind == "appgroups":
                    self.app_groups.clear()
                else:
                    self.namespaces.clear()
                for item in items:
                    apply("ADDED", item)
                self._synced[kind] = True
                self.changed.set()
                version = (listing.get("metadata") or {}).get("resourceVersion")
                stream = watch.Watch()
                async with stream.stream(watched, *args, resource_version=version, timeout_seconds=300) as events:
                    async for event in events:
                        raw = event.get("raw_object") or api.sanitize_for_serialization(event["object"])
                        apply(event["type"], raw)
                        self.changed.set()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a dropped or expired watch: list again after a pause
                logger.info("watch of %s ended (%s); listing again", kind, error)
                await asyncio.sleep(0.5)
