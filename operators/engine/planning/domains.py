"""Topology domains and the plan's pods counted in them (pure): what the pod constraints of a plan read.

A *key* is a topology key some rule of the plan's pods names (``topology.kubernetes.io/zone``, a hostname...; and
:data:`NODE_KEY`, every node its own domain, for host ports); a node's *domain* for a key is the index of its label
value (-1: the node has no such label). Pods are grouped in *shapes* (:func:`shape_key`: a workload's replicas are
one shape); the :class:`Tally` counts the plan's placed pods per key, shape and domain, kept by the search as it
puts and takes pods, so a rule reads a domain's count in O(shapes) instead of walking the nodes.

Per-domain arrays have one extra, last column that stays 0: indexing them with a node's domain (-1 when it lacks
the key) then gives 0 for such a node without a branch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from operators.api.errors import FieldError
from operators.api.selectors import Selector
from operators.engine.cluster.kube.terms import scheduling_spec
from operators.engine.cluster.objects import Node, Pod

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
NODE_KEY = ""  # no label has an empty name: the key whose domains are the nodes themselves


@dataclass(frozen=True)
class Domains:
    """The keys' domains over the problem's nodes (see the module docstring)."""

    keys: tuple[str, ...]
    domain_of: Ints  # key x node -> domain (-1: no such label)
    sizes: tuple[int, ...]  # key -> how many domains
    values: tuple[Mapping[str, int], ...]  # key -> label value -> domain (NODE_KEY: node name -> domain)

    def key(self, name: str) -> int:
        return self.keys.index(name)

    def of(self, key: int, node: Node | None) -> int:
        """``node``'s domain of ``key`` (-1: it has no such label, or it is not one of the problem's nodes)."""
        if node is None:
            return -1
        value = node.name if self.keys[key] == NODE_KEY else node.labels.get(self.keys[key])
        return self.values[key].get(value, -1) if value is not None else -1

    def column(self, key: int) -> Ints:
        """A zero per-domain array of ``key`` (with the extra last column)."""
        return np.zeros(self.sizes[key] + 1, dtype=np.int64)

    def per_domain(self, key: int, per_node: Ints) -> Ints:
        """``per_node`` summed per domain of ``key`` (with the extra last column, 0)."""
        domain = self.domain_of[key]
        where = domain >= 0
        out = np.bincount(domain[where], weights=per_node[where], minlength=self.sizes[key] + 1)
        out[-1] = 0
        return out.astype(np.int64)


def domains_of(keys: Sequence[str], nodes: Sequence[Node]) -> Domains:
    domain_of = np.full((len(keys), len(nodes)), -1, dtype=np.int64)
    every: list[dict[str, int]] = []
    for row, key in enumerate(keys):
        values: dict[str, int] = {}
        for column, node in enumerate(nodes):
            value = node.name if key == NODE_KEY else node.labels.get(key)
            if value is not None:
                domain_of[row, column] = values.setdefault(value, len(values))
        every.append(values)
    return Domains(tuple(keys), domain_of, tuple(len(values) for values in every), tuple(every))


@dataclass
class Tally:
    """The plan's placed pods per shape (``pods``), per key x shape x domain (``per_key``) and per counting rule
    (``per_rule``: a spread constraint's domains, counting only the pods on its eligible nodes)."""

    pods: Ints
    per_key: list[Ints]
    per_rule: list[Ints]

    def count(self, key: int, shapes: Ints) -> Ints:
        """The plan's pods of ``shapes`` per domain of ``key``."""
        counts = self.per_key[key]
        return counts[shapes].sum(axis=0) if len(shapes) else np.zeros(counts.shape[1], dtype=np.int64)

    def copy(self) -> Tally:
        return Tally(self.pods.copy(), [a.copy() for a in self.per_key], [a.copy() for a in self.per_rule])


def selected(first: Sequence[Pod], namespace: str, selector: Selector) -> Ints:
    """The shapes (``first``: a pod of each) in ``namespace`` that a spread constraint's ``selector`` counts (an
    empty selector counts none, as kube-scheduler counts placed pods)."""
    if selector.is_empty:
        return np.zeros(0, dtype=np.int64)
    return np.array([shape for shape, pod in enumerate(first)
                     if pod.namespace == namespace and selector.matches(pod.labels)], dtype=np.int64)  # fmt: skip


def shape_key(pod: Pod) -> object:
    """What makes two pods alike to the pod constraints: their namespace, labels and scheduling spec (the text of
    the error for a spec that cannot be read)."""
    try:
        return scheduling_spec(pod)
    except FieldError as error:
        return (pod.namespace, str(error))
