"""The hard constraints between pods that move with a plan (pure): kube-scheduler's InterPodAffinity,
PodTopologySpread (``DoNotSchedule``) and NodePorts, counted over the bound pods *and the plan's own pods*, so that
two anti-affine replicas planned together never share a domain and a spread counts the pods the plan places.

For each shape (:mod:`.domains`) the rules are prepared once (:func:`build_constraints`) from kube-scheduler's own
PreFilter over the bound pods (:mod:`operators.engine.cluster.kube`: the static counts per topology domain) and
from which shapes each term or selector matches. :meth:`PlanConstraints.refusals` then answers for every node at
once, from the plan's pods counted in a :class:`~.domains.Tally`, in kube-scheduler's order and words:

1. **Host ports** (NodePorts): a node holding a planned pod of a conflicting shape.
2. **Spread** (PodTopologySpread, ``DoNotSchedule``), per constraint: the matching pods per domain (bound ones on
   eligible nodes, as kube-scheduler counts them, and planned ones on eligible nodes), and ``the node's domain + 1
   (if the pod matches) - the least domain (0 below minDomains)`` must not exceed ``maxSkew``.
3. **Affinity** (the pod's required terms): in each term's domain of the node a pod matching every term (bound or
   planned) — unless none matches anywhere and the pod matches its own terms (the first pod of a group).
4. **Anti-affinity** (the pod's required terms): no pod a term matches (bound or planned) in the term's domain.
5. **Existing pods' anti-affinity** (symmetry): no pod (bound or planned) whose required anti-affinity terms match
   the pod in their domain.

A node without a key the pod's own rules need, and every rule against the bound pods alone that the plan cannot
change (node affinity, taints, host ports of bound pods, volumes), is the static mask's (:func:`static_failure`).

A plan must hold as a whole, not only pod by pod as the search placed them: moving a pod out of a domain can leave
a pod that followed it without its affine peer, or lower the least domain of a spread under another pod.
:meth:`PlanConstraints.broken` checks, per domain, every affinity and spread rule that counts the shapes a step
moved; a step that breaks one is undone. A plan where every pod passes with all the others placed can be bound by
kube-scheduler in some order (a spread: fill the emptiest domain first), and it retries a pod the others' order
refused once they are bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from operators.api.config.scheduler import RESOURCES_FIT, TOPOLOGY_SPREAD, SchedulerConfig
from operators.api.errors import FieldError
from operators.engine.cluster.kube import filters as kube_filters
from operators.engine.cluster.kube import interpod as kube_interpod
from operators.engine.cluster.kube import ports as kube_ports
from operators.engine.cluster.kube import spread as kube_spread
from operators.engine.cluster.kube.podvolumes import pod_volumes
from operators.engine.cluster.kube.terms import AffinityTerm, SchedulingSpec
from operators.engine.cluster.kube.view import PlacedPods
from operators.engine.cluster.objects import Node, Pod
from operators.engine.planning.domains import NODE_KEY, Bools, Domains, Ints, Tally, domains_of, selected, shape_key
from operators.engine.planning.soft import SoftRules, build_soft, soft_keys

# what the static mask checks: every modelled filter but those the plan changes (resources: the search's own
# columns; spread and inter-pod affinity: counted here with the plan's pods)
STATIC_FILTERS = tuple(name for name in kube_filters.DEFAULT_FILTERS
                       if name not in (RESOURCES_FIT, TOPOLOGY_SPREAD, kube_filters.INTER_POD_AFFINITY))  # fmt: skip
EARLY_FILTERS = (kube_filters.NODE_UNSCHEDULABLE, kube_filters.TAINT_TOLERATION, kube_filters.NODE_AFFINITY,
                 kube_filters.NODE_PORTS)  # fmt: skip  # the static filters kube-scheduler runs before NodeResourcesFit
NONE = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class _Anti:
    key: int
    shapes: Ints  # the plan's shapes whose pods count
    static: Ints  # per domain of the key: the bound pods counted
    reason: str


@dataclass(frozen=True)
class _Affinity:
    keys: tuple[int, ...]  # per term
    shapes: Ints  # the plan's shapes matching every term
    static: tuple[Ints, ...]  # per term: the bound pods matching every term, per domain of its key
    anywhere: bool  # a bound pod matches every term
    self_affine: bool
    own: int  # 1: the shape's own pods match every term


@dataclass(frozen=True)
class _Spread:
    key: int
    rule: int  # its counts in Tally.per_rule
    shapes: Ints
    eligible: Bools  # per node: counted (the node inclusion policies)
    static: Ints  # per domain: the bound pods counted
    domains: Bools  # per domain: a domain of the constraint (an eligible node has it)
    min_domains: int
    max_skew: int
    own: int  # 1: the pod matches the selector


@dataclass(frozen=True)
class ShapeRules:
    anti: tuple[_Anti, ...] = ()
    affinity: _Affinity | None = None
    spread: tuple[_Spread, ...] = ()
    ports: Ints = field(default_factory=lambda: NONE)  # the shapes whose host ports conflict

    @property
    def active(self) -> bool:
        return bool(self.anti or self.affinity or self.spread or len(self.ports))


@dataclass(frozen=True)
class PlanConstraints:
    """See the module docstring."""

    shape_of: Ints  # pod -> shape
    rules: tuple[ShapeRules, ...]  # per shape
    domains: Domains
    feeds: tuple[tuple[_Spread, ...], ...]  # shape -> the spread rules counting its pods
    dependents: tuple[frozenset[int], ...]  # shape -> the shapes whose affinity or spread rules count it
    soft: SoftRules  # the preferences (:mod:`.soft`)

    @property
    def constrained(self) -> bool:
        """Some pod has a hard rule."""
        return any(rules.active for rules in self.rules)

    @property
    def counted(self) -> bool:
        """Some pod has a rule, hard or soft (the search keeps a tally)."""
        return self.constrained or bool(self.soft.rules)

    def active(self, pod: int) -> bool:
        return self.rules[int(self.shape_of[pod])].active

    def tally(self) -> Tally:
        keys = range(len(self.domains.keys))
        rules = [spread for rules in self.rules for spread in rules.spread]
        return Tally(np.zeros(len(self.rules), dtype=np.int64),
                     [np.zeros((len(self.rules), self.domains.sizes[k] + 1), dtype=np.int64) for k in keys],
                     [self.domains.column(spread.key) for spread in rules])  # fmt: skip

    def add(self, tally: Tally, pod: int, node: int, sign: int = 1) -> None:
        """Count ``pod`` on ``node`` (``sign`` -1: taken off it)."""
        shape = int(self.shape_of[pod])
        tally.pods[shape] += sign
        domain_of = self.domains.domain_of
        for key, counts in enumerate(tally.per_key):
            domain = domain_of[key, node]
            if domain >= 0:
                counts[shape, domain] += sign
        for spread in self.feeds[shape]:
            if spread.eligible[node]:
                tally.per_rule[spread.rule][domain_of[spread.key, node]] += sign

    def allowed(self, pod: int, tally: Tally) -> Bools:
        """The nodes where ``pod`` keeps every rule, the plan's pods counted in ``tally`` (the pod itself not
        counted: take it out first)."""
        ok = np.ones(self.domains.domain_of.shape[1], dtype=np.bool_)
        for _, refused in self.refusals(pod, tally):
            ok &= ~refused
        return ok

    def refusals(self, pod: int, tally: Tally) -> list[tuple[str, Bools]]:
        """Per rule of the module docstring that concerns ``pod``, in its order: (kube-scheduler's reason, the
        nodes it refuses)."""
        rules = self.rules[int(self.shape_of[pod])]
        out = []
        if len(rules.ports):
            node_key = self.domains.key(NODE_KEY)
            out.append((kube_ports.CONFLICT, tally.count(node_key, rules.ports)[self.domains.domain_of[node_key]] > 0))
        for spread in rules.spread:
            counts = spread.static + tally.per_rule[spread.rule]
            least = _least(counts, spread)
            out.append((kube_spread.SKEW, counts[self.domains.domain_of[spread.key]] + spread.own - least
                        > spread.max_skew))  # fmt: skip
        if rules.affinity is not None:
            out.append((kube_interpod.AFFINITY, ~self._affine(rules.affinity, tally)))
        for anti in rules.anti:
            present = anti.static + tally.count(anti.key, anti.shapes)
            out.append((anti.reason, present[self.domains.domain_of[anti.key]] > 0))
        return out

    def broken(self, tally: Tally, moved: Iterable[int]) -> bool:
        """Whether a pod of a shape whose affinity or spread rules count a ``moved`` shape no longer passes them
        with all the others placed (see the module docstring)."""
        owners = {owner for shape in moved for owner in self.dependents[shape] if tally.pods[owner] > 0}
        for owner in owners:
            rules = self.rules[owner]
            for spread in rules.spread:
                counts = spread.static + tally.per_rule[spread.rule]
                hosting = tally.per_key[spread.key][owner] > 0
                # each pod of the shape, taken out of its domain: its domain + own - the least then <= maxSkew
                least = _least(counts, spread)
                if spread.domains.sum() >= spread.min_domains:
                    least = np.minimum(least, counts - spread.own)
                if np.any(hosting & (counts - least > spread.max_skew)):
                    return True
            affinity = rules.affinity
            if affinity is not None:
                others = int(tally.pods[affinity.shapes].sum()) - affinity.own
                if not affinity.anywhere and others == 0 and affinity.self_affine:
                    continue  # the first pod of a group, alone
                for key, static in zip(affinity.keys, affinity.static, strict=True):
                    matching = static + tally.count(key, affinity.shapes) - affinity.own
                    if np.any((tally.per_key[key][owner] > 0) & (matching <= 0)):
                        return True
        return False

    def _affine(self, affinity: _Affinity, tally: Tally) -> Bools:
        domain_of = self.domains.domain_of
        if not affinity.anywhere and int(tally.pods[affinity.shapes].sum()) == 0:
            # no pod matches the terms anywhere: the first pod of a group goes where it has every key
            has_keys = np.all([domain_of[key] >= 0 for key in affinity.keys], axis=0)
            return np.asarray(has_keys & affinity.self_affine, dtype=np.bool_)
        ok = np.ones(domain_of.shape[1], dtype=np.bool_)
        for key, static in zip(affinity.keys, affinity.static, strict=True):
            ok &= (static + tally.count(key, affinity.shapes))[domain_of[key]] > 0
        return ok


def _least(counts: Ints, spread: _Spread) -> Ints:
    """The least pods in a domain of the constraint (0 when it has fewer domains than ``minDomains``)."""
    if int(spread.domains.sum()) < spread.min_domains or not spread.domains.any():
        return np.zeros((), dtype=np.int64)
    return np.asarray(counts[spread.domains].min(), dtype=np.int64)


def build_constraints(
    pods: Sequence[Pod], nodes: Sequence[Node], placed: PlacedPods, config: SchedulerConfig
) -> tuple[PlanConstraints, list[kube_filters.Cycle]]:
    """The rules of the plan's ``pods`` on ``nodes`` (in the problem's order) over the bound pods ``placed``; with
    each shape's kube-scheduler cycle over the bound pods (for its static verdicts: :func:`static_failure`)."""
    index: dict[object, int] = {}
    shape_of = np.array([index.setdefault(shape_key(pod), len(index)) for pod in pods], dtype=np.int64)
    first: list[Pod] = []
    for pod, shape in zip(pods, shape_of.tolist(), strict=True):
        if shape == len(first):
            first.append(pod)
    defaults = kube_filters.spread_defaults(config)
    cycles = [kube_filters.prefilter(pod, placed, _nothing_requested, defaults) for pod in first]
    specs = [cycle.spec for cycle in cycles]
    keys: dict[str, None] = {}
    for spec, cycle in zip(specs, cycles, strict=True):
        for term in (*spec.required_affinity, *spec.required_anti_affinity) if spec is not None else ():
            keys[term.topology_key] = None
        for name, _ in cycle.interpod.existing_anti if cycle.interpod is not None else ():
            keys[name] = None
        for constraint in cycle.spread.constraints if cycle.spread is not None else ():
            keys[constraint.topology_key] = None
    keys.update(dict.fromkeys(soft_keys(first, specs, placed, defaults)))
    if any(spec is not None and spec.host_ports for spec in specs):
        keys[NODE_KEY] = None
    domains = domains_of(list(keys), nodes)
    builder = _Builder(first, specs, domains, placed, nodes)
    rules = tuple(builder.rules(shape, cycle) for shape, cycle in enumerate(cycles))
    feeds: list[list[_Spread]] = [[] for _ in first]
    dependents: list[set[int]] = [set() for _ in first]
    for owner, shape_rules in enumerate(rules):
        for spread in shape_rules.spread:
            for shape in spread.shapes.tolist():
                feeds[shape].append(spread)
                dependents[shape].add(owner)
        for shape in shape_rules.affinity.shapes.tolist() if shape_rules.affinity is not None else ():
            dependents[shape].add(owner)
    soft = build_soft(first, specs, placed, defaults, domains)
    constraints = PlanConstraints(shape_of, rules, domains, tuple(map(tuple, feeds)),
                                  tuple(frozenset(d) for d in dependents), soft)  # fmt: skip
    return constraints, cycles


def _nothing_requested(node: str) -> tuple[Mapping[str, int], int]:
    return {}, 0  # resources are the search's own columns: these cycles read the pods alone


def static_failure(cycle: kube_filters.Cycle, node: Node) -> tuple[tuple[str, ...], bool]:
    """Why kube-scheduler refuses ``node`` for the cycle's pod for what the plan cannot change (the
    :data:`STATIC_FILTERS` over the bound pods; a topology key the pod's own affinity or spread needs), in its words
    (none: it does not), and whether that filter runs before NodeResourcesFit."""
    plugin, reasons = kube_filters.failure(cycle, node, STATIC_FILTERS)
    if reasons:
        return reasons, plugin in EARLY_FILTERS or not plugin
    if cycle.spread is not None and any(c.topology_key not in node.labels for c in cycle.spread.constraints):
        return (kube_spread.MISSING_LABEL,), False
    spec = cycle.spec
    if spec is not None and any(term.topology_key not in node.labels for term in spec.required_affinity):
        return (kube_interpod.AFFINITY,), False
    return (), False


def needs_static(cycle: kube_filters.Cycle) -> bool:
    """Whether :func:`static_failure` can say more for the cycle's pod than its node affinity, taints and the
    nodes' unschedulable mark (which the planner reads once per shape and node)."""
    spec = cycle.spec
    if spec is None:
        return True
    return bool(spec.host_ports or spec.required_affinity or cycle.spread is not None or _checked_volumes(cycle.pod))


def _checked_volumes(pod: Pod) -> bool:
    """Whether a volume of ``pod`` is one kube-scheduler's volume filters check (a claim, a generic ephemeral volume,
    an inline disk). The API server gives every pod a projected service-account token volume, which none checks:
    read as any volume, it sent every plan of a real cluster's pods through :func:`static_failure` node by node
    (half the extender's CPU when it placed a 5,000-node burst's pods at admission)."""
    if not (pod.raw.get("spec") or {}).get("volumes"):
        return False
    try:
        return any(volume.kind for volume in pod_volumes(pod))
    except FieldError:  # unreadable: the filters say why, node by node
        return True


class _Builder:
    """One shape's rules from its cycle (the bound pods' counts) and the shapes the rules match."""

    def __init__(self, first: Sequence[Pod], specs: Sequence[SchedulingSpec | None], domains: Domains,
                 placed: PlacedPods, nodes: Sequence[Node]):  # fmt: skip
        self.first, self.specs, self.domains, self.placed, self.nodes = first, specs, domains, placed, nodes
        self.spread_rules = 0

    def matching(self, terms: Sequence[AffinityTerm]) -> Ints:
        """The shapes whose pods every one of ``terms`` matches."""
        labels = self.placed.namespace_labels
        return np.array([shape for shape, pod in enumerate(self.first)
                         if all(term.matches(pod, labels(pod.namespace)) for term in terms)],
                        dtype=np.int64)  # fmt: skip

    def static(self, key: int, counts: Mapping[tuple[str, str], int]) -> Ints:
        """``counts`` (per (key, value)) per domain of ``key``."""
        name, out = self.domains.keys[key], self.domains.column(key)
        for value, domain in self.domains.values[key].items():
            out[domain] = counts.get((name, value), 0)
        return out

    def rules(self, shape: int, cycle: kube_filters.Cycle) -> ShapeRules:
        pod, spec = self.first[shape], self.specs[shape]
        if spec is None:
            return ShapeRules()
        key = self.domains.key
        state = cycle.interpod
        anti = []
        for name in dict.fromkeys(term.topology_key for term in spec.required_anti_affinity):
            terms = [term for term in spec.required_anti_affinity if term.topology_key == name]
            shapes = np.unique(np.concatenate([self.matching([term]) for term in terms])).astype(np.int64)
            static = self.static(key(name), state.anti if state is not None else {})
            anti.append(_Anti(key(name), shapes, static, kube_interpod.ANTI_AFFINITY))
        labels = self.placed.namespace_labels(pod.namespace)
        for owner, other in enumerate(self.specs):  # symmetry: the plan's pods whose anti-affinity matches this pod
            for term in other.required_anti_affinity if other is not None else ():
                if term.matches(pod, labels):
                    anti.append(_Anti(key(term.topology_key), np.array([owner], dtype=np.int64),
                                      self.domains.column(key(term.topology_key)),
                                      kube_interpod.EXISTING_ANTI_AFFINITY))  # fmt: skip
        for name in dict.fromkeys(name for name, _ in state.existing_anti) if state is not None else ():
            assert state is not None
            anti.append(_Anti(key(name), NONE, self.static(key(name), state.existing_anti),
                              kube_interpod.EXISTING_ANTI_AFFINITY))  # fmt: skip
        return ShapeRules(tuple(anti), self.affinity(shape, spec, cycle), self.spread(pod, cycle), self.ports(spec))

    def affinity(self, shape: int, spec: SchedulingSpec, cycle: kube_filters.Cycle) -> _Affinity | None:
        required = spec.required_affinity
        if not required:
            return None
        counts = cycle.interpod.affinity if cycle.interpod is not None else {}
        shapes = self.matching(required)
        labels = self.placed.namespace_labels(self.first[shape].namespace)
        keys = tuple(self.domains.key(term.topology_key) for term in required)
        return _Affinity(keys, shapes, tuple(self.static(key, counts) for key in keys),
                         any(count > 0 for count in counts.values()),
                         all(term.matches(self.first[shape], labels) for term in required),
                         int(shape in shapes.tolist()))  # fmt: skip

    def spread(self, pod: Pod, cycle: kube_filters.Cycle) -> tuple[_Spread, ...]:
        state = cycle.spread
        if state is None:
            return ()
        out = []
        for i, constraint in enumerate(state.constraints):
            key = self.domains.key(constraint.topology_key)
            eligible = np.array([all(c.topology_key in node.labels for c in state.constraints)
                                 and kube_spread.eligible(constraint, pod, node, kube_filters.allows)
                                 for node in self.nodes], dtype=np.bool_)  # fmt: skip
            present = np.zeros(self.domains.sizes[key] + 1, dtype=np.bool_)
            present[np.unique(self.domains.domain_of[key][eligible])] = True
            present[-1] = False
            name = constraint.topology_key
            static = self.static(key, {(name, value): count for value, count in state.counts[i].items()})
            shapes = selected(self.first, pod.namespace, constraint.selector)
            out.append(_Spread(key, self.spread_rules, shapes, eligible, static, present, constraint.min_domains,
                               constraint.max_skew, int(constraint.selector.matches(pod.labels))))  # fmt: skip
            self.spread_rules += 1
        return tuple(out)

    def ports(self, spec: SchedulingSpec) -> Ints:
        mine = spec.host_ports
        if not mine:
            return NONE
        return np.array([shape for shape, theirs in enumerate(self.specs)
                         if theirs is not None and kube_ports.conflicts(mine, [theirs.host_ports])],
                        dtype=np.int64)  # fmt: skip
