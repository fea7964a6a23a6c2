"""The live extender's scheduling state, kept by delta from the process's cluster cache.

* A pod change is applied to one :class:`~operators.engine.cluster.usage.PodUsage` (used bandwidth and
  pod count of its node, AppGroup members) and gives the next index at once: the tables' used columns are
  copied with the touched rows updated (microseconds at 5,000 nodes), nothing is re-read.
* An AppGroup or NetworkTopology change gives an index with the new custom resources over the same tables.
* A node or NodeSLO change (rows, places or capacities move) cannot be applied as a delta: the tables are
  rebuilt in a worker thread, at most once per ``rebuild_interval`` seconds, from the nodes and the usage as they
  were when it started; the pod changes that arrive meanwhile are applied to the new tables by delta when they are
  put in use. Until then requests are served from the last consistent index. Node heartbeats are no change at all
  (the cache's trim drops them).

Requests only ever read :meth:`LiveIndex.current`, which never waits for a rebuild: the rebuild (tens of
milliseconds at 5,000 nodes) runs beside the loop that answers them, not on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging

from aiohttp import web

from operators.api.quantity import Quantity
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.cluster.usage import PodUsage
from operators.engine.scheduling.index import ClusterIndex
from operators.sources.cache import ClusterCache
from operators.sources.kinds import APPGROUP_SPECS, NETWORKTOPOLOGIES, NODES, NODESLOS, PODS
from operators.sources.store import Change

logger = logging.getLogger("netaware.extender")

KINDS = (NODES, PODS, APPGROUP_SPECS, NETWORKTOPOLOGIES, NODESLOS)
REBUILD_INTERVAL = 1.0


class LiveIndex:
    """See the module docstring."""

    def __init__(
        self, cache: ClusterCache, default_bandwidth: Quantity | None, rebuild_interval: float = REBUILD_INTERVAL
    ) -> None:
        self.cache = cache
        self.default_bandwidth = default_bandwidth
        self.rebuild_interval = rebuild_interval
        self.usage = PodUsage()
        self.rebuilds = 0  # tables built from the nodes (a delta could not be applied)
        self.deltas = 0  # indexes derived by delta
        self._index: ClusterIndex | None = None
        self._touched: set[str] = set()
        self._pods_changed = False
        self._resources_changed = False
        self._nodes_changed = asyncio.Event()
        # while a rebuild runs: the nodes whose usage changed, and whether custom resources did, since it started
        self._rebuilding: tuple[set[str], list[bool]] | None = None
        self.on_changes(cache.subscribe(self.on_changes))

    @property
    def ready(self) -> bool:
        """The cache has listed every kind and the first tables are built."""
        return self._index is not None and self.cache.ready

    def on_changes(self, changes: list[Change]) -> None:
        for change in changes:
            if change.kind == PODS.name:
                touched = self.usage.apply(change.old, change.new)
                self._touched |= touched
                self._pods_changed = True
                if self._rebuilding is not None:
                    self._rebuilding[0].update(touched)
            elif change.kind in (NODES.name, NODESLOS.name):
                self._nodes_changed.set()
            else:
                self._resources_changed = True
                if self._rebuilding is not None:
                    self._rebuilding[1][0] = True

    def current(self) -> ClusterIndex:
        """The index of the latest consistent state: pod and custom-resource changes applied now (cheap), node
        changes once the background rebuild has run."""
        if self._index is None:
            self._rebuild()
        index = self._index
        assert index is not None
        if self._resources_changed:
            self._resources_changed = False
            index = index.with_snapshot(self._same_nodes(index.snapshot))
            self.deltas += 1
        if self._pods_changed:
            self._pods_changed = False
            index = index.with_usage(self._touched)
            self._touched = set()
            self.deltas += 1
        self._index = index
        return index

    def _same_nodes(self, held: Snapshot) -> Snapshot:
        """The cache's custom resources over the nodes and NodeSLOs of the tables in use (a node change waits
        for the rebuild, so that the index never mixes two views of the nodes)."""
        fresh = dataclasses.replace(self.cache.snapshot(without=(PODS,)), nodes=held.nodes, node_slos=held.node_slos)
        if "node_by_name" in held.__dict__:
            fresh.__dict__["node_by_name"] = held.node_by_name
        return fresh

    def _rebuild(self) -> None:
        """New tables from the nodes, on the calling thread (the first request before the follower built any)."""
        self._index = self._build(self.cache.snapshot(without=(PODS,)), self._used(), self._usage_problems())
        self._touched = set()
        self._pods_changed = self._resources_changed = False

    async def _rebuild_beside(self) -> None:
        """New tables from the nodes, built in a worker thread from the usage as it is now; what changes meanwhile
        (pods, custom resources) is applied to them when they are put in use."""
        used, problems = self._used(), self._usage_problems()
        since: tuple[set[str], list[bool]] = (set(), [False])
        self._rebuilding = since
        try:
            snapshot = await asyncio.to_thread(self.cache.snapshot, (PODS,))
            index = await asyncio.to_thread(self._build, snapshot, used, problems)
        finally:
            self._rebuilding = None
        self._index = index
        self._touched = since[0]
        self._pods_changed = bool(since[0])
        self._resources_changed = since[1][0]

    def _used(self) -> dict[str, tuple[int, int]]:
        return {name: self.usage.used(name) for name in list(self.usage.sums)}

    def _usage_problems(self) -> dict[str, str]:
        return {name: problem for name in list(self.usage.problems) if (problem := self.usage.problem(name))}

    def _build(self, snapshot: Snapshot, used: dict[str, tuple[int, int]], problems: dict[str, str]) -> ClusterIndex:
        """The index of ``snapshot`` (without pods) over the usage as ``used`` and ``problems`` froze it, its default
        table built (pure: safe in a worker thread)."""
        index = ClusterIndex(snapshot, self.usage)
        index.__dict__["used"], index.__dict__["usage_problems"] = used, problems
        index.table(self.default_bandwidth)
        index.position  # noqa: B018 - computed here, not on the first request
        self.rebuilds += 1
        return index

    async def follow(self, stop: asyncio.Event) -> None:
        """Build the first tables once the cache has synced, then rebuild after node changes at a bounded rate."""
        await self.cache.wait_synced()
        first = self._index is None
        self._nodes_changed.clear()
        await self._rebuild_beside()
        if first:
            # What the first sync built (100,000 pods, 5,000 nodes: millions of objects) lives as long as the
            # process and holds no reference cycles; out of the collector's sight, a full collection does not walk
            # it (tens of milliseconds on the request path otherwise). Freed objects are still freed (refcounts).
            gc.collect()
            gc.freeze()
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            waiting = asyncio.ensure_future(self._nodes_changed.wait())
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait((waiting, stopping), return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            stopping.cancel()
            if stop.is_set():
                return
            started = loop.time()
            self._nodes_changed.clear()
            await self._rebuild_beside()
            with contextlib.suppress(TimeoutError):  # the bound: no more than one rebuild per interval
                await asyncio.wait_for(stop.wait(), max(0.0, started + self.rebuild_interval - loop.time()))


LIVE_KEY: web.AppKey[LiveIndex] = web.AppKey("live_index", LiveIndex)
