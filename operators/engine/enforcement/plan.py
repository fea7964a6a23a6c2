"""What the node agent makes true in the kernel, as a pure function of the node, its NodeSLO and its pods
(docs/components/agent.md): the plan `netaware agent` renders into tc/nftables and prints with ``--dry-run``.

1. **Total**: the node's capacity by the one bandwidth model (annotations, the NodeSLO's
   ``totalNetworkBandwidth``, the default); unknown: no plan (nothing is shaped), with the reason.
2. **Classes**, per direction, by the same rule as the NodeSLO status (:func:`operators.engine.status.nodeslo.
   class_bandwidth`, so a NodeSLO written by Koordinator's slo-controller gives the same numbers): ``system``,
   ``lsr``, ``ls``, ``be`` under a root at the total, each with rate = its request and ceil = its limit, and HTB
   priorities in that order (the guaranteed classes borrow the excess first, as the netqos design's table).
   HTB needs a positive rate: a class that requests nothing gets :data:`MIN_RATE`. A ceil below the rate is
   raised to it (HTB's own rule).
3. **Pods** are sorted into classes by ``koordinator.sh/qosClass`` (SYSTEM; LSE and LSR → lsr; LS; BE); an
   unlabelled pod by its Kubernetes QoS class, as Koordinator reads it (BestEffort → be, Guaranteed and
   Burstable → ls). Only running pods with a pod IP of their own are classified (a hostNetwork pod shares the
   node's address: its traffic is the node's own, reported).
4. **Leaves**: every classified pod has its own leaf under its class in each direction, so its bytes are counted
   by the kernel and the pods of a class share it fairly: ceil = its ``kubernetes.io/<dir>-bandwidth`` when it has
   one (else its class's ceil), rate = its ``kubernetes.io/<dir>-request`` (else :data:`MIN_RATE`: what a pod
   gets beyond that it borrows from its class, at its class's priority), capped by the ceil.
5. **The node's own traffic** (and a hostNetwork pod's, and anything unclassified) goes to the ``host`` leaf under
   ``system``, the HTB default, as koordlet's default class is its system class: kubelet's heartbeats must not
   queue behind best-effort pods.
6. **Class ids** are stable: the classes have fixed minors; a pod's leaf keeps the minor it had (``previous``,
   read back from the kernel), a new leaf takes the lowest free one, so one pod's change is one leaf.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operators.api.errors import FieldError
from operators.api.nodeslo import NodeSLO
from operators.api.quantity import Quantity, parse_bandwidth
from operators.engine.cluster.objects import Node, Pod
from operators.engine.cluster.resources import kubernetes_qos_class
from operators.engine.status.nodeslo import class_bandwidth, node_total

QOS_LABEL = "koordinator.sh/qosClass"
DIRECTIONS = ("egress", "ingress")
MIN_RATE = 8_000  # bits/s: HTB's rate must be positive; a class that requests nothing still gets 1 kB/s
# class name -> (minor id, HTB priority); the root is 1:1, the classes its children, the leaves from FIRST_LEAF on
CLASSES: Mapping[str, tuple[int, int]] = {"system": (0x10, 0), "lsr": (0x20, 1), "ls": (0x30, 2), "be": (0x40, 3)}
ROOT_MINOR = 0x1
FIRST_LEAF, LAST_LEAF = 0x100, 0xFFF  # a leaf's minor is also its ingress filter's u32 node id (12 bits)
LEAVES = LAST_LEAF - FIRST_LEAF + 1
HOST_LEAF = 0x11  # the node's own traffic: a leaf under system, the HTB default (rule 5)
DEFAULT_CLASS = "system"
_LABELS = {"SYSTEM": "system", "LSE": "lsr", "LSR": "lsr", "LS": "ls", "BE": "be"}


@dataclass(frozen=True)
class TrafficClass:
    name: str
    minor: int
    priority: int
    rate: int  # bits/s
    ceil: int
    request: int  # what the NodeSLO asks (0 allowed; ``rate`` is at least HTB's MIN_RATE)


@dataclass(frozen=True)
class PodTraffic:
    """One pod in one direction: its class and its own leaf (``limited``: the ceil is the pod's own)."""

    key: str
    ip: str
    qos_class: str
    minor: int
    rate: int
    ceil: int
    limited: bool = False
    uid: str = ""
    kubernetes_qos: str = ""  # Guaranteed, Burstable or BestEffort: where its cgroup is (the terway-qos backend)


@dataclass(frozen=True)
class DirectionPlan:
    total: int
    classes: tuple[TrafficClass, ...]
    pods: tuple[PodTraffic, ...]
    host_rate: int = MIN_RATE  # the node's own leaf under system: what system's pods leave of its rate (rule 5)
    # class -> its ceil as the NodeSLO gives it (rule 2), before the pods' requests raise ``ceil`` (every level fits
    # its parent): the terway-qos backend's level maxima, which have no per-pod minimum to make room for
    limits: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def klass(self, name: str) -> TrafficClass:
        return next(c for c in self.classes if c.name == name)


@dataclass(frozen=True)
class NodePlan:
    node: str
    directions: Mapping[str, DirectionPlan]  # empty: nothing to shape (see ``problems``)
    problems: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The ``--dry-run`` document: classes, rates and members per direction, bits/s."""
        return {
            "node": self.node,
            "problems": list(self.problems),
            **{
                direction: {
                    "total": plan.total,
                    "classes": [vars(c) for c in plan.classes],
                    "pods": [vars(p) for p in plan.pods],
                }
                for direction, plan in self.directions.items()
            },
        }


def qos_class(pod: Pod) -> str:
    """The pod's network QoS class (rule 3)."""
    labelled = _LABELS.get(pod.labels.get(QOS_LABEL, "").upper())
    if labelled is not None:
        return labelled
    return "be" if kubernetes_qos_class(pod) == "BestEffort" else "ls"


def pod_ip(pod: Pod) -> str:
    """The pod's own IP ("" when it has none, or shares the node's)."""
    spec, status = pod.raw.get("spec") or {}, pod.raw.get("status") or {}
    if spec.get("hostNetwork"):
        return ""
    return str(status.get("podIP") or "")


def node_plan(
    node: Node,
    slo: NodeSLO | None,
    pods: Sequence[Pod],
    default_total: Quantity | None = None,
    previous: Mapping[str, Mapping[str, int]] | None = None,
) -> NodePlan:
    """The plan for ``node`` (see the module docstring); ``previous``: direction -> pod IP -> leaf minor now in
    the kernel (the kernel knows pods by address)."""
    spec = slo.spec.model_dump(mode="json", by_alias=True, exclude_none=True) if slo is not None else {}
    system = spec.get("systemStrategy") or {}
    total, _, problem = node_total(node, system, default_total)
    if total is None:
        return NodePlan(node.name, {}, (f"nothing shaped: {problem}",))
    if total.value() < MIN_RATE:  # HTB cannot shape to less (a 0 would make every class's ceil 0)
        why = f"node {node.name}'s total is {total.value()} bits/s, below HTB's smallest rate {MIN_RATE}"
        return NodePlan(node.name, {}, (f"nothing shaped: {why}",))
    try:
        bandwidth = class_bandwidth(spec.get("resourceQOSStrategy") or {}, total)
    except FieldError as error:  # a NodeSLO written by hand, past the controller's checks
        return NodePlan(node.name, {}, (f"invalid NodeSLO {node.name}: spec.resourceQOSStrategy: {error}",))
    invalid = _impossible(bandwidth, total.value())
    if invalid:
        return NodePlan(node.name, {}, tuple(f"invalid NodeSLO {node.name}: {why}" for why in invalid))
    problems: list[str] = []
    if slo is None:
        problems.append(f"node {node.name} has no NodeSLO: every class requests nothing and may use the whole total")
    members: list[tuple[Pod, str, str]] = []
    seen: set[str] = set()
    for pod in sorted(pods, key=lambda p: p.key):
        if pod.node_name != node.name or pod.is_terminal:
            continue
        ip = pod_ip(pod)
        if not ip:
            problems.append(f"pod {pod.key} has no IP of its own: its traffic is the node's (class {DEFAULT_CLASS})")
            continue
        problem = _unusable_ip(ip, seen)
        if problem:
            problems.append(f"pod {pod.key}: status.podIP {ip[:64]!r} {problem}; not classified")
            continue
        seen.add(ip)
        members.append((pod, ip, qos_class(pod)))
    if len(members) > LEAVES:
        why = f"{len(members)} pods with addresses, more than the {LEAVES} leaf ids a direction has"
        return NodePlan(node.name, {}, (*problems, f"nothing changed: {why}"))
    directions = {}
    for direction in DIRECTIONS:
        asked = {name: _rate_ceil(bandwidth, name, direction) for name in CLASSES}
        wanted: list[PodTraffic] = []
        for pod, ip, klass in members:
            limit = _pod_bandwidth(pod, f"kubernetes.io/{direction}-bandwidth", problems)
            request = _pod_bandwidth(pod, f"kubernetes.io/{direction}-request", problems)
            ceil = limit if limit is not None else asked[klass][1]
            rate = max(MIN_RATE, min(request or MIN_RATE, ceil))
            wanted.append(
                PodTraffic(
                    pod.key, ip, klass, 0, rate, max(ceil, rate), limit is not None, pod.uid, kubernetes_qos_class(pod)
                )
            )
        fitted, host_rate, overbooked = _fit_to_total(total.value(), asked, wanted, direction)
        problems += overbooked
        minors = _leaf_minors(sorted((p.key, p.ip) for p in wanted), (previous or {}).get(direction, {}))
        leaves = sorted(
            (dataclasses.replace(pod, minor=minors[pod.key], rate=fitted.leaves[pod.key]) for pod in wanted),
            key=lambda p: p.key,
        )
        classes = tuple(
            TrafficClass(
                name, minor, priority, fitted.classes[name], max(asked[name][1], fitted.classes[name]), asked[name][2]
            )
            for name, (minor, priority) in CLASSES.items()
        )
        limits = {name: asked[name][1] for name in CLASSES}
        directions[direction] = DirectionPlan(total.value(), classes, tuple(leaves), host_rate, limits)
    return NodePlan(node.name, directions, tuple(problems))


@dataclass(frozen=True)
class FittedRates:
    classes: Mapping[str, int]  # class -> HTB rate
    leaves: Mapping[str, int]  # pod key -> HTB rate


def _fit_to_total(
    total: int, asked: Mapping[str, tuple[int, int, int]], pods: Sequence[PodTraffic], direction: str
) -> tuple[FittedRates, int, list[str]]:
    """Rule 2's rates made to fit their parents (HTB guarantees a child its rate whatever its parent's, so children
    whose rates add up to more than their parent's overrun the parent): each of lsr, ls and be gets at least the
    sum of its pods' leaf rates, system gets what is left and at least its pods' leaves and the host leaf's
    minimum, the host leaf what system's pods leave. When even that exceeds the total (the pods' requests alone
    do), every rate is scaled down in proportion, with the reason, so the total holds (up to HTB's minimum rate
    per leaf)."""
    needs = {name: sum(p.rate for p in pods if p.qos_class == name) for name in CLASSES}
    needs["system"] += MIN_RATE  # the host leaf
    rates = {name: max(asked[name][0], needs[name]) for name in CLASSES if name != DEFAULT_CLASS}
    demand = sum(rates.values()) + needs[DEFAULT_CLASS]
    leaves = {p.key: p.rate for p in pods}
    problems = []
    if demand > total:
        problems.append(
            f"{direction}: the classes' requests and their pods' requests add up to {demand} bits/s, more than the "
            f"node's {total}: every rate is scaled to {total * 100 // demand} % of what was asked"
        )
        leaves = {key: max(MIN_RATE, rate * total // demand) for key, rate in leaves.items()}
        for name, rate in list(rates.items()):
            own = sum(leaves[p.key] for p in pods if p.qos_class == name)
            rates[name] = max(own, rate * total // demand, MIN_RATE)
    system_pods = sum(leaves[p.key] for p in pods if p.qos_class == DEFAULT_CLASS)
    system = max(total - sum(rates.values()), system_pods + MIN_RATE)
    return FittedRates({**rates, DEFAULT_CLASS: system}, leaves), system - system_pods, problems


def _impossible(bandwidth: Any, total: int) -> list[str]:
    """What no HTB tree can honour: the classes requesting more than the node has, a request above its limit."""
    found = []
    for direction in DIRECTIONS:
        asked = {
            name: getattr(getattr(bandwidth, name), f"{direction}_request").value() for name in ("lsr", "ls", "be")
        }
        if sum(asked.values()) > total:
            found.append(
                f"spec.resourceQOSStrategy: the {direction}Requests of lsrClass, lsClass and beClass add up to "
                f"{sum(asked.values())} bits/s, more than the node's {total}"
            )
        for name, request in asked.items():
            limit = getattr(getattr(bandwidth, name), f"{direction}_limit").value()
            if request > limit:
                found.append(
                    f"spec.resourceQOSStrategy.{name}Class.networkQOS.{direction}Request: {request} bits/s is above "
                    f"{direction}Limit {limit}"
                )
    return found


def _unusable_ip(ip: str, seen: set[str]) -> str:
    """Why ``ip`` cannot be classified ("" when it can): IPv4 only, one pod per address."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return "is not an IP address"
    if address.version != 4:
        return "is IPv6 (the agent classifies IPv4)"
    if ip in seen:
        return "is another pod's too"
    return ""


def _rate_ceil(bandwidth: Any, name: str, direction: str) -> tuple[int, int, int]:
    found = getattr(bandwidth, name)
    request = getattr(found, f"{direction}_request").value()
    rate = max(MIN_RATE, request)
    return rate, max(rate, getattr(found, f"{direction}_limit").value()), request


def _pod_bandwidth(pod: Pod, key: str, problems: list[str]) -> int | None:
    text = pod.annotations.get(key)
    if text is None:
        return None
    try:
        value = parse_bandwidth(text, f"metadata.annotations[{key}]").value()
    except FieldError as error:
        problems.append(f"pod {pod.key}: {error}; not limited")
        return None
    return value or None  # 0: no limit asked (the CNI plugin reads it so too)


def _leaf_minors(wanted: Sequence[tuple[str, str]], held: Mapping[str, int]) -> dict[str, int]:
    """Rule 6: pod key -> minor; the minors held (by IP) are kept, new leaves take the lowest free ones."""
    minors = {key: held[ip] for key, ip in wanted if FIRST_LEAF <= held.get(ip, 0) <= LAST_LEAF}
    taken = set(minors.values())
    free = (minor for minor in range(FIRST_LEAF, LAST_LEAF + 1) if minor not in taken)
    for key, _ in wanted:
        if key not in minors:
            minors[key] = next(free)  # node_plan refuses more pods than there are ids
    return minors
