"""The live extender's scheduling state, kept by delta from the process's cluster cache.

* A pod change is applied to one :class:`~operators.engine.cluster.usage.PodUsage` (used bandwidth and
  pod count of its node, AppGroup members) and gives the next index at once: the tables' used columns are
  copied with the touched rows updated (microseconds at 5,000 nodes), nothing is re-read.
* An AppGroup or NetworkTopology change gives an index with the new custom resources over the same tables.
* A node changed in place (labels, annotations, taints, allocatable), or its NodeSLO, gives an index whose
  tables have that node's row computed again (:meth:`ClusterIndex.with_nodes`: the same rows, copies of the
  columns that change). Node heartbeats are no change at all (the cache's trim drops them).
* A node added or deleted moves the rows: the tables are rebuilt, at most once per ``rebuild_interval`` seconds;
  until then requests are served from the last consistent index.

Requests only ever read :meth:`LiveIndex.current`. Only the rebuild after a node is added or deleted takes time in
proportion to the nodes (about ten milliseconds at 5,000); it runs on the request loop, between two requests: a
worker thread was measured worse (bench_responsiveness: CPython hands the loop the interpreter back only every few
milliseconds while the thread computes, so every request in that window waited several times).
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
        self.rebuilds = 0  # tables built from the nodes (a node added or deleted)
        self.deltas = 0  # indexes derived by delta
        self._index: ClusterIndex | None = None
        self._touched: set[str] = set()
        self._pods_changed = False
        self._resources_changed = False
        self._nodes_modified: set[str] = set()  # nodes changed in place (or their NodeSLOs) since the last index
        self._nodes_changed = asyncio.Event()  # a node added or deleted: the rows move
        self.on_changes(cache.subscribe(self.on_changes))

    @property
    def ready(self) -> bool:
        """The cache has listed every kind and the first tables are built."""
        return self._index is not None and self.cache.ready

    def on_changes(self, changes: list[Change]) -> None:
        for change in changes:
            if change.kind == PODS.name:
                self._touched |= self.usage.apply(change.old, change.new)
                self._pods_changed = True
            elif change.kind == NODES.name:
                if change.old is None or change.new is None:
                    self._nodes_changed.set()
                else:
                    self._nodes_modified.add(change.new.name)
            elif change.kind == NODESLOS.name:
                self._nodes_modified.add((change.new or change.old).metadata.name)
            else:
                self._resources_changed = True

    def current(self) -> ClusterIndex:
        """The index of the latest consistent state: pod, custom-resource and in-place node changes applied now
        (cheap), nodes added or deleted once the follower has rebuilt the tables."""
        if self._index is None:
            self._rebuild()
        index = self._index
        assert index is not None
        if self._resources_changed:
            self._resources_changed = False
            index = index.with_snapshot(self._same_nodes(index.snapshot))
            self.deltas += 1
        if self._nodes_modified and not self._nodes_changed.is_set():
            modified, self._nodes_modified = self._nodes_modified, set()
            index = index.with_nodes(self.cache.snapshot(without=(PODS,)), modified, self.default_bandwidth)
            self.deltas += 1
        if self._pods_changed:
            self._pods_changed = False
            index = index.with_usage(self._touched)
            self._touched = set()
            self.deltas += 1
        self._index = index
        return index

    def _same_nodes(self, held: Snapshot) -> Snapshot:
        """The cache's custom resources over the nodes and NodeSLOs of the tables in use (a node added or deleted
        waits for the rebuild, so that the index never mixes two views of the nodes)."""
        fresh = dataclasses.replace(self.cache.snapshot(without=(PODS,)), nodes=held.nodes, node_slos=held.node_slos)
        if "node_by_name" in held.__dict__:
            fresh.__dict__["node_by_name"] = held.node_by_name
        return fresh

    def _rebuild(self) -> None:
        """New tables from the nodes (the usage carries over); the default table is built now, off the request
        path."""
        index = ClusterIndex(self.cache.snapshot(without=(PODS,)), self.usage)
        index.table(self.default_bandwidth)
        self._index = index
        self._touched = set()
        self._pods_changed = self._resources_changed = False
        self._nodes_modified = set()
        self.rebuilds += 1

    async def follow(self, stop: asyncio.Event) -> None:
        """Build the first tables once the cache has synced, then rebuild after nodes are added or deleted, at a
        bounded rate."""
        await self.cache.wait_synced()
        first = self._index is None
        self._nodes_changed.clear()
        self._rebuild()
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
            self._rebuild()
            with contextlib.suppress(TimeoutError):  # the bound: no more than one rebuild per interval
                await asyncio.wait_for(stop.wait(), max(0.0, started + self.rebuild_interval - loop.time()))


LIVE_KEY: web.AppKey[LiveIndex] = web.AppKey("live_index", LiveIndex)
