"""What kube-scheduler's InterPodAffinity, PodTopologySpread and NodePorts read of a pod, parsed once per pod object
into hashable values (a pod's :class:`SchedulingSpec` is part of the extender's answer key, so two pods with equal
specs get one answer).

* **Affinity terms** (required and preferred, affinity and anti-affinity) as upstream's ``AffinityTerm``: the label
  selector, the namespaces (the pod's own when the term names none and has no namespace selector), the namespace
  selector (absent: it selects no namespace; ``{}``: every one) and the topology key. ``matchLabelKeys`` and
  ``mismatchLabelKeys`` are merged into the selector as the API server does when it creates the pod
  (``key In (the pod's value)``, ``key NotIn (...)``, for the keys the pod carries): for a stored pod that is already
  the case, and merging again adds nothing.
* **Topology spread constraints** as upstream's ``topologySpreadConstraint``: ``matchLabelKeys`` merged into the
  selector by the scheduler (the keys the pod carries; an absent selector still selects nothing), ``minDomains`` 1
  by default, ``nodeAffinityPolicy`` Honor and ``nodeTaintsPolicy`` Ignore by default.
* **Host ports**: the ports with a ``hostPort`` of the containers and of the init containers that run as long as the
  pod (``restartPolicy: Always``), with upstream's defaults (IP 0.0.0.0, protocol TCP).

A field that does not parse is a :class:`~operators.api.errors.FieldError` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operators.api.errors import FieldError, join_path
from operators.api.selectors import NOTHING, Requirement, Selector, from_label_selector
from operators.engine.cluster.objects import Pod
from operators.memo import per_object

HOSTNAME = "kubernetes.io/hostname"
DO_NOT_SCHEDULE, SCHEDULE_ANYWAY = "DoNotSchedule", "ScheduleAnyway"
HONOR, IGNORE = "Honor", "Ignore"
ALL_IPS = "0.0.0.0"


@dataclass(frozen=True)
class AffinityTerm:
    """A pod affinity or anti-affinity term, as upstream processes it (see the module docstring)."""

    selector: Selector
    namespaces: frozenset[str]
    namespace_selector: Selector  # NOTHING when the term has none
    topology_key: str

    def matches(self, pod: Pod, namespace_labels: Mapping[str, str] | None) -> bool:
        """``pod`` is in one of the term's namespaces (``namespace_labels``: the labels of the pod's namespace, for
        the namespace selector; None: unknown, selected only by an empty selector) and its labels match."""
        if pod.namespace not in self.namespaces and not self.namespace_selector.matches(namespace_labels or {}):
            return False
        return self.selector.matches(pod.labels)


@dataclass(frozen=True)
class WeightedTerm:
    term: AffinityTerm
    weight: int


@dataclass(frozen=True)
class SpreadConstraint:
    """A topology spread constraint as upstream processes it (see the module docstring)."""

    max_skew: int
    topology_key: str
    selector: Selector
    min_domains: int
    node_affinity_policy: str  # Honor | Ignore
    node_taints_policy: str  # Honor | Ignore
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway


@dataclass(frozen=True)
class HostPort:
    ip: str
    protocol: str
    port: int


@dataclass(frozen=True)
class SchedulingSpec:
    """Everything the inter-pod plugins read of a pod, hashable."""

    namespace: str
    labels: tuple[tuple[str, str], ...]
    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()

    @property
    def has_pod_affinity(self) -> bool:
        return bool(self.required_affinity or self.required_anti_affinity or self.preferred_affinity
                    or self.preferred_anti_affinity)  # fmt: skip

    def hard_spread(self) -> tuple[SpreadConstraint, ...]:
        return tuple(c for c in self.spread if c.when_unsatisfiable == DO_NOT_SCHEDULE)

    def soft_spread(self) -> tuple[SpreadConstraint, ...]:
        return tuple(c for c in self.spread if c.when_unsatisfiable == SCHEDULE_ANYWAY)


def scheduling_spec(pod: Pod) -> SchedulingSpec:
    """The pod's :class:`SchedulingSpec` (kept per pod object: replicas share their parsed parts)."""
    return per_object(_SPECS, pod.raw, _SPECS_KEPT, _parse, pod)


_SPECS: dict[int, tuple[object, SchedulingSpec]] = {}
_SPECS_KEPT = 50_000


def _parse(pod: Pod) -> SchedulingSpec:
    spec = pod.raw.get("spec") or {}
    affinity = spec.get("affinity") or {}
    if not isinstance(affinity, Mapping):
        raise FieldError("spec.affinity", affinity, "expected an object")
    pod_affinity = _object(affinity.get("podAffinity"), "spec.affinity.podAffinity")
    anti_affinity = _object(affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity")
    return SchedulingSpec(
        namespace=pod.namespace,
        labels=tuple(sorted(pod.labels.items())),
        required_affinity=_terms(pod, pod_affinity, "spec.affinity.podAffinity"),
        required_anti_affinity=_terms(pod, anti_affinity, "spec.affinity.podAntiAffinity"),
        preferred_affinity=_weighted(pod, pod_affinity, "spec.affinity.podAffinity"),
        preferred_anti_affinity=_weighted(pod, anti_affinity, "spec.affinity.podAntiAffinity"),
        spread=_spread(pod, spec.get("topologySpreadConstraints")),
        host_ports=_host_ports(spec),
    )


def _object(raw: Any, path: str) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise FieldError(path, raw, "expected an object")
    return raw


def _list(raw: Any, path: str) -> Sequence[Any]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise FieldError(path, raw, "expected a list")
    return raw


def _terms(pod: Pod, affinity: Mapping[str, Any], path: str) -> tuple[AffinityTerm, ...]:
    where = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
    return tuple(
        affinity_term(pod, term, f"{where}[{index}]")
        for index, term in enumerate(_list(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), where))
    )


def _weighted(pod: Pod, affinity: Mapping[str, Any], path: str) -> tuple[WeightedTerm, ...]:
    where = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
    found = []
    for index, raw in enumerate(_list(affinity.get("preferredDuringSchedulingIgnoredDuringExecution"), where)):
        at = f"{where}[{index}]"
        item = _object(raw, at)
        weight = item.get("weight")
        if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
            raise FieldError(f"{at}.weight", weight, "expected an integer from 1 to 100")
        found.append(WeightedTerm(affinity_term(pod, item.get("podAffinityTerm"), f"{at}.podAffinityTerm"), weight))
    return tuple(found)


def affinity_term(pod: Pod, raw: Any, path: str) -> AffinityTerm:
    """One ``PodAffinityTerm`` of ``pod`` as upstream processes it (see the module docstring)."""
    term = _object(raw, path)
    key = term.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise FieldError(f"{path}.topologyKey", key, "expected a label key")
    selector = from_label_selector(term.get("labelSelector"), f"{path}.labelSelector")
    selector = _with_label_keys(selector, pod, term.get("matchLabelKeys"), "In", f"{path}.matchLabelKeys")
    selector = _with_label_keys(selector, pod, term.get("mismatchLabelKeys"), "NotIn", f"{path}.mismatchLabelKeys")
    names = _list(term.get("namespaces"), f"{path}.namespaces")
    if not all(isinstance(name, str) for name in names):
        raise FieldError(f"{path}.namespaces", names, "expected a list of namespace names")
    raw_selector = term.get("namespaceSelector")
    namespaces = frozenset(names) if names or raw_selector is not None else frozenset({pod.namespace})
    namespace_selector = from_label_selector(raw_selector, f"{path}.namespaceSelector") if raw_selector is not None \
        else NOTHING  # fmt: skip
    return AffinityTerm(selector, namespaces, namespace_selector, key)


def _with_label_keys(selector: Selector, pod: Pod, raw: Any, operator: str, path: str) -> Selector:
    """``selector`` and, per key of ``raw`` the pod carries, ``key <operator> (its value)``. A selector that
    matches nothing stays so (upstream adds no requirement to a nil selector's Nothing)."""
    keys = _list(raw, path)
    if not all(isinstance(key, str) for key in keys):
        raise FieldError(path, keys, "expected a list of label keys")
    added = tuple(Requirement(key, operator, frozenset({pod.labels[key]})) for key in keys if key in pod.labels)
    if not added or selector.matches_nothing:
        return selector
    return Selector(tuple(dict.fromkeys(selector.requirements + added)))


def _spread(pod: Pod, raw: Any) -> tuple[SpreadConstraint, ...]:
    found = []
    for index, entry in enumerate(_list(raw, "spec.topologySpreadConstraints")):
        at = f"spec.topologySpreadConstraints[{index}]"
        item = _object(entry, at)
        skew = item.get("maxSkew")
        if not isinstance(skew, int) or isinstance(skew, bool) or skew < 1:
            raise FieldError(f"{at}.maxSkew", skew, "expected an integer of at least 1")
        key = item.get("topologyKey")
        if not isinstance(key, str) or not key:
            raise FieldError(f"{at}.topologyKey", key, "expected a label key")
        when = item.get("whenUnsatisfiable")
        if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise FieldError(f"{at}.whenUnsatisfiable", when, f"expected {DO_NOT_SCHEDULE} or {SCHEDULE_ANYWAY}")
        domains = item.get("minDomains", 1)
        if domains is None:
            domains = 1
        if not isinstance(domains, int) or isinstance(domains, bool) or domains < 1:
            raise FieldError(f"{at}.minDomains", domains, "expected an integer of at least 1")
        policies = []
        for name, default in (("nodeAffinityPolicy", HONOR), ("nodeTaintsPolicy", IGNORE)):
            value = item.get(name) or default
            if value not in (HONOR, IGNORE):
                raise FieldError(f"{at}.{name}", value, f"expected {HONOR} or {IGNORE}")
            policies.append(value)
        selector = from_label_selector(item.get("labelSelector"), f"{at}.labelSelector")
        keys = _list(item.get("matchLabelKeys"), f"{at}.matchLabelKeys")
        if not all(isinstance(name, str) for name in keys):
            raise FieldError(f"{at}.matchLabelKeys", keys, "expected a list of label keys")
        merged = tuple(Requirement(name, "In", frozenset({pod.labels[name]})) for name in keys if name in pod.labels)
        # upstream's mergeLabelSetWithSelector: the pod's labels, then the constraint's requirements; nil stays Nothing
        if merged and not selector.matches_nothing:
            selector = Selector(tuple(dict.fromkeys(merged + selector.requirements)))
        found.append(SpreadConstraint(skew, key, selector, domains, policies[0], policies[1], when))
    return tuple(found)


def _host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    found: list[HostPort] = []
    for field in ("initContainers", "containers"):
        for index, container in enumerate(_list(spec.get(field), f"spec.{field}")):
            if not isinstance(container, Mapping):
                continue
            if field == "initContainers" and container.get("restartPolicy") != "Always":
                continue  # runs before the pod's containers, not beside them
            for number, port in enumerate(_list(container.get("ports"), join_path(f"spec.{field}[{index}]", "ports"))):
                if not isinstance(port, Mapping):
                    continue
                host = port.get("hostPort")
                if not isinstance(host, int) or isinstance(host, bool) or host <= 0:
                    continue
                ip = port.get("hostIP") or ALL_IPS
                protocol = port.get("protocol") or "TCP"
                if not isinstance(ip, str) or not isinstance(protocol, str):
                    raise FieldError(
                        f"spec.{field}[{index}].ports[{number}]", port, "expected hostIP and protocol strings"
                    )
                found.append(HostPort(ip, protocol, host))
    return tuple(found)
