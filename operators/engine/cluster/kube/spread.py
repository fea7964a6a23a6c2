"""kube-scheduler's PodTopologySpread (pure), as 1.37 runs it.

The constraints of a pod are its own ``DoNotSchedule`` ones for the filter and ``ScheduleAnyway`` ones for the
score; a pod with none of its own gets the cluster's default constraints (:data:`SYSTEM_DEFAULTS` unless the
configuration lists others), whose selector is the union of what selects the pod (its Services, its controller:
:meth:`PlacedPods.default_selector`; none found: no default constraint).

PreFilter (:func:`prefilter`): a node is *eligible* when it has every constraint's topology key and, per
constraint, passes its node inclusion policies (``nodeAffinityPolicy: Honor``, the default: the pod's nodeSelector
and required node affinity; ``nodeTaintsPolicy: Honor``: its tolerations of NoSchedule/NoExecute taints). Per
constraint, the placed pods in the pod's namespace matching its selector (an empty selector matches none), not
terminating, on eligible nodes, are counted per domain (the node's value of the key); every eligible node's domain
is a domain, with 0 pods if none.

Filter (:func:`check`), per constraint in order: a node without the key is rejected ("node(s) didn't match pod
topology spread constraints (missing required label)"); otherwise ``pods in the node's domain + 1 (if the pod
matches the selector) - the least pods in a domain`` (0 when there are fewer domains than ``minDomains``) must not
exceed ``maxSkew`` ("node(s) didn't match pod topology spread constraints").

:func:`add_pod` counts one more placed pod (a plan's own pods).

Score (:func:`prescore`, :func:`score`, :func:`normalize`): over the nodes that passed the filters, per soft
constraint, a domain weighs ``log(domains + 2)``; a node scores the sum over constraints of ``pods in its domain x
that weight + maxSkew - 1`` (for the hostname key, the pods on the node itself), rounded; normalised to 0..100 as
``100 * (max + min - score) / max`` (fewer pods, higher score); a node without every key scores 0.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from operators.engine.cluster.kube.terms import (
    DO_NOT_SCHEDULE,
    HONOR,
    HOSTNAME,
    SCHEDULE_ANYWAY,
    SchedulingSpec,
    SpreadConstraint,
)
from operators.engine.cluster.kube.view import PlacedPods
from operators.engine.cluster.objects import Node, Pod

NAME = "PodTopologySpread"
MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
SKEW = "node(s) didn't match pod topology spread constraints"
ZONE = "topology.kubernetes.io/zone"
MAX_NODE_SCORE = 100
# kube-scheduler's defaults when the configuration sets none (defaultingType: System): scores only
SYSTEM_DEFAULTS = (
    (HOSTNAME, 3),
    (ZONE, 5),
)


@dataclass
class SpreadState:
    """The PreFilter counts of one incoming pod (see the module docstring)."""

    pod: Pod
    constraints: tuple[SpreadConstraint, ...]
    counts: list[Counter[str]] = field(default_factory=list)  # per constraint: domain -> matching pods
    allows: Callable[[Pod, Node], tuple[bool, bool]] = lambda pod, node: (True, True)  # (affinity, taints)

    def copy(self) -> SpreadState:
        return SpreadState(self.pod, self.constraints, [Counter(c) for c in self.counts], self.allows)


def constraints_of(pod: Pod, spec: SchedulingSpec, placed: PlacedPods, action: str,
                   defaults: Sequence[SpreadConstraint] | None = None) -> tuple[SpreadConstraint, ...]:  # fmt: skip
    """The pod's constraints for ``action`` (DoNotSchedule: the filter; ScheduleAnyway: the score): its own, else
    the defaults (``defaults``: the configuration's; None: the system's) with the pod's default selector."""
    if spec.spread:
        return tuple(c for c in spec.spread if c.when_unsatisfiable == action)
    chosen = defaults if defaults is not None else tuple(
        SpreadConstraint(skew, key, placed.default_selector(pod), 1, HONOR, "Ignore", SCHEDULE_ANYWAY)
        for key, skew in SYSTEM_DEFAULTS
    )  # fmt: skip
    chosen = tuple(c for c in chosen if c.when_unsatisfiable == action)
    if not chosen:
        return ()
    selector = placed.default_selector(pod)
    if selector.is_empty:
        return ()
    return tuple(SpreadConstraint(c.max_skew, c.topology_key, selector, c.min_domains, c.node_affinity_policy,
                                  c.node_taints_policy, c.when_unsatisfiable) for c in chosen)  # fmt: skip


def eligible(constraint: SpreadConstraint, pod: Pod, node: Node,
              allows: Callable[[Pod, Node], tuple[bool, bool]]) -> bool:  # fmt: skip
    affinity, taints = allows(pod, node)
    if constraint.node_affinity_policy == HONOR and not affinity:
        return False
    return not (constraint.node_taints_policy == HONOR and not taints)


def _has_keys(node: Node, constraints: Sequence[SpreadConstraint]) -> bool:
    return all(c.topology_key in node.labels for c in constraints)


def prefilter(pod: Pod, spec: SchedulingSpec, placed: PlacedPods, allows: Callable[[Pod, Node], tuple[bool, bool]],
              defaults: Sequence[SpreadConstraint] | None = None) -> SpreadState | None:  # fmt: skip
    """The counts for ``pod`` (None: no hard constraint, upstream's Skip). ``allows(pod, node)``: whether the node
    passes the pod's node affinity, and its taints (the node inclusion policies)."""
    constraints = constraints_of(pod, spec, placed, DO_NOT_SCHEDULE, defaults)
    if not constraints:
        return None
    state = SpreadState(pod, constraints, [Counter() for _ in constraints], allows)
    for node in placed.nodes.values():
        if not _has_keys(node, constraints):
            continue
        for i, constraint in enumerate(constraints):
            if eligible(constraint, pod, node, allows):
                state.counts[i][node.labels[constraint.topology_key]] += 0  # the domain exists, empty or not
    by_node: dict[str, list[Pod]] = {}
    for other in placed.in_namespace(pod.namespace):
        if not other.is_terminating:
            by_node.setdefault(other.node_name, []).append(other)
    for name, others in by_node.items():
        where = placed.node(name)
        if where is not None:
            for other in others:
                _count(state, other, where, 1, placed=True)
    return state


def add_pod(state: SpreadState, other: Pod, node: Node, sign: int = 1) -> None:
    """Count ``other`` placed on ``node`` (``sign`` -1: taken away), as upstream's updateWithPod (AddPod counts it
    for an empty selector too, which PreFilter does not for a placed pod)."""
    _count(state, other, node, sign, placed=False)


def _count(state: SpreadState, other: Pod, node: Node, sign: int, placed: bool) -> None:
    if other.namespace != state.pod.namespace or not _has_keys(node, state.constraints):
        return
    for i, constraint in enumerate(state.constraints):
        if placed and constraint.selector.is_empty:
            continue  # upstream's countPodsMatchSelector: an empty selector counts no placed pod
        if constraint.selector.matches(other.labels) and eligible(constraint, state.pod, node, state.allows):
            state.counts[i][node.labels[constraint.topology_key]] += sign


def check(state: SpreadState | None, node: Node) -> str:
    """Why PodTopologySpread's Filter rejects ``node`` ("" when it passes)."""
    if state is None:
        return ""
    for i, constraint in enumerate(state.constraints):
        value = node.labels.get(constraint.topology_key)
        if value is None:
            return MISSING_LABEL
        counts = state.counts[i]
        least = min(counts.values(), default=0) if len(counts) >= constraint.min_domains else 0
        own = 1 if constraint.selector.matches(state.pod.labels) else 0
        if counts.get(value, 0) + own - least > constraint.max_skew:
            return SKEW
    return ""


# -- scoring -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpreadScores:
    constraints: tuple[SpreadConstraint, ...]
    counts: tuple[Mapping[str, int], ...]  # per constraint: domain -> pods (not for the hostname key)
    weights: tuple[float, ...]
    ignored: frozenset[str]  # nodes without every key (when that is required)
    on_node: Mapping[str, tuple[int, ...]]  # hostname constraints: node -> per constraint, pods on it


def prescore(pod: Pod, spec: SchedulingSpec, placed: PlacedPods, passed: Sequence[Node],
             allows: Callable[[Pod, Node], tuple[bool, bool]],
             defaults: Sequence[SpreadConstraint] | None = None) -> SpreadScores | None:  # fmt: skip
    """The soft constraints' counts over the nodes that passed (None: nothing to score, upstream's Skip)."""
    constraints = constraints_of(pod, spec, placed, SCHEDULE_ANYWAY, defaults)
    if not constraints or not placed.nodes:
        return None
    require_all = bool(spec.spread) or defaults is not None
    ignored = frozenset(n.name for n in passed if require_all and not _has_keys(n, constraints))
    domains: list[set[str]] = [set() for _ in constraints]
    for node in passed:
        if node.name in ignored:
            continue
        for i, constraint in enumerate(constraints):
            if constraint.topology_key != HOSTNAME:
                domains[i].add(node.labels.get(constraint.topology_key, ""))
    sizes = [len(passed) - len(ignored) if c.topology_key == HOSTNAME else len(domains[i])
             for i, c in enumerate(constraints)]  # fmt: skip
    counts: list[Counter[str]] = [Counter() for _ in constraints]
    on_node: dict[str, list[int]] = {}
    for other in placed.in_namespace(pod.namespace):
        where = placed.node(other.node_name)
        if other.is_terminating or where is None:
            continue
        for i, constraint in enumerate(constraints):
            if constraint.selector.is_empty or not constraint.selector.matches(other.labels):
                continue  # upstream's countPodsMatchSelector: an empty selector counts no pod
            if constraint.topology_key == HOSTNAME:  # upstream counts a node's own pods, whatever its policies
                on_node.setdefault(where.name, [0] * len(constraints))[i] += 1
            elif (not require_all or _has_keys(where, constraints)) and eligible(constraint, pod, where, allows):
                value = where.labels.get(constraint.topology_key, "")
                if value in domains[i]:
                    counts[i][value] += 1
    return SpreadScores(constraints, tuple(counts), tuple(math.log(size + 2) for size in sizes), ignored,
                        {name: tuple(found) for name, found in on_node.items()})  # fmt: skip


def score(scores: SpreadScores, node: Node) -> int:
    if node.name in scores.ignored:
        return 0
    total = 0.0
    for i, constraint in enumerate(scores.constraints):
        if constraint.topology_key not in node.labels:
            continue
        if constraint.topology_key == HOSTNAME:
            count = scores.on_node.get(node.name, (0,) * len(scores.constraints))[i]
        else:
            count = scores.counts[i].get(node.labels[constraint.topology_key], 0)
        total += count * scores.weights[i] + (constraint.max_skew - 1)
    return math.floor(total + 0.5)  # Go's math.Round: halves away from zero (the scores are not negative)


def normalize(scores: SpreadScores, nodes: Sequence[Node], raw: Sequence[int]) -> list[int]:
    kept = [value for node, value in zip(nodes, raw, strict=True) if node.name not in scores.ignored]
    low, high = (min(kept), max(kept)) if kept else (0, 0)
    out = []
    for node, value in zip(nodes, raw, strict=True):
        if node.name in scores.ignored:
            out.append(0)
        elif high == 0:
            out.append(MAX_NODE_SCORE)
        else:
            out.append(MAX_NODE_SCORE * (high + low - value) // high)
    return out
