"""A cluster index kept by delta from the process's cluster cache: the live extender's scheduling state, and what
the AppGroup controller's plans read (one index for every plan, no rebuild per plan).

* A pod change is applied to one :class:`~operators.engine.cluster.usage.PodUsage` (used bandwidth and
  pod count of its node, AppGroup members) and gives the next index at once: the tables' used columns are
  copied with the touched rows updated (microseconds at 5,000 nodes), nothing is re-read.
* An AppGroup or NetworkTopology change gives an index with the new custom resources over the same tables.
* A node added, deleted or changed (labels, annotations, taints, allocatable), or its NodeSLO, gives an index
  whose table is derived from the last one (:meth:`ClusterIndex.with_nodes`): the rows of the other nodes are
  taken by one numpy gather per column, only those nodes' rows are computed. Node heartbeats are no change at all
  (the cache's trim drops them).

Requests only ever read :meth:`LiveIndex.current`, and nothing there takes Python work per node: the tables are
built from the nodes once, when the cache has first synced. The other designs were measured (bench_responsiveness,
5,000 nodes, a node change about every second): rebuilding the tables on the loop after a node change held a
request back by the rebuild (p99 16-36 ms against the floor's 5-9 ms); rebuilding in a worker thread was worse
still (16.5 ms at p99 with changes in place: CPython hands the loop the interpreter back only every few
milliseconds while the thread computes, so every request in that window waited several times).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterable
from typing import Protocol

from operators import collector
from operators.api import keys
from operators.api.quantity import Quantity
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.cluster.usage import PodUsage, counted_as
from operators.engine.planning.problem import warm_masks
from operators.engine.scheduling.index import ClusterIndex
from operators.sources.cache import ClusterCache
from operators.sources.kinds import APPGROUP_SPECS, FILTER_KINDS, NETWORKTOPOLOGIES, NODES, NODESLOS, PODS
from operators.sources.store import Change

logger = logging.getLogger("netaware.index")

KINDS = (NODES, PODS, APPGROUP_SPECS, NETWORKTOPOLOGIES, NODESLOS, *FILTER_KINDS)  # the last: its plans' filters


class LiveIndex:
    """See the module docstring."""

    def __init__(
        self, cache: ClusterCache, default_bandwidth: Quantity | None, loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        """``loop``: where the changes are applied (a cache followed from another thread), else as they come."""
        self.cache = cache
        self.default_bandwidth = default_bandwidth
        self.usage = PodUsage()
        self.rebuilds = 0  # tables built from all the nodes (once, after the first sync)
        self.deltas = 0  # indexes derived by delta
        self._index: ClusterIndex | None = None
        self._touched: set[str] = set()
        self._pods_changed = False
        self._resources_changed = False
        # nodes added, deleted or changed (or their NodeSLOs) since the last index
        self._nodes_changed: set[str] = set()
        self.on_changes(cache.subscribe(self.on_changes, loop))

    @property
    def ready(self) -> bool:
        """The cache has listed every kind and the first tables are built."""
        return self._index is not None and self.cache.ready

    def on_changes(self, changes: list[Change]) -> None:
        for change in changes:
            if change.kind == PODS.name:
                old, new = (counted_as(pod) if pod is not None else None for pod in (change.old, change.new))
                self._touched |= self.usage.apply(old, new)
                self._pods_changed = True
            elif change.kind == NODES.name:
                self._nodes_changed.add((change.new or change.old).name)
            elif change.kind == NODESLOS.name:
                self._nodes_changed.add((change.new or change.old).metadata.name)
            else:
                self._resources_changed = True

    def count(self, old: Pod | None, new: Pod | None) -> None:
        """A pod the cache does not show counted as ``new`` where it was ``old`` (None: not counted), as the cache's
        own changes are: a pod placed at admission, held on its node until the cache shows it."""
        self._touched |= self.usage.apply(old, new)
        self._pods_changed = True

    def current(self) -> ClusterIndex:
        """The index of the latest state: every change since the last one applied now (cheap). Should applying
        them fail (a bug), the tables are built again from the cache, so that no change is lost."""
        if self._index is None:
            self._rebuild()
        try:
            self._index = self._with_changes()
        except Exception:
            logger.exception("the changes could not be applied to the kept index; building it again")
            self._rebuild()
        assert self._index is not None
        return self._index

    def _with_changes(self) -> ClusterIndex:
        index = self._index
        assert index is not None
        if self._resources_changed:
            self._resources_changed = False
            index = index.with_snapshot(self._same_nodes(index.snapshot))
            self.deltas += 1
        if self._nodes_changed:
            changed, self._nodes_changed = self._nodes_changed, set()
            index = index.with_nodes(self.cache.snapshot(without=(PODS,)), changed, self.default_bandwidth)
            self.deltas += 1
        if self._pods_changed:
            self._pods_changed = False
            index = index.with_usage(self._touched)
            self._touched = set()
            self.deltas += 1
        return index

    def _same_nodes(self, held: Snapshot) -> Snapshot:
        """The cache's custom resources over the nodes and NodeSLOs of the tables in use (node changes are applied
        next, by :meth:`ClusterIndex.with_nodes`, so that the index never mixes two views of the nodes)."""
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
        self._nodes_changed = set()
        self.rebuilds += 1

    def build(self) -> ClusterIndex:
        """The index, its tables built now if they were not (call it once the cache has synced: every change after
        that is a delta), off the paths that read it."""
        if self._index is None:
            self._rebuild()
            assert self._index is not None
            warm_masks(self._index)
            collector.freeze_what_lives()  # what the first sync built, and those masks
        return self.current()

    async def follow(self, stop: asyncio.Event) -> None:
        """Build the tables once the cache has synced, then wait for ``stop``."""
        await self.cache.wait_synced()
        self.build()
        await stop.wait()


class Kept(Protocol):
    """An index whose usage is kept in place: a :class:`LiveIndex`, or :class:`Held`."""

    @property
    def usage(self) -> PodUsage: ...

    def current(self) -> ClusterIndex: ...


@dataclasses.dataclass(frozen=True)
class Held:
    """One index as :class:`Kept` (an extender answering from a fixed snapshot): :class:`Provisional` changes its
    usage for a pass and puts it back."""

    index: ClusterIndex

    @property
    def usage(self) -> PodUsage:
        return self.index.usage

    def current(self) -> ClusterIndex:
        return self.index


class Provisional:
    """Pods counted where plans put them, over a :class:`Kept` index, for one pass of plans: each pod :meth:`place`
    is given replaces the version the kept usage holds (by key: an AppGroup member released to a node and not bound
    yet, counted there), and :meth:`close` puts the held versions back, so that the kept state is the cache's again.
    What it costs is what the pass places, never the cluster. The pass is synchronous (nothing awaited between the
    first :meth:`place` and :meth:`close`), so no cache change lands in between."""

    def __init__(self, live: Kept) -> None:
        self.live = live
        self.index = live.current()
        self.index.keep_headroom()  # before the pass changes the usage: what the kept index holds must be the cache's
        self.held: dict[str, tuple[Pod | None, Pod]] = {}  # pod key -> (the version held before, the one placed)

    def place(self, pods: Iterable[Pod]) -> ClusterIndex:
        """The index with ``pods`` counted as given (each an AppGroup member: the usage finds its held version by
        its AppGroup label and key)."""
        usage = self.live.usage
        pods = list(pods)
        touched: set[str] = set()
        for pod in pods:
            counted: Pod | None
            if pod.key in self.held:  # placed before in this pass: replace that version, keep the cache's
                original, counted = self.held[pod.key]
            else:
                original = counted = usage.members.get(pod.labels.get(keys.APPGROUP_LABEL, ""), {}).get(pod.key)
            self.held[pod.key] = (original, pod)
            touched |= usage.apply(counted, pod)
        if pods:
            self.index = self.index.with_usage(touched)
        return self.index

    def close(self) -> None:
        """The kept usage as the cache has it again (the kept index's tables never saw the pass: its indexes are
        derived copies)."""
        usage = self.live.usage
        for before, placed in self.held.values():
            usage.apply(placed, before)
        self.held = {}
