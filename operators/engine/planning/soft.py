"""The soft pod constraints of a plan as a penalty (pure): ``spreadPenalty``, beside the network cost.

kube-scheduler scores them; a plan weighs them against what the network costs. For each planned pod, each soft
rule of its own counts the *pairs* it would rather not have, each weighing the rule's weight:

- a ``ScheduleAnyway`` spread constraint, or the cluster's default spread (a pod without constraints of its own:
  by its Services and controller): the other pods its selector matches in its domain — :data:`SPREAD_WEIGHT` each;
- a preferred anti-affinity term: the other pods the term matches in its domain — the term's weight divided by
  :data:`PREFERRED_SCALE` (at least 1) each;
- a preferred affinity term: the pods the term matches *outside* its domain, the same weight each.

Both the plan's pods and the bound ones are counted; only the plan's pods own rules (the bound ones do not move).
A node without a rule's topology key is the worst place for its owner, as kube-scheduler scores such a node the
least: a spread's pod there pays for every pod the rule counts, a preferred affinity's for every pod it names.
With one network-cost unit the price of a pair in one zone, three replicas of a Deployment under the default
spread prefer three nodes of one zone to one node when their dependencies pay 1 each for it, and stay in their
zone rather than pay a cross-zone cost. The rules are counted per domain in the search's :class:`~.domains.Tally`:
:meth:`SoftRules.node_penalty` is what one pod adds on every node, :meth:`SoftRules.penalty` the plan's total.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from operators.engine.cluster.kube import spread as kube_spread
from operators.engine.cluster.kube.terms import SCHEDULE_ANYWAY, SchedulingSpec, SpreadConstraint, WeightedTerm
from operators.engine.cluster.kube.view import PlacedPods
from operators.engine.cluster.objects import Pod
from operators.engine.planning.domains import Domains, Ints, Tally, selected

SPREAD_WEIGHT = 1  # per pair a soft spread constraint counts in one domain
PREFERRED_SCALE = 20  # a preferred term of weight 100 weighs 5 per pair


@dataclass(frozen=True)
class SoftRule:
    owner: int  # the shape whose pods own it
    key: int
    shapes: Ints  # the plan's shapes it counts
    static: Ints  # per domain: the bound pods it counts
    weight: int
    together: bool  # a preferred affinity (pairs apart cost); else pairs in one domain cost
    own: int  # 1: the owner's pods are counted too


@dataclass(frozen=True)
class SoftRules:
    rules: tuple[SoftRule, ...]
    owned: tuple[tuple[SoftRule, ...], ...]  # shape -> the rules its pods own
    counting: tuple[tuple[SoftRule, ...], ...]  # shape -> the rules that count its pods

    def concerns(self, shape: int) -> bool:
        return bool(self.owned[shape] or self.counting[shape])

    def node_penalty(self, shape: int, tally: Tally, domains: Domains) -> Ints:
        """What a pod of ``shape`` adds to the penalty on each node (the pod itself not counted)."""
        total = np.zeros(domains.domain_of.shape[1], dtype=np.int64)
        for rule in self.owned[shape]:
            where = domains.domain_of[rule.key]
            counted = rule.static + tally.count(rule.key, rule.shapes)
            if rule.together:
                total += rule.weight * (_total(tally, rule) - counted[where])
            else:  # a node without the key: the worst place (see the module docstring)
                total += rule.weight * np.where(where < 0, _total(tally, rule), counted[where])
        for rule in self.counting[shape]:
            where = domains.domain_of[rule.key]
            owners = tally.per_key[rule.key][rule.owner]
            if rule.together:
                total += rule.weight * (int(tally.pods[rule.owner]) - owners[where])
            else:  # the owners on nodes without the key pay for one more pod, wherever it goes
                keyless = int(tally.pods[rule.owner]) - int(owners[:-1].sum())  # (the last column stays 0)
                total += rule.weight * (np.where(where < 0, 0, owners[where]) + keyless)
        return total

    def penalty(self, tally: Tally) -> int:
        """The plan's ``spreadPenalty``: every planned pod's pairs under its rules (see the module docstring)."""
        total = 0
        for rule in self.rules:
            mine = tally.per_key[rule.key][rule.owner][:-1]
            counted = (rule.static + tally.count(rule.key, rule.shapes))[:-1]
            if rule.together:
                everyone = _total(tally, rule)
                outside = int(tally.pods[rule.owner]) - int(mine.sum())  # on nodes without the key: apart
                total += rule.weight * (int(mine @ (everyone - counted)) + outside * (everyone - rule.own))
            else:  # a pod on a node without the key pays for every pod the rule counts, as if all shared its domain
                everyone = _total(tally, rule)
                outside = int(tally.pods[rule.owner]) - int(mine.sum())
                total += rule.weight * (
                    int(mine @ counted) - rule.own * int(mine.sum()) + outside * (everyone - rule.own)
                )
        return total


def _total(tally: Tally, rule: SoftRule) -> int:
    return int(rule.static.sum()) + int(tally.pods[rule.shapes].sum())


def soft_spread(pod: Pod, spec: SchedulingSpec, placed: PlacedPods,
                defaults: Sequence[SpreadConstraint] | None) -> tuple[SpreadConstraint, ...]:  # fmt: skip
    """The pod's ``ScheduleAnyway`` constraints, or the defaults with its default selector."""
    return kube_spread.constraints_of(pod, spec, placed, SCHEDULE_ANYWAY, defaults)


def soft_keys(first: Sequence[Pod], specs: Sequence[SchedulingSpec | None], placed: PlacedPods,
              defaults: Sequence[SpreadConstraint] | None) -> Iterable[str]:  # fmt: skip
    for pod, spec in zip(first, specs, strict=True):
        if spec is None:
            continue
        for weighted in (*spec.preferred_affinity, *spec.preferred_anti_affinity):
            yield weighted.term.topology_key
        for constraint in soft_spread(pod, spec, placed, defaults):
            yield constraint.topology_key


def build_soft(first: Sequence[Pod], specs: Sequence[SchedulingSpec | None], placed: PlacedPods,
               defaults: Sequence[SpreadConstraint] | None, domains: Domains) -> SoftRules:  # fmt: skip
    """The soft rules of every shape (``first``: a pod of each)."""
    rules: list[SoftRule] = []
    for owner, (pod, spec) in enumerate(zip(first, specs, strict=True)):
        if spec is None:
            continue
        for weighted, together in [*((w, True) for w in spec.preferred_affinity),
                                   *((w, False) for w in spec.preferred_anti_affinity)]:  # fmt: skip
            rules.append(_term_rule(owner, weighted, together, first, placed, domains))
        for constraint in soft_spread(pod, spec, placed, defaults):
            key = domains.key(constraint.topology_key)
            shapes = selected(first, pod.namespace, constraint.selector)
            static = domains.column(key)
            for other in placed.in_namespace(pod.namespace):
                if not other.is_terminating and constraint.selector.matches(other.labels):
                    _count_at(static, domains, key, placed, other)
            rules.append(SoftRule(owner, key, shapes, static, SPREAD_WEIGHT, False, int(owner in shapes.tolist())))
    owned: list[list[SoftRule]] = [[] for _ in first]
    counting: list[list[SoftRule]] = [[] for _ in first]
    for rule in rules:
        owned[rule.owner].append(rule)
        for shape in rule.shapes.tolist():
            counting[shape].append(rule)
    return SoftRules(tuple(rules), tuple(map(tuple, owned)), tuple(map(tuple, counting)))


def _term_rule(owner: int, weighted: WeightedTerm, together: bool, first: Sequence[Pod], placed: PlacedPods,
               domains: Domains) -> SoftRule:  # fmt: skip
    term = weighted.term
    key = domains.key(term.topology_key)
    labels = placed.namespace_labels
    shapes = np.array([shape for shape, other in enumerate(first) if term.matches(other, labels(other.namespace))],
                      dtype=np.int64)  # fmt: skip
    static = domains.column(key)
    for other in placed.in_namespaces(term):
        if term.matches(other, labels(other.namespace)):
            _count_at(static, domains, key, placed, other)
    weight = max(1, round(weighted.weight / PREFERRED_SCALE))
    return SoftRule(owner, key, shapes, static, weight, together, int(owner in shapes.tolist()))


def _count_at(static: Ints, domains: Domains, key: int, placed: PlacedPods, other: Pod) -> None:
    domain = domains.of(key, placed.node(other.node_name))
    if domain >= 0:
        static[domain] += 1
