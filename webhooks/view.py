"""What the webhook knows about the cluster: AppGroups and Namespaces, in memory.

AppGroups are kept as the gate decision reads them (:data:`~operators.sources.kinds.APPGROUP_GATES`): their status
writes but for the topology order and the Ready condition change nothing here.

Admissions read this view and never wait on the API server. It is filled once from a snapshot
(``-f PATH``), or kept current by list + watch (:class:`~operators.sources.live.ClusterCache`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from kubernetes_asyncio import client

from operators.api.appgroup import AppGroup
from operators.engine.cluster.objects import Namespace
from operators.engine.cluster.snapshot import Snapshot
from operators.sources.cache import ClusterCache
from operators.sources.kinds import APPGROUP_GATES, NAMESPACES
from operators.sources.store import Change


class ClusterView:
    def __init__(self, snapshot: Snapshot | None = None) -> None:
        self._fixed = snapshot
        self._live = ClusterCache((APPGROUP_GATES, NAMESPACES)) if snapshot is None else None

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> ClusterView:
        return cls(snapshot)

    @property
    def ready(self) -> bool:
        return self._live is None or self._live.ready

    def _snapshot(self) -> Snapshot:
        return self._live.snapshot() if self._live is not None else self._fixed or Snapshot()

    def app_groups_named(self, name: str) -> tuple[AppGroup, ...]:
        """The AppGroups called ``name``, in every namespace."""
        return self._snapshot().app_groups_by_name.get(name, ())

    @property
    def namespaces(self) -> Mapping[str, Namespace]:
        return self._snapshot().namespace_by_name

    def on_namespace_deleted(self, forget: Callable[[str], None]) -> None:
        """``forget(name)`` for every namespace deleted from now on (what is kept per namespace goes with it)."""
        if self._live is None:
            return

        def listen(changes: list[Change]) -> None:
            for change in changes:
                if change.kind == NAMESPACES.name and change.new is None and change.old is not None:
                    forget(change.old.name)

        self._live.subscribe(listen)

    async def follow(self, api: client.ApiClient, stop: asyncio.Event) -> None:
        if self._live is not None:
            await self._live.follow(api, stop)
