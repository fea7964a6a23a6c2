"""What the pods on each node use, kept by delta: the only place a pod's bandwidth is added to its node.

:meth:`PodUsage.apply` takes one pod change (added, changed, deleted) and updates the used bandwidth per node (per
direction), the pod count and what the pods request per resource, the nodes whose usage is unknown (a pod with an
unreadable bandwidth annotation) and the AppGroup members; :meth:`ClusterIndex.build` folds a snapshot's pods
through it, and the extender applies its watch's pod events to it, so both count a pod the same way (each pod as
:func:`counted_as` has it). The
``nodebandwidth`` controller keeps one over the pods kube-scheduler does not account (``selects``), without AppGroup
members.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from operators.api import keys
from operators.api.errors import FieldError
from operators.engine.cluster.bandwidth import pod_demand
from operators.engine.cluster.fit import amount
from operators.engine.cluster.kube.terms import AffinityTerm, HostPort, scheduling_spec
from operators.engine.cluster.objects import Pod

# A node's used bandwidth is capped here (far above any capacity: the node is full either way), so the
# array arithmetic on it stays inside int64.
MAX_USED = 2**60


def counted_as(pod: Pod) -> Pod:
    """``pod`` as the usage counts it: a pod placed at admission (the extender's placement webhook) and not bound yet
    on its planned node, any other as it is. Its required node affinity holds it to that node: kube-scheduler binds
    it there or nowhere, so every plan and every filter must find that room taken. Counted once as it enters the
    usage, not placed again for each plan (hundreds of them wait for kube-scheduler in a burst: placing and putting
    them back was 38 % of the extender's samples while it placed pods at admission)."""
    if pod.node_name or pod.is_terminal or not pod.annotations.get(keys.PLACED_AT_ADMISSION):
        return pod
    node = pod.annotations.get(keys.PLANNED_NODE)
    return pod.on_node(node) if node else pod


def _counts(pod: Pod | None) -> bool:
    return pod is not None and bool(pod.node_name) and not pod.is_terminal


@dataclass
class PodUsage:
    """Used bandwidth, pod counts, usage problems and AppGroup members, as running sums over pod changes."""

    sums: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    count: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    # node -> resource -> what its pods request (kube-scheduler's unit: NodeResourcesFit's sums)
    requested: dict[str, dict[str, int]] = field(default_factory=dict)
    # node -> pod key -> why that pod's bandwidth is unreadable
    problems: dict[str, dict[str, str]] = field(default_factory=lambda: defaultdict(dict))
    # AppGroup label -> pod key -> pod (all namespaces; each AppGroup filters by the namespaces it covers)
    members: dict[str, dict[str, Pod]] = field(default_factory=lambda: defaultdict(dict))
    # namespace -> pod key -> pod: the pods kube-scheduler's NodeInfos hold (bound, not finished; terminating too),
    # what inter-pod affinity and topology spread count
    placed: dict[str, dict[str, Pod]] = field(default_factory=lambda: defaultdict(dict))
    # pod key -> pod: the placed pods with pod affinity or anti-affinity terms (their terms weigh on other pods)
    affine: dict[str, Pod] = field(default_factory=dict)
    # required anti-affinity term of a placed pod -> node -> how many placed pods there have it: what an incoming
    # pod's check of the existing pods' anti-affinity reads, one match per distinct term (replicas share theirs)
    anti_terms: dict[AffinityTerm, dict[str, int]] = field(default_factory=dict)
    # node -> pod key -> its host ports: the placed pods that use some
    ports: dict[str, dict[str, tuple[HostPort, ...]]] = field(default_factory=lambda: defaultdict(dict))
    selects: Callable[[Pod], bool] | None = None  # None: every pod bound and not finished counts
    keeps_members: bool = True

    @classmethod
    def of(cls, pods: Iterable[Pod]) -> PodUsage:
        """The sums of ``pods``, each applied as added (as :func:`counted_as` has it)."""
        usage = cls()
        for pod in pods:
            usage.apply(None, counted_as(pod))
        return usage

    def apply(self, old: Pod | None, new: Pod | None) -> set[str]:
        """Replace ``old`` by ``new`` (either may be None); the nodes whose usage changed."""
        touched: set[str] = set()
        for pod, sign in ((old, -1), (new, +1)):
            if pod is None:
                continue
            if self.keeps_members:
                self._member(pod, add=sign > 0)
                if _counts(pod):
                    self._placed(pod, add=sign > 0)
            if _counts(pod) and (self.selects is None or self.selects(pod)):
                self._count(pod, sign)
                touched.add(pod.node_name)
        return touched

    def _placed(self, pod: Pod, add: bool) -> None:
        """The indexes of placed pods: by namespace, those with affinity terms, those with host ports. A pod whose
        terms do not parse counts as a pod without terms (the API server validated them: it does not happen)."""
        try:
            spec = scheduling_spec(pod)
        except FieldError:
            spec = None
        for term in spec.required_anti_affinity if spec is not None else ():
            on_nodes = self.anti_terms.setdefault(term, {})
            on_nodes[pod.node_name] = on_nodes.get(pod.node_name, 0) + (1 if add else -1)
            if not on_nodes[pod.node_name]:
                del on_nodes[pod.node_name]
                if not on_nodes:
                    del self.anti_terms[term]
        if add:
            self.placed[pod.namespace][pod.key] = pod
            if spec is not None and spec.has_pod_affinity:
                self.affine[pod.key] = pod
            if spec is not None and spec.host_ports:
                self.ports[pod.node_name][pod.key] = spec.host_ports
            return
        held = self.placed.get(pod.namespace)
        if held is not None:
            held.pop(pod.key, None)
            if not held:
                del self.placed[pod.namespace]
        self.affine.pop(pod.key, None)
        on_node = self.ports.get(pod.node_name)
        if on_node is not None:
            on_node.pop(pod.key, None)
            if not on_node:
                del self.ports[pod.node_name]

    def _count(self, pod: Pod, sign: int) -> None:
        node = pod.node_name
        try:
            ingress, egress = pod_demand(pod.annotations, pod.requests)
        except FieldError as error:
            ingress = egress = 0
            if sign > 0:
                self.problems[node][pod.key] = f"pod {pod.key} on node {node}: {error}"
        if sign < 0 and node in self.problems:
            self.problems[node].pop(pod.key, None)
            if not self.problems[node]:
                del self.problems[node]
        entry = self.sums[node]
        entry[0] += sign * ingress
        entry[1] += sign * egress
        requested = self.requested.setdefault(node, {})
        for resource, quantity in pod.requests.items():
            requested[resource] = requested.get(resource, 0) + sign * amount(resource, quantity)
        self.count[node] += sign
        if self.count[node] == 0:
            del self.count[node], self.sums[node], self.requested[node]

    def _member(self, pod: Pod, add: bool) -> None:
        label = pod.labels.get(keys.APPGROUP_LABEL)
        if not label:
            return
        if add:
            self.members[label][pod.key] = pod
        else:
            self.members[label].pop(pod.key, None)
            if not self.members[label]:
                del self.members[label]

    def used(self, node: str) -> tuple[int, int]:
        entry = self.sums.get(node)
        return (min(entry[0], MAX_USED), min(entry[1], MAX_USED)) if entry else (0, 0)

    def problem(self, node: str) -> str | None:
        """The first unreadable pod on ``node`` (in the order they arrived), if any."""
        found = self.problems.get(node)
        return next(iter(found.values())) if found else None
