"""What the webhook knows about the cluster: AppGroups and Namespaces, in memory.

Admissions read this view and never wait on the API server. It is filled once from a snapshot
(``-f PATH``), or kept current by list + watch (:class:`~operators.sources.live.ClusterCache`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from kubernetes_asyncio import client

from operators.api.appgroup import AppGroup
from operators.engine.cluster.objects import Namespace
from operators.engine.cluster.snapshot import Snapshot
from operators.sources.cache import ClusterCache
from operators.sources.kinds import APPGROUPS, NAMESPACES


class ClusterView:
    def __init__(self, snapshot: Snapshot | None = None) -> None:
        self._fixed = snapshot
        self._live = ClusterCache((APPGROUPS, NAMESPACES)) if snapshot is None else None
        self._by_key: tuple[Snapshot, dict[tuple[str, str], AppGroup]] | None = None

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> ClusterView:
        return cls(snapshot)

    @property
    def ready(self) -> bool:
        return self._live is None or self._live.ready

    def _snapshot(self) -> Snapshot:
        return self._live.snapshot() if self._live is not None else self._fixed or Snapshot()

    @property
    def app_groups(self) -> Mapping[tuple[str, str], AppGroup]:
        return {(group.metadata.namespace, group.metadata.name): group for group in self._snapshot().app_groups}

    @property
    def namespaces(self) -> Mapping[str, Namespace]:
        return self._snapshot().namespace_by_name

    async def follow(self, api: client.ApiClient, stop: asyncio.Event) -> None:
        if self._live is not None:
            await self._live.follow(api, stop)
