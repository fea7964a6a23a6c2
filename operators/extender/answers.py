"""What the extender answers from: the cluster's index (a fixed snapshot, or kept live by delta), the candidate nodes
of a request as a table, and the answers already given, kept per pod inputs and name list (a Deployment's replicas
are the same pod to every plugin)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from operators.api.config.scheduler import IN_TREE_FILTERS, SchedulerConfig
from operators.engine.cluster.objects import Node
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.scheduling.framework import CycleState, PodInputs
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.table import Ints, NodeTable
from operators.extender.answering import Answering
from operators.extender.args import item_name
from operators.extender.plans import PlanFollower
from operators.extender.wire import NameListMemo, PriorityTemplate
from operators.sources.live_index import Held, LiveIndex, Provisional


@dataclass(frozen=True, eq=False)  # by identity: the answers given on it are kept per object
class Candidates:
    """The nodes of one request as a table, the objects as sent (``Nodes`` form), and the nodes that failed
    before any plugin ran (unknown to the extender, or unreadable)."""

    table: NodeTable
    raw: dict[str, dict[str, Any]]
    failed: dict[str, str]


ANSWERS_KEPT = 256


@dataclass
class ExtenderState:
    """Where the cluster comes from and the config: a fixed snapshot (``source``), or a live index kept by delta
    (``indexes``: :meth:`operators.sources.live_index.LiveIndex.current`, ``live`` the index itself, on which the
    plans of plan-ungated AppGroups count their answered pods provisionally). Holds the current index, the cycle
    state of the last pod (its /filter and /prioritize share it), the table of the last NodeNames list
    (kube-scheduler sends the same list pod after pod) and the answers given on them: a Deployment's replicas are
    the same pod to every plugin, so the next replica's answer is the encoded bytes of the first's."""

    source: Callable[[], Snapshot]
    config: SchedulerConfig
    ready: Callable[[], bool] = lambda: True
    indexes: Callable[[], ClusterIndex] | None = None
    _index: tuple[Snapshot | None, ClusterIndex] | None = None
    _cycle: tuple[PodInputs, ClusterIndex, CycleState] | None = None
    _last_names: tuple[ClusterIndex, list[str], Candidates] | None = None
    _resolved: tuple[dict[str, int], list[str], Resolved] | None = None
    _answers: dict[tuple[str, Candidates, PodInputs], bytes] = field(default_factory=dict)
    _nowhere: dict[tuple[str, Candidates, PodInputs], tuple[str, ...]] = field(default_factory=dict)  # why, per answer
    names_memo: NameListMemo = field(default_factory=NameListMemo)
    answers_reused: int = 0
    follower: PlanFollower = field(default_factory=PlanFollower)  # plan-ungated AppGroups' pods
    live: LiveIndex | None = None  # what ``indexes`` reads, when live: the plans count pods on it (provisional)
    answering: Answering = field(default_factory=Answering)  # kube-scheduler's requests in flight

    def __post_init__(self) -> None:
        # kube-scheduler runs its own filters before it calls an extender: the extender answers for netaware's plugins
        # only, whatever the configuration says of the in-tree ones
        self.config = replace(self.config, filters=tuple(f for f in self.config.filters if f not in IN_TREE_FILTERS),
                              in_tree_scores={})  # fmt: skip

    def index(self) -> ClusterIndex:
        if self.indexes is not None:
            index = self.indexes()
            if self._index is None or self._index[1] is not index:
                self._index = (None, index)
                self._forget()
            return index
        snapshot = self.source()
        # Held, not compared by id(): a freed snapshot's id can be reused by the next one.
        if self._index is None or self._index[0] is not snapshot:
            self._index = (snapshot, ClusterIndex.build(snapshot))
            self._forget()
        return self._index[1]

    def provisional(self) -> Provisional:
        """A view of the current index where a plan counts the pods it is given on their nodes, until closed (the
        kept index's usage, or the fixed snapshot's, as they were after)."""
        return Provisional(self.live if self.live is not None else Held(self.index()))

    def _forget(self) -> None:
        """A new index: the answers given on the old one (and why a pod fit nowhere there) no longer hold."""
        self._cycle = None
        self._answers.clear()
        self._nowhere.clear()

    def answer(
        self,
        verb: str,
        candidates: Candidates,
        inputs: PodInputs,
        compute: Callable[[], tuple[bytes, tuple[str, ...]]],
    ) -> tuple[bytes, tuple[str, ...]]:
        """The encoded answer of ``verb`` for a pod on ``candidates`` (a NodeNames list of the current index),
        computed once per :class:`PodInputs` (all the plugins read of a pod); with it, why the pod fits no node
        (empty when one fits)."""
        key = (verb, candidates, inputs)
        found = self._answers.get(key)
        if found is not None:
            self.answers_reused += 1
            return found, self._nowhere.get(key, ())
        if len(self._answers) >= ANSWERS_KEPT:
            self._answers.clear()
            self._nowhere.clear()
        body, nowhere = compute()
        self._answers[key] = body
        if nowhere:
            self._nowhere[key] = nowhere
        return body, nowhere

    def candidates(
        self, index: ClusterIndex, names: list[str] | None, items: list[dict[str, Any]] | None
    ) -> Candidates:
        if names is None:
            return object_candidates(index, items or [], self.config)
        last = self._last_names
        if last is not None and last[0] is index and (last[1] is names or last[1] == names):
            self._last_names = (index, names, last[2])  # held by this very list from now on
            if self._resolved is not None:
                self._resolved = (self._resolved[0], names, self._resolved[2])
            return last[2]
        # The rows of a name list hold while the nodes do (an index derived by a pod change keeps them).
        position = index.position
        if self._resolved is None or self._resolved[0] is not position or self._resolved[1] != names:
            self._resolved = (position, names, Resolved.of(index, names))
        else:
            self._resolved = (position, names, self._resolved[2])
        self._last_names = (index, names, self._resolved[2].candidates(index, self.config))
        return self._last_names[2]

    def resolved(self, names: list[str]) -> Resolved | None:
        """The resolution of this very name list, if it is the last one resolved."""
        held = self._resolved
        return held[2] if held is not None and held[1] is names else None

    def cycle(self, inputs: PodInputs, index: ClusterIndex) -> CycleState:
        """The cycle state of a pod with these inputs, shared by its /filter and /prioritize calls on the same
        snapshot."""
        if self._cycle is None or self._cycle[0] != inputs or self._cycle[1] is not index:
            self._cycle = (inputs, index, CycleState.of_inputs(inputs, index, self.config))
        return self._cycle[2]


@dataclass(frozen=True)
class Resolved:
    """A ``NodeNames`` list resolved against the extender's nodes: the rows of the known ones (None: all of the
    table, in its order) and the unknown ones with why."""

    names: list[str]
    rows: Ints | None
    failed: dict[str, str]

    @functools.cached_property
    def priorities(self) -> PriorityTemplate:
        """The /prioritize answer's template for these names, encoded once per list."""
        return PriorityTemplate(self.names)

    @classmethod
    def of(cls, index: ClusterIndex, names: list[str]) -> Resolved:
        position = index.position
        known = [name for name in names if name in position]
        failed = {name: f"node {name} is not known to the extender" for name in names if name not in position}
        everything = len(known) == len(index.nodes) and known == [node.name for node in index.nodes]
        return cls(names, None if everything else index.rows_of(known), failed)

    def candidates(self, index: ClusterIndex, config: SchedulerConfig) -> Candidates:
        table = index.table(config.bandwidth.default_node_bandwidth)
        return Candidates(table if self.rows is None else table.rows(self.rows), {}, self.failed)


def object_candidates(index: ClusterIndex, items: list[Any], config: SchedulerConfig) -> Candidates:
    """``Nodes``: a table of the objects as sent; an unreadable one fails with the reason."""
    failed: dict[str, str] = {}
    nodes: list[Node] = []
    raw: dict[str, dict[str, Any]] = {}
    for position, item in enumerate(items):
        try:
            if not isinstance(item, dict):
                raise TypeError("expected a Node object")
            node = Node.parse(item)
        except (ValueError, TypeError, AttributeError, OverflowError) as error:
            failed[item_name(item, position)] = f"unreadable Node: {error}"
            continue
        nodes.append(node)
        raw[node.name] = item
    return Candidates(index.table_of(nodes, config.bandwidth.default_node_bandwidth), raw, failed)
