"""kube-scheduler's InterPodAffinity (pure), as 1.37 runs it.

PreFilter (:func:`prefilter`, once per pod) counts, per topology pair (label key, value):

1. ``existing_anti``: for each placed pod, each of its required anti-affinity terms that matches the incoming pod,
   on the pair of that term's key on the placed pod's node;
2. ``affinity``: the placed pods that match *all* the incoming pod's required affinity terms, on the pair of each
   term's key;
3. ``anti``: for each of the incoming pod's required anti-affinity terms, the placed pods it matches, on the pair
   of its key (pairs of one key add up over the terms, as upstream's counts do).

Filter (:func:`check`, per node, O(terms)) answers, in upstream's order and words:

1. "node(s) didn't match pod affinity rules": the node lacks a term's key, or some term's pair counts nothing —
   unless no placed pod matches the terms anywhere and the pod matches its own terms (the first pod of a group);
2. "node(s) didn't match pod anti-affinity rules": a term's pair on the node counts a pod;
3. "node(s) didn't satisfy existing pods anti-affinity rules": one of the node's label pairs counts a term.

:func:`add_pod` counts one more placed pod (upstream's AddPod: a plan's own pods, one after the other).

Score (:func:`score`, preferred terms; :func:`normalize`): per topology pair, the incoming pod's preferred
affinity terms add their weight for each placed pod they match and its anti-affinity terms subtract it; each placed
pod's required affinity terms that match the incoming pod add ``hardPodAffinityWeight`` (1), and its preferred
terms add (subtract) their weight; a node scores the sum over its label pairs, normalised to 0..100 by
``100 * (score - min) / (max - min)`` (all equal: 0).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from operators.engine.cluster.kube.terms import AffinityTerm, SchedulingSpec, WeightedTerm, scheduling_spec
from operators.engine.cluster.kube.view import PlacedPods
from operators.engine.cluster.objects import Node, Pod

NAME = "InterPodAffinity"
AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
HARD_POD_AFFINITY_WEIGHT = 1  # InterPodAffinityArgs' default
MAX_NODE_SCORE = 100

Pair = tuple[str, str]


@dataclass
class InterPodState:
    """The PreFilter counts of one incoming pod (see the module docstring)."""

    pod: Pod
    spec: SchedulingSpec
    placed: PlacedPods
    existing_anti: Counter[Pair] = field(default_factory=Counter)
    affinity: Counter[Pair] = field(default_factory=Counter)
    anti: Counter[Pair] = field(default_factory=Counter)

    @property
    def namespace_labels(self) -> Mapping[str, str]:
        return self.placed.namespace_labels(self.pod.namespace)

    def copy(self) -> InterPodState:
        return InterPodState(self.pod, self.spec, self.placed, Counter(self.existing_anti), Counter(self.affinity),
                             Counter(self.anti))  # fmt: skip


def _spec(pod: Pod) -> SchedulingSpec | None:
    try:
        return scheduling_spec(pod)
    except ValueError:  # FieldError: a placed pod's terms are the API server's to validate
        return None


def prefilter(pod: Pod, spec: SchedulingSpec, placed: PlacedPods) -> InterPodState | None:
    """The counts for ``pod`` (None: the plugin has nothing to check, upstream's Skip)."""
    state = InterPodState(pod, spec, placed)
    for term, on_nodes in placed.anti_terms():  # the existing pods' anti-affinity: one match per distinct term
        if term.matches(pod, state.namespace_labels):
            for name, count in on_nodes.items():
                if (node := placed.node(name)) is not None:
                    _update(state.existing_anti, node, term.topology_key, count)
    if spec.required_affinity or spec.required_anti_affinity:
        terms = (*spec.required_affinity, *spec.required_anti_affinity)
        seen: set[str] = set()
        for term in terms:
            for other in placed.in_namespaces(term):
                if other.key not in seen:
                    seen.add(other.key)
                    _add_incoming(state, other, placed.node(other.node_name), 1)
    if not state.existing_anti and not spec.required_affinity and not spec.required_anti_affinity:
        return None
    return state


def add_existing_anti(state: InterPodState, other: Pod, node: Node | None, sign: int = 1) -> None:
    other_spec = _spec(other)
    if node is None or other_spec is None:
        return
    for term in other_spec.required_anti_affinity:
        if term.matches(state.pod, state.namespace_labels):
            _update(state.existing_anti, node, term.topology_key, sign)


def _add_incoming(state: InterPodState, other: Pod, node: Node | None, sign: int) -> None:
    if node is None:
        return
    labels = state.placed.namespace_labels(other.namespace)
    affinity = state.spec.required_affinity
    if affinity and all(term.matches(other, labels) for term in affinity):
        for term in affinity:
            _update(state.affinity, node, term.topology_key, sign)
    for term in state.spec.required_anti_affinity:
        if term.matches(other, labels):
            _update(state.anti, node, term.topology_key, sign)


def _update(counts: Counter[Pair], node: Node, key: str, sign: int) -> None:
    value = node.labels.get(key)
    if value is None:
        return
    counts[(key, value)] += sign
    if counts[(key, value)] == 0:
        del counts[(key, value)]


def add_pod(state: InterPodState, other: Pod, node: Node, sign: int = 1) -> None:
    """Count ``other`` placed on ``node`` (``sign`` -1: taken away), as upstream's AddPod/RemovePod."""
    add_existing_anti(state, other, node, sign)
    _add_incoming(state, other, node, sign)


def self_affine(state: InterPodState) -> bool:
    """The incoming pod matches all its own required affinity terms."""
    terms = state.spec.required_affinity
    return bool(terms) and all(term.matches(state.pod, state.namespace_labels) for term in terms)


def check(state: InterPodState | None, node: Node) -> str:
    """Why InterPodAffinity's Filter rejects ``node`` ("" when it passes)."""
    if state is None:
        return ""
    labels = node.labels
    terms = state.spec.required_affinity
    if terms:
        everywhere = True
        for term in terms:
            value = labels.get(term.topology_key)
            if value is None:
                return AFFINITY
            if state.affinity.get((term.topology_key, value), 0) <= 0:
                everywhere = False
        if not everywhere and not (not state.affinity and self_affine(state)):
            return AFFINITY
    if state.anti:
        for term in state.spec.required_anti_affinity:
            value = labels.get(term.topology_key)
            if value is not None and state.anti.get((term.topology_key, value), 0) > 0:
                return ANTI_AFFINITY
    if state.existing_anti and any(state.existing_anti.get(pair, 0) > 0 for pair in labels.items()):
        return EXISTING_ANTI_AFFINITY
    return ""


# -- scoring -------------------------------------------------------------------------------------------------------


def prescore(pod: Pod, spec: SchedulingSpec, placed: PlacedPods) -> dict[str, Counter[str]]:
    """Per topology key, per value, the score the placed pods give (see the module docstring); empty: nothing to
    score (upstream's Skip)."""
    scores: dict[str, Counter[str]] = {}
    namespace_labels = placed.namespace_labels(pod.namespace)
    preferred = spec.preferred_affinity or spec.preferred_anti_affinity
    for other in placed.all() if preferred else placed.affine():
        node = placed.node(other.node_name)
        if node is None or not node.labels:
            continue
        _terms(scores, spec.preferred_affinity, other, placed.namespace_labels(other.namespace), node, 1)
        _terms(scores, spec.preferred_anti_affinity, other, placed.namespace_labels(other.namespace), node, -1)
        other_spec = _spec(other)
        if other_spec is None:
            continue
        for term in other_spec.required_affinity:
            _term(scores, term, HARD_POD_AFFINITY_WEIGHT, pod, namespace_labels, node, 1)
        _terms(scores, other_spec.preferred_affinity, pod, namespace_labels, node, 1)
        _terms(scores, other_spec.preferred_anti_affinity, pod, namespace_labels, node, -1)
    return scores


def _terms(scores: dict[str, Counter[str]], terms: Iterable[WeightedTerm], target: Pod,
           namespace_labels: Mapping[str, str], node: Node, sign: int) -> None:  # fmt: skip
    for weighted in terms:
        _term(scores, weighted.term, weighted.weight, target, namespace_labels, node, sign)


def _term(scores: dict[str, Counter[str]], term: AffinityTerm, weight: int, target: Pod,
          namespace_labels: Mapping[str, str], node: Node, sign: int) -> None:  # fmt: skip
    if term.matches(target, namespace_labels):
        value = node.labels.get(term.topology_key)
        if value is not None:
            scores.setdefault(term.topology_key, Counter())[value] += weight * sign


def score(scores: Mapping[str, Counter[str]], node: Node) -> int:
    return sum(values.get(node.labels[key], 0) for key, values in scores.items() if key in node.labels)


def normalize(raw: Sequence[int], scored: bool) -> list[int]:
    """0..100 by min-max (``scored``: prescore found something; else every node keeps its raw 0)."""
    if not scored or not raw:
        return list(raw)
    low, high = min(raw), max(raw)
    return [int(MAX_NODE_SCORE * (value - low) / (high - low)) if high > low else 0 for value in raw]
