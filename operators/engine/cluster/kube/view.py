"""What the inter-pod plugins read of the cluster: the placed pods (by namespace; those with affinity terms; host
ports by node), the nodes and the namespaces' labels — as kube-scheduler's NodeInfos and listers hold them.

:class:`PlacedPods` reads a :class:`~operators.engine.cluster.usage.PodUsage` (kept by delta by the live extender,
folded from a snapshot offline), so the live and the offline engine count the same pods the same way. Pods placed
on top of it (a plan's own pods) are counted into a plugin's state by its ``add_pod``, as upstream's AddPod.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from operators.api.selectors import EVERYTHING, Selector
from operators.engine.cluster.kube.defaults import default_selector
from operators.engine.cluster.kube.terms import AffinityTerm, HostPort
from operators.engine.cluster.objects import Namespace, Node, Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.cluster.usage import PodUsage


@dataclass(frozen=True)
class PlacedPods:
    """See the module docstring."""

    usage: PodUsage
    nodes: Mapping[str, Node]
    namespaces: Mapping[str, Namespace] = field(default_factory=dict)
    selectors: Callable[[Pod], Selector] | None = None  # the default spread selector of a pod
    snapshot: Snapshot | None = None  # the storage objects the volume filters read (None: no volume filter runs)
    _storage: dict[str, Snapshot] = field(default_factory=dict, repr=False, compare=False)

    def node(self, name: str) -> Node | None:
        return self.nodes.get(name)

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        """The labels of ``namespace`` (none when it is not known, as upstream assumes)."""
        found = self.namespaces.get(namespace)
        return found.labels if found is not None else {}

    def in_namespaces(self, term: AffinityTerm) -> Iterator[Pod]:
        """The placed pods in the namespaces ``term`` selects (its names, or its namespace selector — over the
        namespaces that exist, as upstream's lister; a view without any Namespace, an offline snapshot that left
        them out, reads every namespace as unlabelled)."""
        known = bool(self.namespaces)
        for namespace, pods in self.usage.placed.items():
            if namespace in term.namespaces or (
                (namespace in self.namespaces or not known)
                and term.namespace_selector.matches(self.namespace_labels(namespace))
            ):
                yield from pods.values()

    def in_namespace(self, namespace: str) -> Iterable[Pod]:
        return self.usage.placed.get(namespace, {}).values()

    def affine(self) -> Iterable[Pod]:
        """The placed pods with pod affinity or anti-affinity terms."""
        return self.usage.affine.values()

    def anti_terms(self) -> Iterable[tuple[AffinityTerm, Mapping[str, int]]]:
        """The placed pods' required anti-affinity terms, each with how many placed pods have it per node."""
        return self.usage.anti_terms.items()

    def all(self) -> Iterator[Pod]:
        for pods in self.usage.placed.values():
            yield from pods.values()

    def ports_on(self, node: str, without: Collection[str] = ()) -> Iterable[tuple[HostPort, ...]]:
        """The host ports of the placed pods on ``node`` (but the pods keyed ``without``)."""
        held = self.usage.ports.get(node, {})
        return [ports for key, ports in held.items() if key not in without] if without else held.values()

    def storage(self) -> Snapshot | None:
        """What the volume filters read: the storage objects, and the placed pods — the usage's when the snapshot
        carries none (an index kept by delta), made once per view."""
        if self.snapshot is None or self.snapshot.pods or not self.usage.placed:
            return self.snapshot
        if "pods" not in self._storage:
            self._storage["pods"] = replace(self.snapshot, pods=tuple(self.all()))
        return self._storage["pods"]

    def default_selector(self, pod: Pod) -> Selector:
        """What selects ``pod`` for the default topology spread constraints (upstream's DefaultSelector: its
        Services' selectors and its controller's); empty when the cluster view has none of them."""
        return self.selectors(pod) if self.selectors is not None else EVERYTHING


def placed_pods(snapshot: Snapshot, usage: PodUsage | None = None) -> PlacedPods:
    """The placed pods of ``snapshot`` as kube-scheduler's default plugins read them, over its nodes and namespaces
    (``usage``: kept by delta by the caller, else folded from the snapshot's pods); a pod's default spread selector
    from its Services and controller; the snapshot's storage for the volume filters."""
    held = usage if usage is not None else PodUsage.of(snapshot.pods)
    return PlacedPods(held, snapshot.node_by_name, snapshot.namespace_by_name,
                      functools.partial(default_selector, snapshot=snapshot), snapshot)  # fmt: skip
